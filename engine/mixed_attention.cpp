#include "mixed_attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace spanscope {

namespace {
// Running softmax-weighted sum: max score, normaliser and numerator, in double.
struct OnlineSoftmax {
    explicit OnlineSoftmax(int64_t d) : acc(static_cast<size_t>(d), 0.0) {}
    double max = -std::numeric_limits<double>::infinity();
    double denom = 0;
    std::vector<double> acc;

    void add(double score, const float* v) {
        if (score > max) {
            const double c = std::exp(max - score); // 0 on the first row (max = -inf)
            denom *= c;
            for (auto& a : acc)
                a *= c;
            max = score;
        }
        const double w = std::exp(score - max);
        denom += w;
        for (size_t j = 0; j < acc.size(); ++j)
            acc[j] += w * v[j];
    }
};

double dot(const float* a, const float* b, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j)
        s += static_cast<double>(a[j]) * b[j];
    return s;
}

// Row i of a factorised span: left[i] · right, into out [dim].
void factor_row(const SpanFactors& f, int64_t i, float* out) {
    for (int64_t j = 0; j < f.dim; ++j) {
        double s = 0;
        for (int r = 0; r < f.rank; ++r)
            s += static_cast<double>(f.left[i * f.rank + r]) * f.right[r * f.dim + j];
        out[j] = static_cast<float>(s);
    }
}
} // namespace

void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, const std::vector<SpanView>& spans,
                     float* out) {
    mixed_attention(q, head_dim, scale, full_k, full_v, m, head_dim, spans, out);
}

void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, int64_t row_stride,
                     const std::vector<SpanView>& spans, float* out) {
    if (row_stride < head_dim)
        throw std::invalid_argument("mixed_attention: row stride shorter than a head");
    if (m == 0 && spans.empty())
        throw std::invalid_argument("mixed_attention: nothing to attend to");
    OnlineSoftmax sm(head_dim);
    for (int64_t i = 0; i < m; ++i)
        sm.add(scale * dot(q, full_k + i * row_stride, head_dim), full_v + i * row_stride);
    std::vector<float> k(static_cast<size_t>(head_dim)), v(static_cast<size_t>(head_dim));
    for (const auto& s : spans) {
        if (s.size < 1)
            throw std::invalid_argument("mixed_attention: empty span");
        if (!s.expanded) {
            sm.add(scale * dot(q, s.summary_k, head_dim) + std::log(static_cast<double>(s.size)),
                   s.summary_v);
            continue;
        }
        if (!s.k_rows || !s.v_rows || s.k_rows->rows != s.size || s.v_rows->rows != s.size ||
            s.k_rows->dim != head_dim || s.v_rows->dim != head_dim)
            throw std::invalid_argument("mixed_attention: an expanded span's factors do not "
                                        "match its size and the head dimension");
        for (int64_t i = 0; i < s.size; ++i) {
            factor_row(*s.k_rows, i, k.data());
            factor_row(*s.v_rows, i, v.data());
            sm.add(scale * dot(q, k.data(), head_dim), v.data());
        }
    }
    for (int64_t j = 0; j < head_dim; ++j)
        out[j] = static_cast<float>(sm.acc[j] / sm.denom);
}

} // namespace spanscope
