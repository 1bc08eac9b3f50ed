// Vectorised element-wise kernels (softmax exponentials, GeGLU) with a scalar fallback,
// selected at run time like the quantisation kernels (quant.h's kernel level).
#pragma once

#include <cstdint>

namespace spanscope {

/// x[i] <- exp(x[i] - shift) for i < n; returns the sum of the results (in double).
/// -inf inputs give 0. The AVX2 path uses a Cody-Waite range reduction and a degree-6
/// polynomial (Cephes expf; Moshier 1989, "Methods and Programs for Mathematical
/// Functions"), relative error below 3e-7 over [-87, 88] (tests/unit/test_ops.cpp).
double exp_shifted_sum(float* x, int64_t n, float shift);

/// The largest of x[0..n) (n >= 1). With NaNs among them the result is one of the elements,
/// possibly a NaN (the caller's sums are NaN then anyway).
float max_value(const float* x, int64_t n);

/// g[i] <- gelu_tanh(g[i]) * u[i], written as x / (1 + exp(-2·sqrt(2/pi)·(x + 0.044715·x³)))
/// (equal to 0.5·x·(1 + tanh(...)), Hendrycks & Gimpel 2016).
void geglu_tanh_rows(float* g, const float* u, int64_t n);

namespace simd_detail {
double exp_shifted_sum_avx2(float* x, int64_t n, float shift);
float max_value_avx2(const float* x, int64_t n);
void geglu_tanh_avx2(float* g, const float* u, int64_t n);
} // namespace simd_detail

} // namespace spanscope
