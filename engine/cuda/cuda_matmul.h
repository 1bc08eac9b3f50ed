// Weight matrices on the device and their products with activations through cuBLAS.
// Weights are dequantised once on the host (quant.h dequantize_row, bit-exact with ggml) and
// uploaded as f16; products take f16 activations and accumulate in fp32
// (cublasGemmEx, CUBLAS_COMPUTE_32F), as llama.cpp's cuBLAS path does for f16 weights.
#pragma once

#include "engine/cuda/cuda_buffer.h"
#include "engine/cuda/cuda_context.h"
#include "engine/kernels/matmul.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace spanscope::cuda {

/// A GGUF weight matrix on the device: rows × cols, row-major f16 (the layout of matmul.h's
/// WeightMatrix, dequantised).
struct DeviceMatrix {
    int64_t rows = 0;
    int64_t cols = 0;
    DeviceBuffer<__half> w; ///< [rows][cols]

    /// Dequantise `m` row by row on the host, round to f16 and upload. Throws CudaError (no
    /// room on the device), std::invalid_argument (a type without a dequantiser), and
    /// std::range_error when a weight does not fit f16 (|w| > 65504: no silent infinity).
    static DeviceMatrix upload(const WeightMatrix& m);
    int64_t bytes() const { return static_cast<int64_t>(w.bytes()); }
};

/// y[t][r] = Σ_c x[t][c] · W[r][c] (y = x · Wᵀ, matmul.h's convention).
/// x: [n_tokens][W.cols] f16; y: [n_tokens][row_end − row_begin] fp32 (rows [row_begin,
/// row_end) of W, written densely). cuBLAS runs on the context's stream.
void matmul(const Context& ctx, const DeviceMatrix& W, const __half* x, int64_t n_tokens, float* y,
            int64_t row_begin = 0, int64_t row_end = -1);

} // namespace spanscope::cuda
