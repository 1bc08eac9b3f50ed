// Scaled dot-product attention on the device over f16 key/value rows (the device counterpart of
// attention.h; Vaswani et al. 2017, §3.2.1, grouped-query heads, per-key position mask), for
// prefill (many queries) and decode (one), global and sliding-window layers alike.
#pragma once

#include "engine/kernels/attention.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spanscope::cuda {

/// Largest head_dim the kernel takes (Gemma 3: 256).
constexpr int kMaxHeadDim = 512;

/// out[i][h][:] = softmax_j(scale · q[i][h]·k[j][g] masked) · v[j][g], g = h / (n_head /
/// n_kv_head); key j is visible to query i iff kpos[j] <= qpos[i] and (window == 0 or
/// qpos[i] − kpos[j] < window). A query that sees no key gets zeros.
/// q: [n_q][n_head][head_dim] fp32 (rotated at qpos); qpos: [n_q];
/// k, v: [n_kv][n_kv_head][head_dim] f16 (rows in any order; keys rotated at kpos); kpos: [n_kv];
/// out: [n_q][n_head][head_dim] fp32. All device pointers.
/// keys_sorted: kpos is non-decreasing, so a query stops reading at its first invisible key
/// past its position (causal prefill reads half the keys).
/// Scores, softmax (online, row maximum subtracted: Milakov & Gimelshein 2018) and the
/// weighted sum of values are fp32. Throws std::invalid_argument for head_dim > kMaxHeadDim or
/// n_head not a multiple of n_kv_head; CudaError when the launch fails.
void attention(const AttentionShape& shape, const float* q, const int32_t* qpos, int64_t n_q,
               const __half* k, const __half* v, const int32_t* kpos, int64_t n_kv, float* out,
               bool keys_sorted, cudaStream_t stream);

} // namespace spanscope::cuda
