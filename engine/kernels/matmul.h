// Products of activations with (possibly quantised) weight matrices.
#pragma once

#include "engine/kernels/tensor_type.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <initializer_list>

namespace spanscope {

struct GgufTensorInfo;

/// A 2-D weight matrix as stored in GGUF: `rows` rows of `cols` elements (ne[0] = cols), each
/// row row_bytes(type, cols) bytes, in the file's mapping (never copied, never dequantised as a
/// whole).
struct WeightMatrix {
    TensorType type = TensorType::F32;
    int64_t cols = 0;
    int64_t rows = 0;
    const uint8_t* data = nullptr;
    size_t row_stride = 0; ///< bytes between rows

    /// View of a 2-D GGUF tensor. Throws std::runtime_error if it is not 2-D.
    static WeightMatrix from(const GgufTensorInfo& t);
    const uint8_t* row(int64_t r) const { return data + r * row_stride; }
};

/// y[t][r] = sum_c x[t][c] * W[r][c] for t < n_tokens (y = x · Wᵀ).
/// x: [n_tokens][w.cols] floats (row-major), y: [n_tokens][w.rows] floats.
/// Few tokens (< 8): x is quantised to the weight's vec_dot_type and each row uses vec_dot
/// (integer SIMD), rows split over the pool. Many tokens: the integer matrix product (qgemm.h)
/// for the quantised types it supports; float weights are dequantised in panels and multiplied
/// with OpenBLAS sgemm.
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

/// y_i = x · W_iᵀ for several matrices of one input (a layer's query, key and value projections;
/// its gate and up projections), as matmul each, with x quantised once for all of them.
/// outputs: {W_i, y_i} with y_i: [n_tokens][W_i.rows]; every W_i.cols the same.
struct MatmulOutput {
    const WeightMatrix* w;
    float* y;
};
void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, const float* x,
                         int64_t n_tokens, ThreadPool& pool);

/// Same as matmul, restricted to output rows [row_begin, row_end) written densely:
/// y: [n_tokens][row_end - row_begin].
void matmul_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t n_tokens, float* y, ThreadPool& pool);

/// How matmul multiplies many tokens (>= 8) by quantised weights: Integer, the integer matrix
/// product (qgemm.h, the default), or Float: panels of weights dequantised to f32 and multiplied
/// with float activations by OpenBLAS sgemm (the engine's numerics before the integer kernels,
/// kept as the reference that tests and benchmarks compare with). Also decides the surprisal's
/// output product (surprisal.h). Process-wide; not meant to change while a forward pass runs.
enum class PrefillProducts { Integer = 0, Float = 1 };
void set_prefill_products(PrefillProducts p);
PrefillProducts prefill_products();

/// Tell OpenBLAS how many threads to use. The engine runs OpenBLAS single-threaded (1) and
/// parallelises around it with its own pool.
void set_blas_threads(int n);

} // namespace spanscope
