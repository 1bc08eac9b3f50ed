// Helpers shared by the unit and integration tests.
#pragma once

#include "document_loader.h"
#include <optional>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spanscope::test {

/// Absolute path of the tests/ folder in the source tree.
std::string data_dir();
/// Path of the default real model if it is installed (same search as the CLI without --model),
/// std::nullopt otherwise. Tests that need it GTEST_SKIP() with a printed reason.
std::optional<std::string> real_model_path();
/// Varied prose of at least min_bytes bytes: sentences from a word list (fixed by seed),
/// paragraphs separated by blank lines. ~1 token per byte with the tiny models' vocabulary.
std::string sample_prose(uint32_t seed, size_t min_bytes);
/// A loaded UTF-8 plain-text document holding `text` (one offset anchor), as the loaders make.
LoadedDocument text_document(const std::string& text);
/// The whole content of a file ("" if it cannot be read).
std::string read_file(const std::string& path);
/// A fresh temporary directory (removed by the OS's /tmp policy; tests remove what they write).
std::string temp_dir();

} // namespace spanscope::test
