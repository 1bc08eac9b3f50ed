#include "engine/sekv/mixed_attention.h"

#include "engine/kernels/simd.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace spanscope {

namespace {
constexpr int64_t kBlock = 256; // full-resolution rows scored at a time

// Running state of a softmax computed block by block (online softmax, Milakov & Gimelshein
// 2018; per block as in FlashAttention, Dao et al. 2022, §3.1): the largest score so far, the
// normaliser and the weighted sum of values, both relative to that score.
struct BlockSoftmax {
    explicit BlockSoftmax(int64_t d) : acc(static_cast<size_t>(d), 0.0f) {}
    float max = -std::numeric_limits<float>::infinity();
    double denom = 0;
    std::vector<float> acc;

    // Turn a block's scores [n] into weights relative to the running maximum (rescaling what
    // was accumulated when the block raises it); the caller then adds Σ weights · values.
    // Returns false for a block of -inf scores only.
    bool absorb(float* scores, int64_t n) {
        float bm = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < n; ++i)
            bm = std::max(bm, scores[i]);
        if (bm == -std::numeric_limits<float>::infinity())
            return false;
        if (bm > max) {
            const float c =
                max == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(max - bm);
            denom *= c;
            for (auto& a : acc)
                a *= c;
            max = bm;
        }
        denom += exp_shifted_sum(scores, n, max);
        return true;
    }
};

float dot(const float* a, const float* b, int64_t d) {
    return cblas_sdot(static_cast<int>(d), a, 1, b, 1);
}
} // namespace

void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, const std::vector<SpanView>& spans,
                     float* out) {
    mixed_attention(q, head_dim, scale, full_k, full_v, m, head_dim, spans, out);
}

void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, int64_t row_stride,
                     const std::vector<SpanView>& spans, float* out, float* span_mass,
                     float* row_mass) {
    if (row_stride < head_dim)
        throw std::invalid_argument("mixed_attention: row stride shorter than a head");
    if (m == 0 && spans.empty())
        throw std::invalid_argument("mixed_attention: nothing to attend to");
    const int d = static_cast<int>(head_dim);
    const int ld = static_cast<int>(row_stride);
    BlockSoftmax sm(head_dim);
    std::vector<float> w(static_cast<size_t>(kBlock));
    // With row_mass: each block's weights and the running maximum they are relative to.
    std::vector<float> block_max;
    // Full-resolution rows (bias 0): scores = scale · K q, then acc += Vᵀ weights.
    for (int64_t b = 0; b < m; b += kBlock) {
        const int n = static_cast<int>(std::min(kBlock, m - b));
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, d, scale, full_k + b * row_stride, ld, q, 1,
                    0.0f, w.data(), 1);
        const bool seen = sm.absorb(w.data(), n);
        if (row_mass) {
            std::copy_n(w.data(), n, row_mass + b);
            if (!seen)
                std::fill_n(row_mass + b, n, 0.0f);
            block_max.push_back(sm.max);
        }
        if (seen)
            cblas_sgemv(CblasRowMajor, CblasTrans, n, d, 1.0f, full_v + b * row_stride, ld,
                        w.data(), 1, 1.0f, sm.acc.data(), 1);
    }
    // With span_mass: each span's log-weight relative to nothing (log Σ exp(score)), known once
    // its block is absorbed (the block's weights are then exp(score − the running maximum)).
    std::vector<double> log_mass(span_mass ? spans.size() : 0,
                                 -std::numeric_limits<double>::infinity());
    // Summary rows of the spans not expanded (bias +log|S|), as one block.
    std::vector<float> sw;
    std::vector<size_t> summarised_at;
    std::vector<const SpanView*> summarised;
    for (const auto& s : spans) {
        if (s.size < 1)
            throw std::invalid_argument("mixed_attention: empty span");
        if (s.expanded)
            continue;
        summarised.push_back(&s);
        summarised_at.push_back(static_cast<size_t>(&s - spans.data()));
        sw.push_back(scale * dot(q, s.summary_k, head_dim) +
                     static_cast<float>(std::log(static_cast<double>(s.size))));
    }
    if (!sw.empty() && sm.absorb(sw.data(), static_cast<int64_t>(sw.size())))
        for (size_t i = 0; i < sw.size(); ++i) {
            cblas_saxpy(d, sw[i], summarised[i]->summary_v, 1, sm.acc.data(), 1);
            if (span_mass)
                log_mass[summarised_at[i]] = std::log(static_cast<double>(sw[i])) + sm.max;
        }
    // Expanded spans, each a block of its reconstructed rows. Row i of the keys is
    // left_k[i] · right_k, so its score is left_k[i] · (right_k q); the values' weighted sum is
    // (left_vᵀ weights) · right_v. The same numbers as reconstructing each row, without ever
    // holding one.
    // The factors are f16, the right ones f16 or Q8_0 (span_factors.h): each is widened to fp32
    // for its product.
    std::vector<float> qr, c, left, right;
    for (const auto& s : spans) {
        if (!s.expanded)
            continue;
        if (!s.k_rows || !s.v_rows || s.k_rows->rows != s.size || s.v_rows->rows != s.size ||
            s.k_rows->dim != head_dim || s.v_rows->dim != head_dim)
            throw std::invalid_argument("mixed_attention: an expanded span's factors do not "
                                        "match its size and the head dimension");
        const auto& fk = *s.k_rows;
        const auto& fv = *s.v_rows;
        const int n = static_cast<int>(s.size);
        qr.resize(static_cast<size_t>(fk.rank));
        fk.right_f32(right);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, fk.rank, d, scale, right.data(), d, q, 1, 0.0f,
                    qr.data(), 1);
        fk.left_f32(left);
        w.resize(std::max<size_t>(w.size(), static_cast<size_t>(n)));
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, fk.rank, 1.0f, left.data(), fk.rank, qr.data(),
                    1, 0.0f, w.data(), 1);
        if (!sm.absorb(w.data(), n))
            continue;
        if (span_mass) {
            double sum = 0;
            for (int i = 0; i < n; ++i)
                sum += w[static_cast<size_t>(i)];
            log_mass[static_cast<size_t>(&s - spans.data())] = std::log(sum) + sm.max;
        }
        c.resize(static_cast<size_t>(fv.rank));
        fv.left_f32(left);
        cblas_sgemv(CblasRowMajor, CblasTrans, n, fv.rank, 1.0f, left.data(), fv.rank, w.data(), 1,
                    0.0f, c.data(), 1);
        fv.right_f32(right);
        cblas_sgemv(CblasRowMajor, CblasTrans, fv.rank, d, 1.0f, right.data(), d, c.data(), 1, 1.0f,
                    sm.acc.data(), 1);
    }
    const auto inv = static_cast<float>(1.0 / sm.denom);
    for (int64_t j = 0; j < head_dim; ++j)
        out[j] = sm.acc[static_cast<size_t>(j)] * inv;
    for (size_t i = 0; i < log_mass.size(); ++i)
        span_mass[i] = static_cast<float>(std::exp(log_mass[i] - sm.max) / sm.denom);
    // A block's weights are exp(score − the maximum when it was absorbed).
    for (size_t blk = 0; blk < block_max.size(); ++blk) {
        const int64_t b = static_cast<int64_t>(blk) * kBlock;
        const double c = std::exp(static_cast<double>(block_max[blk]) - sm.max) / sm.denom;
        for (int64_t j = b; j < std::min(m, b + kBlock); ++j)
            row_mass[j] = static_cast<float>(row_mass[j] * c);
    }
}

} // namespace spanscope
