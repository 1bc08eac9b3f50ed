// Helpers shared by the unit and integration tests.
#pragma once

#include <optional>
#include <string>

namespace spanscope::test {

/// Absolute path of the tests/ folder in the source tree.
std::string data_dir();
/// Path of the default real model if it is installed (same search as the CLI without --model),
/// std::nullopt otherwise. Tests that need it GTEST_SKIP() with a printed reason.
std::optional<std::string> real_model_path();
/// A fresh temporary directory (removed by the OS's /tmp policy; tests remove what they write).
std::string temp_dir();

} // namespace spanscope::test
