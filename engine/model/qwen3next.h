// Qwen3-Next (GGUF architecture `qwen3next`): Gated DeltaNet layers and gated full-attention
// layers, each followed by a mixture-of-experts feed-forward with a gated shared expert.
// llama.cpp's src/models/qwen3next.cpp and conversion/qwen.py (Qwen3NextModel) are the
// reference for tensor names, metadata keys and the forward pass.
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

/// Build a Qwen3-Next model from an opened GGUF (general.architecture == "qwen3next").
/// Layer il is recurrent per qwen3next.attention.recurrent_layers when present, else unless
/// (il + 1) is a multiple of qwen3next.full_attention_interval (default 4, as llama.cpp).
/// Throws ModelError naming the first missing or out-of-range key, missing or mis-shaped
/// tensor, or an unsupported variant (no experts, d_v ≠ d_k, multi-token-prediction layers).
std::unique_ptr<Model> load_qwen3next(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
