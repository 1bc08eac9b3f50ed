// Gemma 3 text model (Gemma Team 2025, "Gemma 3 Technical Report", §2; llama.cpp's
// src/models/gemma3.cpp is the reference for tensor names and metadata keys).
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

/// Build a Gemma 3 model from an opened GGUF (general.architecture == "gemma3").
/// Throws ModelError naming the first missing key, missing tensor or shape mismatch.
std::unique_ptr<Model> load_gemma3(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
