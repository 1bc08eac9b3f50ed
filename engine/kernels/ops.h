// Element-wise building blocks of the forward pass, shared by every architecture.
#pragma once

#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// RMSNorm (Zhang & Sennrich 2019): x[r][:] <- x[r][:] / sqrt(mean(x[r]^2) + eps) * w.
/// x: [rows][n] in place; w: [n] (Gemma's "1 + w" is already folded into w by the converter).
/// The mean square is summed in double, in eight interleaved partial sums added in a fixed order.
void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps);
/// The same, the rows spread over `pool` (each row computed as above, so the result does not
/// depend on the thread count).
void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps, ThreadPool& pool);

/// GeGLU with the tanh approximation of GELU (Shazeer 2020; Hendrycks & Gimpel 2016 eq. for
/// tanh GELU): g[i] <- gelu_tanh(g[i]) * u[i], n elements.
void geglu_tanh(float* g, const float* u, int64_t n);

/// y[i] += x[i], n elements.
void add_inplace(float* y, const float* x, int64_t n);
/// SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"): g[i] <- silu(g[i]) * u[i],
/// silu(v) = v / (1 + exp(−v)); n elements (llama.cpp's build_ffn with LLM_FFN_SILU, PAR).
void swiglu(float* g, const float* u, int64_t n);
/// v <- 1 / (1 + exp(−v)), n elements.
void sigmoid_inplace(float* v, int64_t n);

} // namespace spanscope
