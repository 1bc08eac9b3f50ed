#include "engine/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope {

std::vector<double> RopeFrequencies::inverse_frequencies(int d) const {
    const int half = d / 2;
    if (!(std::isfinite(base) && base > 0.0) || !(std::isfinite(scale) && scale > 0.0))
        throw std::invalid_argument("RoPE frequencies need a positive finite base and scale");
    if (!factors.empty() && static_cast<int>(factors.size()) != half)
        throw std::invalid_argument("RoPE frequency factors: " + std::to_string(factors.size()) +
                                    " values for " + std::to_string(half) + " pairs");
    std::vector<double> inv(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) {
        inv[static_cast<size_t>(i)] = scale * std::pow(base, -2.0 * i / d);
        if (!factors.empty())
            inv[static_cast<size_t>(i)] /= factors[static_cast<size_t>(i)];
    }
    return inv;
}

RopeTable::RopeTable(const int32_t* pos, int64_t n_tokens, int d_, const RopeFrequencies& freqs)
    : d(d_) {
    const int half = d / 2;
    const std::vector<double> inv_freq = freqs.inverse_frequencies(d);
    cos.resize(static_cast<size_t>(n_tokens * half));
    sin.resize(static_cast<size_t>(n_tokens * half));
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int i = 0; i < half; ++i) {
            const double angle = pos[t] * inv_freq[static_cast<size_t>(i)];
            cos[t * half + i] = static_cast<float>(std::cos(angle));
            sin[t * half + i] = static_cast<float>(std::sin(angle));
        }
}

void rope_neox(float* x, const RopeTable& table, int64_t n_tokens, int n_heads) {
    rope_neox_partial(x, table, n_tokens, n_heads, table.d);
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

void rope_pairs_to_halves(float* x, int64_t n_vectors, int d) {
    const int half = d / 2;
    std::vector<float> tmp(static_cast<size_t>(d));
    for (int64_t r = 0; r < n_vectors; ++r) {
        float* v = x + r * d;
        for (int i = 0; i < half; ++i) {
            tmp[static_cast<size_t>(i)] = v[2 * i];
            tmp[static_cast<size_t>(i + half)] = v[2 * i + 1];
        }
        std::copy(tmp.begin(), tmp.end(), v);
    }
}

void rope_shift_neox(float* x, int64_t n_rows, int n_heads, int d, int32_t delta,
                     const RopeFrequencies& freqs) {
    if (delta == 0 || n_rows == 0 || freqs.base <= 0.0)
        return;
    const RopeTable table(&delta, 1, d, freqs);
    for (int64_t r = 0; r < n_rows; ++r)
        rope_neox(x + r * n_heads * d, table, 1, n_heads);
}

void rope_shift_neox_partial(float* x, int64_t n_rows, int n_heads, int head_dim, int rope_dims,
                             int32_t delta, const RopeFrequencies& freqs) {
    if (delta == 0 || n_rows == 0 || rope_dims == 0 || freqs.base <= 0.0)
        return;
    const RopeTable table(&delta, 1, rope_dims, freqs);
    for (int64_t r = 0; r < n_rows; ++r)
        rope_neox_partial(x + r * n_heads * head_dim, table, 1, n_heads, head_dim);
}

} // namespace spanscope
