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

RopeTable::RopeTable(const int32_t* pos, int64_t n_tokens, int d_, double base) : d(d_) {
    const int half = d / 2;
    std::vector<double> inv_freq(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i)
        inv_freq[i] = std::pow(base, -2.0 * i / d);
    cos.resize(static_cast<size_t>(n_tokens * half));
    sin.resize(static_cast<size_t>(n_tokens * half));
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int i = 0; i < half; ++i) {
            const double angle = pos[t] * inv_freq[i];
            cos[t * half + i] = static_cast<float>(std::cos(angle));
            sin[t * half + i] = static_cast<float>(std::sin(angle));
        }
}

void rope_neox(float* x, const RopeTable& table, int64_t n_tokens, int n_heads) {
    const int d = table.d, half = d / 2;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* cs = table.cos.data() + t * half;
        const float* sn = table.sin.data() + t * half;
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * d;
            for (int i = 0; i < half; ++i) {
                const float a = v[i], b = v[i + half];
                v[i] = a * cs[i] - b * sn[i];
                v[i + half] = a * sn[i] + b * cs[i];
            }
        }
    }
}

void rope_shift_neox(float* x, int64_t n_rows, int n_heads, int d, int32_t delta, double base) {
    if (delta == 0 || n_rows == 0)
        return;
    const RopeTable table(&delta, 1, d, base);
    for (int64_t r = 0; r < n_rows; ++r)
        rope_neox(x + r * n_heads * d, table, 1, n_heads);
}

void rope_shift_neox_partial(float* x, int64_t n_rows, int n_heads, int head_dim, int rope_dims,
                             int32_t delta, double base) {
    if (delta == 0 || n_rows == 0 || rope_dims == 0)
        return;
    const RopeTable table(&delta, 1, rope_dims, base);
    for (int64_t r = 0; r < n_rows; ++r)
        rope_neox_partial(x + r * n_heads * head_dim, table, 1, n_heads, head_dim);
}

void rope_neox_partial(float* x, const RopeTable& table, int64_t n_tokens, int n_heads,
                       int head_dim) {
    const int d = table.d, half = d / 2;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* cs = table.cos.data() + t * half;
        const float* sn = table.sin.data() + t * half;
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int i = 0; i < half; ++i) {
                const float a = v[i], b = v[i + half];
                v[i] = a * cs[i] - b * sn[i];
                v[i + half] = a * sn[i] + b * cs[i];
            }
        }
    }
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
