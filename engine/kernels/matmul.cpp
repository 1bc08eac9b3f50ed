#include "engine/kernels/matmul.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/qgemm.h"
#include "engine/kernels/quant.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

namespace spanscope {

WeightMatrix WeightMatrix::from(const GgufTensorInfo& t) {
    if (t.ne.size() != 2)
        throw std::runtime_error("tensor " + t.name + " is not a matrix");
    WeightMatrix w;
    w.type = t.type;
    w.cols = t.ne[0];
    w.rows = t.ne[1];
    w.data = t.data;
    w.row_stride = row_bytes(t.type, t.ne[0]);
    return w;
}

namespace {
std::atomic<PrefillProducts> g_products{PrefillProducts::Integer};
} // namespace

void set_prefill_products(PrefillProducts p) {
    g_products.store(p);
}

PrefillProducts prefill_products() {
    return g_products.load(std::memory_order_relaxed);
}

void set_blas_threads(int n) {
    openblas_set_num_threads(std::max(1, n));
}

namespace {

// Below this many tokens, quantised integer dot products beat dequantise + sgemm.
constexpr int64_t kGemmMinTokens = 8;
// Rows of W dequantised at a time for sgemm (keeps the panel in L2/L3).
constexpr int64_t kPanelRows = 256;

void matmul_vec_dot(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t n_tokens,
                    float* y, ThreadPool& pool) {
    const TensorType dot_type = traits(w.type).vec_dot_type;
    const size_t xq_row = row_bytes(dot_type, w.cols);
    std::vector<uint8_t> xq(xq_row * n_tokens);
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (dot_type == TensorType::F32)
            std::copy(x + t * w.cols, x + (t + 1) * w.cols,
                      reinterpret_cast<float*>(xq.data() + t * xq_row));
        else
            quantize_row(dot_type, x + t * w.cols, xq.data() + t * xq_row, w.cols);
    }
    const int64_t n_out = r1 - r0;
    if (n_tokens == 1) {
        pool.parallel_for(n_out, [&](int64_t b, int64_t e, int) {
            vec_dot_rows(w.type, w.cols, e - b, w.row(r0 + b), w.row_stride, xq.data(), y + b);
        });
        return;
    }
    // Several tokens: a block of rows stays in cache while every token reads it.
    constexpr int64_t kRowBlock = 32;
    pool.parallel_for(n_out, [&](int64_t b, int64_t e, int) {
        float col[kRowBlock];
        for (int64_t rb = b; rb < e; rb += kRowBlock) {
            const int64_t nr = std::min(kRowBlock, e - rb);
            for (int64_t t = 0; t < n_tokens; ++t) {
                vec_dot_rows(w.type, w.cols, nr, w.row(r0 + rb), w.row_stride,
                             xq.data() + t * xq_row, col);
                std::copy(col, col + nr, y + t * n_out + rb);
            }
        }
    });
}

void matmul_gemm(const WeightMatrix& w, int64_t r0, int64_t r1, const float* x, int64_t n_tokens,
                 float* y, ThreadPool& pool) {
    // Each thread dequantises its own panels of W and runs a single-threaded sgemm on them, so
    // OpenBLAS never competes with the pool for the cores.
    const int64_t n_out = r1 - r0;
    const int64_t per_thread = (n_out + pool.size() - 1) / pool.size();
    const int64_t panel_rows = std::max<int64_t>(16, std::min(kPanelRows, per_thread));
    const int64_t n_panels = (n_out + panel_rows - 1) / panel_rows;
    pool.parallel_for(n_panels, [&](int64_t b, int64_t e, int) {
        std::vector<float> panel(static_cast<size_t>(panel_rows * w.cols));
        for (int64_t p = b; p < e; ++p) {
            const int64_t p0 = p * panel_rows;
            const int64_t pr = std::min(panel_rows, n_out - p0);
            for (int64_t r = 0; r < pr; ++r)
                dequantize_row(w.type, w.row(r0 + p0 + r), panel.data() + r * w.cols, w.cols);
            // y[:, p0:p0+pr] = x · panelᵀ
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n_tokens),
                        static_cast<int>(pr), static_cast<int>(w.cols), 1.0f, x,
                        static_cast<int>(w.cols), panel.data(), static_cast<int>(w.cols), 0.0f,
                        y + p0, static_cast<int>(n_out));
        }
    });
}

} // namespace

void matmul_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t n_tokens, float* y, ThreadPool& pool) {
    if (row_begin < 0 || row_end > w.rows || row_begin > row_end)
        throw std::out_of_range("matmul_rows: row range outside the matrix");
    if (n_tokens < kGemmMinTokens) {
        matmul_vec_dot(w, row_begin, row_end, x, n_tokens, y, pool);
    } else if (qgemm_supports(w.type) && prefill_products() == PrefillProducts::Integer) {
        thread_local QgemmActivations xq;
        qgemm_quantize(x, n_tokens, w.cols, xq, &pool);
        qgemm(w, row_begin, row_end, xq, y, row_end - row_begin, pool);
    } else {
        matmul_gemm(w, row_begin, row_end, x, n_tokens, y, pool);
    }
}

void matmul_shared_input(std::initializer_list<MatmulOutput> outputs, const float* x,
                         int64_t n_tokens, ThreadPool& pool) {
    if (outputs.size() == 0)
        return;
    bool shared = n_tokens >= kGemmMinTokens && prefill_products() == PrefillProducts::Integer;
    for (const auto& o : outputs)
        shared = shared && qgemm_supports(o.w->type) && o.w->cols == outputs.begin()->w->cols;
    if (!shared) {
        for (const auto& o : outputs)
            matmul(*o.w, x, n_tokens, o.y, pool);
        return;
    }
    thread_local QgemmActivations xq;
    qgemm_quantize(x, n_tokens, outputs.begin()->w->cols, xq, &pool);
    for (const auto& o : outputs)
        qgemm(*o.w, 0, o.w->rows, xq, o.y, o.w->rows, pool);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
    matmul_rows(w, 0, w.rows, x, n_tokens, y, pool);
}

} // namespace spanscope
