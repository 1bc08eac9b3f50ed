// Qwen3-Next (GGUF architecture `qwen3next`): Gated DeltaNet layers and gated full-attention
// layers, each followed by a mixture-of-experts feed-forward with a gated shared expert.
// llama.cpp's src/models/qwen3next.cpp and conversion/qwen.py (Qwen3NextModel) are the
// reference for tensor names, metadata keys and the forward pass.
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

class ModelFile;

/// A qwen3next file's hyper-parameters, read from its metadata and tensor table.
struct Qwen3NextHparams {
    /// Sizes, identity, n_vocab (token_embd.weight's rows) and one LayerInfo per layer (Gated
    /// DeltaNet, or gated attention with partial RoPE: LayerInfo::rope_dims).
    ModelInfo info;
    int rope_dims = 0;         ///< elements of each head RoPE rotates
    int64_t n_expert = 0;      ///< experts per layer (> 0)
    int64_t n_expert_used = 0; ///< experts per token
    int64_t n_ff_exp = 0;      ///< each expert's width
    int64_t n_ff_shexp = 0;    ///< the shared expert's width
};

/// Read and check a qwen3next file's hyper-parameters without reading any weight: every key,
/// the layer kinds, and the tensors that decide the variant (attention biases, fused QKV in
/// attention layers, fused gate/up experts are refused by their presence). Model::load and
/// describe_model_file (model_summary.h) both read these files through it. Throws ModelError
/// as load_qwen3next does for these; GgufError for a key of the wrong type.
Qwen3NextHparams read_qwen3next_hparams(const ModelFile& f);

/// Build a Qwen3-Next model from an opened GGUF (general.architecture == "qwen3next").
/// Layer il is recurrent per qwen3next.attention.recurrent_layers when present, else unless
/// (il + 1) is a multiple of qwen3next.full_attention_interval (default 4, as llama.cpp).
/// Throws ModelError naming the first missing or out-of-range key, missing or mis-shaped
/// tensor, or an unsupported variant (no experts, d_v ≠ d_k, multi-token-prediction layers).
std::unique_ptr<Model> load_qwen3next(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
