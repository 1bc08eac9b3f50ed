// Tiny Gemma-3-shaped models written by the tests themselves (random weights), so that the
// forward pass, the memories and the session run in milliseconds without the real file.
#pragma once

#include "engine/kernels/tensor_type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope::test {

struct TinyGemma3Config {
    int n_layer = 4;
    int n_embd = 64;
    int n_ff = 128;
    int n_head = 4;
    int n_head_kv = 2;
    int head_dim = 32;
    int n_ctx = 256;
    int sliding_window = 8;
    int sliding_pattern = 2; ///< written as gemma3.attention.sliding_window_pattern
    float rope_base = 1000000.0f;
    float rope_base_local = 10000.0f;
    bool write_local_base = true;             ///< write gemma3.rope.freq_base_swa
    bool write_pattern = true;                ///< write gemma3.attention.sliding_window_pattern
    TensorType matrix_type = TensorType::F32; ///< type of the projection matrices
    TensorType embd_type = TensorType::F32;
    uint64_t seed = 1;
    std::string name = "tiny gemma3 test model"; ///< general.name
    /// general.architecture and the keys' prefix. Another one than gemma3 gets the same keys
    /// and tensors (a `llama` file loads: its loader ignores Gemma's extra norms), except the
    /// per-head q/k norms, which only gemma3 and qwen3 files have.
    std::string architecture = "gemma3";
    /// The same pieces with other scores (word pieces' priorities reversed): another tokenizer
    /// over the same weights.
    bool alternate_scores = false;
};

/// The vocabulary of every tiny model: <pad> <eos> <bos> <unk> <start_of_turn> <end_of_turn>,
/// "\n" (user-defined), 256 byte pieces, then "▁" and a few words. Size: tiny_vocab().size().
std::vector<std::string> tiny_vocab();

/// Write a tiny Gemma 3 GGUF to `path`. Weights ~ N(0, 0.02-ish), norms around 1.
void write_tiny_gemma3(const std::string& path, const TinyGemma3Config& cfg);

/// A tiny model slow enough that prefilling a few thousand tokens takes a measurable time, so a
/// test can interrupt it: 6 layers, n_embd 128, n_ff 512, a context of 2048 tokens and a sliding
/// window of 16 (the crash-safety, read-only and CLI-waiting tests).
TinyGemma3Config slower_tiny_gemma3();

/// A tiny Granite 4.0-H (`granitehybrid`): Mamba-2 layers and NoPE attention layers, dense
/// SwiGLU feed-forward, Granite's multipliers; names and keys as llama.cpp's converter writes
/// them (conversion/granite.py GraniteHybridModel, conversion/mamba.py Mamba2Model).
struct TinyGraniteHybridConfig {
    int n_layer = 4;
    std::vector<int> attention_layers{2}; ///< the others are Mamba-2 (head_count_kv 0)
    int n_embd = 32;
    int n_ff = 64;
    int n_head = 4;
    int n_head_kv = 2;
    int d_state = 16;
    int ssm_heads = 8; ///< ssm.time_step_rank; d_inner = 2·n_embd
    int ssm_groups = 2;
    int d_conv = 4;
    int n_ctx = 512;
    float embedding_scale = 2.0f;
    float residual_scale = 0.5f;
    float attention_scale = 0.125f;
    float logit_scale = 2.0f;
    int expert_count = 0; ///< > 0: an MoE file (Granite 4.0-H Tiny/Small), experts n_ff wide
    int expert_used = 2;  ///< granitehybrid.expert_used_count
    int n_ff_shexp = 48;  ///< shared expert width (MoE files)
    uint64_t seed = 11;
    std::string skip_tensor;    ///< a tensor name not to write (tests of the errors)
    std::string reshape_tensor; ///< a tensor written one row short (tests of the errors)
};
void write_tiny_granite_hybrid(const std::string& path, const TinyGraniteHybridConfig& cfg);

/// A tiny Qwen3-Next (`qwen3next`): Gated DeltaNet layers and gated attention layers every
/// full_attention_interval-th layer, MoE feed-forward with a gated shared expert; names and keys
/// as llama.cpp's converter writes them (conversion/qwen.py Qwen3NextModel).
struct TinyQwen3NextConfig {
    int n_layer = 4;
    int full_attention_interval = 2;
    int n_embd = 32;
    int n_head = 4;
    int n_head_kv = 2;
    int head_dim = 16;
    int rope_dims = 4; ///< partial rotary factor 0.25
    float rope_base = 10000000.0f;
    int n_expert = 4;
    int n_expert_used = 2;
    int n_ff_exp = 16;
    int n_ff_shexp = 24;
    int linear_k_heads = 2;
    int linear_v_heads = 4;
    int linear_head_dim = 8; ///< d_k = d_v
    int d_conv = 4;
    int n_ctx = 512;
    uint64_t seed = 12;
    std::string skip_tensor;
    std::string reshape_tensor;
};
void write_tiny_qwen3next(const std::string& path, const TinyQwen3NextConfig& cfg);

} // namespace spanscope::test
