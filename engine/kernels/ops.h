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

/// Cosines and sines of the rotary angles for a run of positions:
/// angle(t, i) = pos[t] * base^(-2i/d), i < d/2 (Su et al. 2021, RoFormer §3.4.2), computed in
/// double and stored as float. cos, sin: [n_tokens][d/2].
struct RopeTable {
    int d = 0;
    std::vector<float> cos, sin;
    RopeTable(const int32_t* pos, int64_t n_tokens, int d, double base);
};

/// Rotary position embedding, rotate-half ("NeoX") layout: (x[i], x[i+d/2]) rotated by
/// angle(t, i). x: [n_tokens][n_heads][d] in place, n_tokens as in the table.
void rope_neox(float* x, const RopeTable& table, int64_t n_tokens, int n_heads);
/// Partial NeoX RoPE (llama.cpp's ggml_rope_ext with n_rot < head_dim, rope type NEOX): the
/// first table.d elements of each head are rotated as rope_neox does (pairs (i, i + d/2), angle
/// pos·base^(−2i/d)), the other head_dim − table.d pass unchanged.
/// x: [n_tokens][n_heads][head_dim] in place; table.d ≤ head_dim, even.
void rope_neox_partial(float* x, const RopeTable& table, int64_t n_tokens, int n_heads,
                       int head_dim);

/// Move keys rotated at position p to position p + delta: rotate every (x[i], x[i+d/2]) pair by
/// delta * base^(-2i/d). RoPE rotations compose (R(p + delta) = R(delta) R(p); RoFormer §3.4.2),
/// so this equals rotating the unrotated key at p + delta up to float rounding.
/// x: [n_rows][n_heads][d] in place; base: the layer's own RoPE base (tests/README.md, failure mode
/// 1).
void rope_shift_neox(float* x, int64_t n_rows, int n_heads, int d, int32_t delta, double base);
/// The same move for partial NeoX RoPE (rope_neox_partial): the first rope_dims elements of
/// each head are rotated by delta as rope_shift_neox rotates a head of rope_dims, the other
/// head_dim − rope_dims pass unchanged (they carry no position). rope_dims = 0 (NoPE): nothing
/// moves. x: [n_rows][n_heads][head_dim] in place; rope_dims even, ≤ head_dim.
void rope_shift_neox_partial(float* x, int64_t n_rows, int n_heads, int head_dim, int rope_dims,
                             int32_t delta, double base);
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
