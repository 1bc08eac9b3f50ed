// Internal to attention.cpp: the two float matrix products of attention, our own kernels at each
// kernel level (quant.h), so that attention's speed does not rest on a BLAS library's CPU
// detection. Rows are strided; every length is in elements.
#pragma once

#include <algorithm>
#include <cstdint>

namespace spanscope::attention_detail {

/// s[i * lds + j] = scale · Σ_c q[i * ldq + c] · k[j * ldk + c], for i < nq, j < nk, c < d.
using ScoresFn = void (*)(const float* q, int64_t ldq, int64_t nq, const float* k, int64_t ldk,
                          int64_t nk, int d, float scale, float* s, int64_t lds);
/// Keys per panel of the transposed keys.
inline constexpr int64_t kKeyPanel = 32;
/// The same scores from transposed keys, in panels of kKeyPanel keys: element c of key j at
/// kt[(j / kKeyPanel) * d * kKeyPanel + c * kKeyPanel + j % kKeyPanel], so a tile of keys reads
/// consecutive memory. Many queries (prefill): the keys are vectorised, no lane sums are needed.
using ScoresTransposedFn = void (*)(const float* q, int64_t ldq, int64_t nq, const float* kt,
                                    int64_t nk, int d, float scale, float* s, int64_t lds);
/// o[i * ldo + c] = Σ_j p[i * ldp + j] · v[j * ldv + c], for i < nq, c < d, j < nk.
using WeightedSumFn = void (*)(const float* p, int64_t ldp, int64_t nq, const float* v, int64_t ldv,
                               int64_t nk, int d, float* o, int64_t ldo);

struct Kernels {
    ScoresFn scores = nullptr;
    ScoresTransposedFn scores_transposed = nullptr;
    WeightedSumFn weighted_sum = nullptr;
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();

} // namespace spanscope::attention_detail
