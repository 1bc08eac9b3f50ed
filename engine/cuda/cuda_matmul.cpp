#include "engine/cuda/cuda_matmul.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope::cuda {

DeviceMatrix DeviceMatrix::upload(const WeightMatrix& m) {
    DeviceMatrix d;
    d.rows = m.rows;
    d.cols = m.cols;
    d.w.resize(static_cast<size_t>(m.rows * m.cols));
    // In slices of rows, so that the host copy stays small for the 262144-row embedding.
    constexpr int64_t kSlice = 4096;
    std::vector<float> row(static_cast<size_t>(m.cols));
    std::vector<uint16_t> half(static_cast<size_t>(std::min(kSlice, m.rows) * m.cols));
    for (int64_t r0 = 0; r0 < m.rows; r0 += kSlice) {
        const int64_t nr = std::min(kSlice, m.rows - r0);
        for (int64_t r = 0; r < nr; ++r) {
            dequantize_row(m.type, m.row(r0 + r), row.data(), m.cols);
            for (int64_t c = 0; c < m.cols; ++c) {
                if (!(std::fabs(row[c]) <= 65504.0f))
                    throw std::range_error("weight row " + std::to_string(r0 + r) + " holds " +
                                           std::to_string(row[c]) + ", which f16 cannot represent");
                half[static_cast<size_t>(r * m.cols + c)] = fp32_to_fp16(row[c]);
            }
        }
        cuda_check(cudaMemcpy(d.w.data() + r0 * m.cols, half.data(),
                              static_cast<size_t>(nr * m.cols) * sizeof(uint16_t),
                              cudaMemcpyHostToDevice),
                   "upload of a weight matrix");
    }
    // The copies are from pageable memory: wait until they have landed (cuda_buffer.h).
    cuda_check(cudaDeviceSynchronize(), "upload of a weight matrix: synchronize");
    return d;
}

void matmul(const Context& ctx, const DeviceMatrix& W, const __half* x, int64_t n_tokens, float* y,
            int64_t row_begin, int64_t row_end) {
    if (row_end < 0)
        row_end = W.rows;
    if (row_begin < 0 || row_begin > row_end || row_end > W.rows)
        throw std::invalid_argument("CUDA matmul: rows outside the matrix");
    const int64_t m = row_end - row_begin;
    if (n_tokens == 0 || m == 0)
        return;
    // Column-major view: W is a cols × rows matrix A (lda = cols), x a cols × n matrix B, y a
    // m × n matrix C; C = Aᵀ·B.
    const float alpha = 1.0f, beta = 0.0f;
    cublas_check(ctx.blas().gemm_ex(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m),
                                    static_cast<int>(n_tokens), static_cast<int>(W.cols), &alpha,
                                    W.w.data() + row_begin * W.cols, CUDA_R_16F,
                                    static_cast<int>(W.cols), x, CUDA_R_16F,
                                    static_cast<int>(W.cols), &beta, y, CUDA_R_32F,
                                    static_cast<int>(m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
}

} // namespace spanscope::cuda
