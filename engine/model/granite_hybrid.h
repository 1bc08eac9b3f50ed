// IBM Granite 4.0-H (GGUF architecture `granitehybrid`): Mamba-2 layers and attention layers
// in one residual stack, with Granite's embedding, residual, attention and logit multipliers.
// llama.cpp's src/models/granite-hybrid.cpp and conversion/granite.py (GraniteHybridModel) are
// the reference for tensor names, metadata keys and the forward pass.
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

class ModelFile;

/// A granitehybrid file's hyper-parameters, read from its metadata and tensor table.
struct GraniteHybridHparams {
    /// Sizes, identity, n_vocab (token_embd.weight's rows) and one LayerInfo per layer
    /// (Mamba-2 or NoPE attention); info.n_head / n_head_kv are the first attention layer's.
    ModelInfo info;
    float embedding_scale = 1.0f; ///< embeddings are multiplied by it
    float residual_scale = 1.0f;  ///< each block's output is multiplied by it
    float logit_scale = 1.0f;     ///< logits are multiplied by it (1 / the file's logit_scale)
    int64_t n_expert = 0;         ///< 0: dense feed-forward
    int64_t n_expert_used = 0;    ///< experts per token (MoE files)
    int64_t n_ff_shexp = 0;       ///< the shared expert's width; 0: none
};

/// Read and check a granitehybrid file's hyper-parameters without reading any weight: every
/// key, the layer kinds, and the tensors that decide the variant (attention or feed-forward
/// biases, fused QKV, a router without experts are refused by their presence). Model::load and
/// describe_model_file (model_summary.h) both read these files through it. Throws ModelError
/// as load_granite_hybrid does for these; GgufError for a key of the wrong type.
GraniteHybridHparams read_granite_hybrid_hparams(const ModelFile& f);

/// Build a Granite hybrid model from an opened GGUF (general.architecture == "granitehybrid").
/// A layer is recurrent (Mamba-2) iff granitehybrid.attention.head_count_kv is 0 for it.
/// The feed-forward is dense SwiGLU, or MoE when granitehybrid.expert_count > 0 (with a shared
/// expert when expert_shared_feed_forward_length > 0).
/// Throws ModelError naming the first missing or out-of-range key, missing or mis-shaped
/// tensor, or an unsupported variant (RoPE, biases, experts without a gate).
std::unique_ptr<Model> load_granite_hybrid(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
