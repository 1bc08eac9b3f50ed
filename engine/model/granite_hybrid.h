// IBM Granite 4.0-H (GGUF architecture `granitehybrid`): Mamba-2 layers and attention layers
// in one residual stack, with Granite's embedding, residual, attention and logit multipliers.
// llama.cpp's src/models/granite-hybrid.cpp and conversion/granite.py (GraniteHybridModel) are
// the reference for tensor names, metadata keys and the forward pass.
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

/// Build a Granite hybrid model from an opened GGUF (general.architecture == "granitehybrid").
/// A layer is recurrent (Mamba-2) iff granitehybrid.attention.head_count_kv is 0 for it.
/// The feed-forward is dense SwiGLU, or MoE when granitehybrid.expert_count > 0 (with a shared
/// expert when expert_shared_feed_forward_length > 0).
/// Throws ModelError naming the first missing or out-of-range key, missing or mis-shaped
/// tensor, or an unsupported variant (RoPE, biases, experts without a gate).
std::unique_ptr<Model> load_granite_hybrid(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
