// Scaled dot-product attention over a set of cached rows, the one building block shared by
// every memory policy. Source: Vaswani et al. 2017, "Attention Is All You Need", §3.2.1, with
// grouped-query heads (Ainslie et al. 2023, GQA) and a per-key position mask.
#pragma once

#include "engine/kernels/thread_pool.h"

#include <cstdint>

namespace spanscope {

/// Shapes of one attention layer.
struct AttentionShape {
    int n_head = 0;     ///< query heads
    int n_kv_head = 0;  ///< key/value heads; query head h reads kv head h / (n_head / n_kv_head)
    int head_dim = 0;   ///< elements per head (keys and values)
    float scale = 1.0f; ///< multiplies q·k before the softmax
    int window = 0;     ///< sliding window in tokens, 0 = none: key visible iff
                        ///< kpos <= qpos and (window == 0 or qpos - kpos < window)
};

/// out[i][h][:] = softmax_j(scale * q[i][h]·k[j][g] masked) · v[j][g], g = kv head of h.
/// q:   [n_q][n_head][head_dim], rotated at qpos
/// k,v: [n_kv][n_kv_head][head_dim] (rows in any order; k rotated at kpos)
/// out: [n_q][n_head][head_dim]
/// A query that sees no key gets a zero output (cannot happen when its own row is stored).
/// Accumulation is fp32; the softmax subtracts the row maximum.
/// keys_sorted: the caller guarantees kpos is non-decreasing; each query block then reads only
/// the keys its positions can see (causal and window limits), which halves causal prefill.
/// key_mass: optional [n_kv_head][n_kv]; key_mass[g][j] += Σ over the queries and the query
/// heads of kv head g of the attention probability of key j (the accumulated attention that
/// H2O ranks keys by, Zhang et al. 2023, §3.2; SnapKV's votes, Li et al. 2024, §4.2).
void attention(const AttentionShape& shape, const float* q, const int32_t* qpos, int64_t n_q,
               const float* k, const float* v, const int32_t* kpos, int64_t n_kv, float* out,
               ThreadPool& pool, bool keys_sorted = false, float* key_mass = nullptr);

} // namespace spanscope
