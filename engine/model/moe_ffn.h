// Mixture-of-experts feed-forward with an optional gated shared expert, as llama.cpp's
// build_moe_ffn (src/llama-graph.cpp) computes it for softmax-gated models with normalised
// top-k weights (Qwen2-MoE, Qwen3-Next: Qwen team 2024/2025; Shazeer et al. 2017 for the top-k
// gate). For each token x:
//   p = softmax(W_router·x)                       over all n_expert experts
//   S = the n_used experts with the largest p      (ties: lower index first)
//   w_e = p_e / max(Σ_{e∈S} p_e, 6.103515625e-5)  (norm_w; the clamp is llama.cpp's, the
//                                                   smallest normal f16)
//   y = Σ_{e∈S} w_e · down_e(silu(gate_e·x) ⊙ up_e·x)
//   y += sigmoid(w_shared_gate·x) · down_s(silu(gate_s·x) ⊙ up_s·x)   (when a shared expert)
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Weights of one layer's MoE block; nothing is copied (pointers must outlive it).
struct MoeWeights {
    int64_t n_embd = 0;
    int64_t n_ff_expert = 0; ///< hidden width of each routed expert
    int64_t n_expert = 0;
    int64_t n_used = 0;                 ///< experts per token, 1 ≤ n_used ≤ n_expert
    WeightMatrix router;                ///< rows n_expert, cols n_embd (ffn_gate_inp)
    std::vector<WeightMatrix> gate, up; ///< n_expert × (rows n_ff_expert, cols n_embd)
    std::vector<WeightMatrix> down;     ///< n_expert × (rows n_embd, cols n_ff_expert)
    int64_t n_ff_shared = 0;            ///< 0 = no shared expert
    WeightMatrix shared_gate, shared_up, shared_down; ///< ffn_{gate,up,down}_shexp
    const float* shared_router = nullptr; ///< [n_embd] ffn_gate_inp_shexp, or nullptr: no gate
};

/// y = MoE(x) for n tokens: x, y: [n][n_embd] (y may not alias x).
/// Throws std::invalid_argument when the weights do not fit each other.
void moe_ffn(const MoeWeights& w, const float* x, int64_t n, float* y, ThreadPool& pool);

} // namespace spanscope
