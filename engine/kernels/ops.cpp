#include "engine/kernels/ops.h"

#include "engine/kernels/simd.h"

#include <cmath>
#include <vector>

namespace spanscope {

void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        float* row = x + r * n;
        // Eight partial sums (element i into sum i mod 8), added in a fixed order at the end:
        // independent lanes the compiler vectorises, the same result on every CPU.
        double part[8] = {};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j)
                part[j] += static_cast<double>(row[i + j]) * row[i + j];
        for (; i < n; ++i)
            part[i % 8] += static_cast<double>(row[i]) * row[i];
        const double ss = ((part[0] + part[1]) + (part[2] + part[3])) +
                          ((part[4] + part[5]) + (part[6] + part[7]));
        const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
        for (i = 0; i < n; ++i)
            row[i] = row[i] * scale * w[i];
    }
}

void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps, ThreadPool& pool) {
    pool.parallel_for(rows,
                      [&](int64_t b, int64_t e, int) { rms_norm(x + b * n, w, e - b, n, eps); });
}

void swiglu(float* g, const float* u, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void sigmoid_inplace(float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        v[i] = 1.0f / (1.0f + std::exp(-v[i]));
}

void geglu_tanh(float* g, const float* u, int64_t n) {
    geglu_tanh_rows(g, u, n);
}

void add_inplace(float* y, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        y[i] += x[i];
}

} // namespace spanscope
