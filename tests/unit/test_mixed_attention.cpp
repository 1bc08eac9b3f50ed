// SEKV mixed-resolution attention against plain softmax attention written out here: every span
// expanded at full rank gives full attention; a span of equal rows gives it from its summary
// row alone (the +log|S| size correction).
#include "engine/sekv/mixed_attention.h"
#include "engine/sekv/segmentation.h"
#include "random_fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace spanscope;
using spanscope::test::randn;

namespace {
// softmax(scale · K q) · V over all rows, in double.
std::vector<double> full_attention(const float* q, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t n, int64_t d,
                                   double scale) {
    std::vector<double> score(static_cast<size_t>(n));
    double mx = -1e300;
    for (int64_t i = 0; i < n; ++i) {
        double s = 0;
        for (int64_t j = 0; j < d; ++j)
            s += static_cast<double>(q[j]) * k[i * d + j];
        score[i] = scale * s;
        mx = std::max(mx, score[i]);
    }
    double z = 0;
    std::vector<double> out(static_cast<size_t>(d), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        const double w = std::exp(score[i] - mx);
        z += w;
        for (int64_t j = 0; j < d; ++j)
            out[j] += w * v[i * d + j];
    }
    for (auto& o : out)
        o /= z;
    return out;
}

// The document's rows split by a segmentation into full-resolution rows and spans.
struct Split {
    std::vector<float> full_k, full_v;
    int64_t m = 0;
    std::vector<SpanFactors> kf, vf;
    std::vector<std::vector<float>> sk, sv;
    std::vector<SpanView> views;
};

Split split(const std::vector<float>& k, const std::vector<float>& v, const Segmentation& seg,
            const std::vector<float>& surprisal, int64_t d, int rank, bool expanded) {
    Split s;
    for (const auto i : seg.full_resolution) {
        s.full_k.insert(s.full_k.end(), k.begin() + i * d, k.begin() + (i + 1) * d);
        s.full_v.insert(s.full_v.end(), v.begin() + i * d, v.begin() + (i + 1) * d);
        ++s.m;
    }
    s.kf.reserve(seg.spans.size());
    s.vf.reserve(seg.spans.size());
    s.sk.reserve(seg.spans.size());
    s.sv.reserve(seg.spans.size());
    for (const auto& sp : seg.spans) {
        const float* kr = k.data() + sp.begin * d;
        const float* vr = v.data() + sp.begin * d;
        s.kf.push_back(low_rank_factors(kr, sp.size(), d, rank));
        s.vf.push_back(low_rank_factors(vr, sp.size(), d, rank));
        const auto w = span_weights(surprisal.data() + sp.begin, sp.size());
        s.sk.emplace_back(d);
        s.sv.emplace_back(d);
        summary_row(kr, sp.size(), d, w.data(), s.sk.back().data());
        summary_row(vr, sp.size(), d, w.data(), s.sv.back().data());
    }
    for (size_t i = 0; i < seg.spans.size(); ++i)
        s.views.push_back(
            {seg.spans[i].size(), s.sk[i].data(), s.sv[i].data(), &s.kf[i], &s.vf[i], expanded});
    return s;
}
} // namespace

TEST(MixedAttention, EveryExpandedSpanAtFullRankIsFullAttention) {
    const int64_t n = 300, d = 64;
    const auto k = randn(n * d, 1), v = randn(n * d, 2);
    std::mt19937 rng(3);
    std::gamma_distribution<float> g(1.5f, 2.0f);
    std::vector<float> surprisal(n);
    for (auto& x : surprisal)
        x = g(rng);
    const auto seg = segment(surprisal.data(), n, {1.0, 4, 32});
    ASSERT_GT(seg.spans.size(), 5u);
    const auto s = split(k, v, seg, surprisal, d, /*rank=*/32, /*expanded=*/true);
    for (uint32_t t = 0; t < 5; ++t) {
        const auto q = randn(d, 100 + t);
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const auto ref = full_attention(q.data(), k, v, n, d, scale);
        std::vector<float> out(d);
        mixed_attention(q.data(), d, static_cast<float>(scale), s.full_k.data(), s.full_v.data(),
                        s.m, s.views, out.data());
        // f16 factors (span_factors.h): rebuilt rows within about 2^-10 of their entries.
        for (int64_t j = 0; j < d; ++j)
            EXPECT_NEAR(out[j], ref[j], 1e-3) << "query " << t << " dim " << j;
    }
}

TEST(MixedAttention, SpanOfEqualRowsNeedsOnlyItsSummary) {
    const int64_t n = 40, d = 16;
    auto k = randn(n * d, 4), v = randn(n * d, 5);
    // Rows 10..29 are one span whose keys and values are all equal.
    for (int64_t i = 11; i < 30; ++i)
        for (int64_t j = 0; j < d; ++j) {
            k[i * d + j] = k[10 * d + j];
            v[i * d + j] = v[10 * d + j];
        }
    Segmentation seg;
    for (int64_t i = 0; i < n; ++i)
        if (i < 10 || i >= 30)
            seg.full_resolution.push_back(i);
    seg.spans.push_back({10, 30});
    std::vector<float> surprisal(n, 1.0f);
    surprisal[15] = 7.0f; // weights differ; the summary of equal rows is still that row
    const auto s = split(k, v, seg, surprisal, d, 4, /*expanded=*/false);
    const auto q = randn(d, 6);
    const double scale = 0.25;
    const auto ref = full_attention(q.data(), k, v, n, d, scale);
    std::vector<float> out(d);
    mixed_attention(q.data(), d, static_cast<float>(scale), s.full_k.data(), s.full_v.data(), s.m,
                    s.views, out.data());
    for (int64_t j = 0; j < d; ++j)
        EXPECT_NEAR(out[j], ref[j], 1e-5) << j;
    // Without the size correction the span would weigh as one row: a different output.
    auto one = s.views;
    one[0].size = 1;
    std::vector<float> wrong(d);
    mixed_attention(q.data(), d, static_cast<float>(scale), s.full_k.data(), s.full_v.data(), s.m,
                    one, wrong.data());
    double diff = 0;
    for (int64_t j = 0; j < d; ++j)
        diff += std::fabs(wrong[j] - ref[j]);
    EXPECT_GT(diff, 1e-3);
}

TEST(MixedAttention, MismatchedFactorsAreRefused) {
    const int64_t d = 8;
    const auto rows = randn(6 * d, 9);
    const auto f = low_rank_factors(rows.data(), 6, d, 2);
    std::vector<float> summary(d, 0.0f), q(d, 1.0f), out(d);
    std::vector<SpanView> spans{{5, summary.data(), summary.data(), &f, &f, true}};
    EXPECT_THROW(mixed_attention(q.data(), d, 1.0f, nullptr, nullptr, 0, spans, out.data()),
                 std::invalid_argument);
    EXPECT_THROW(mixed_attention(q.data(), d, 1.0f, nullptr, nullptr, 0, {}, out.data()),
                 std::invalid_argument);
}

// The attention mass of each span (span_mass) against the softmax written out here over what
// each view holds: a summary row with weight exp(scale · q·k̄ + log|S|), or the rows rebuilt from
// the factors (reconstruct) for an expanded span.
TEST(MixedAttention, EachSpansMassIsItsShareOfTheSoftmaxWeight) {
    const int64_t n = 160, d = 16;
    const auto k = randn(static_cast<size_t>(n * d), 41, 1.5f);
    const auto v = randn(k.size(), 42);
    std::mt19937 rng(43);
    std::vector<float> surprisal(static_cast<size_t>(n));
    for (auto& x : surprisal)
        x = static_cast<float>(rng() % 1000) / 200.0f;
    const auto seg = segment(surprisal.data(), n, {1.0, 4, 32});
    ASSERT_GT(seg.spans.size(), 5u);
    auto s = split(k, v, seg, surprisal, d, /*rank=*/6, /*expanded=*/false);
    for (size_t i = 0; i < s.views.size(); i += 2)
        s.views[i].expanded = true; // every other span expanded, at rank 6
    const auto q = randn(static_cast<size_t>(d), 44, 2.0f);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    // Reference: log-weights of every entry, grouped by span (-1: a full-resolution row).
    std::vector<double> logw;
    std::vector<int> owner;
    for (int64_t i = 0; i < s.m; ++i) {
        double z = 0;
        for (int64_t j = 0; j < d; ++j)
            z += static_cast<double>(q[j]) * s.full_k[i * d + j];
        logw.push_back(scale * z);
        owner.push_back(-1);
    }
    for (size_t sp = 0; sp < s.views.size(); ++sp) {
        const auto& view = s.views[sp];
        if (!view.expanded) {
            double z = 0;
            for (int64_t j = 0; j < d; ++j)
                z += static_cast<double>(q[j]) * view.summary_k[j];
            logw.push_back(scale * z + std::log(static_cast<double>(view.size)));
            owner.push_back(static_cast<int>(sp));
            continue;
        }
        std::vector<float> rows(static_cast<size_t>(view.size * d));
        reconstruct(*view.k_rows, rows.data());
        for (int64_t i = 0; i < view.size; ++i) {
            double z = 0;
            for (int64_t j = 0; j < d; ++j)
                z += static_cast<double>(q[j]) * rows[i * d + j];
            logw.push_back(scale * z);
            owner.push_back(static_cast<int>(sp));
        }
    }
    const double top = *std::max_element(logw.begin(), logw.end());
    double total = 0;
    std::vector<double> want(s.views.size(), 0.0);
    double full_share = 0;
    for (size_t i = 0; i < logw.size(); ++i) {
        const double w = std::exp(logw[i] - top);
        total += w;
        (owner[i] < 0 ? full_share : want[static_cast<size_t>(owner[i])]) += w;
    }
    std::vector<float> out(d), mass(s.views.size(), -1.0f);
    mixed_attention(q.data(), d, static_cast<float>(scale), s.full_k.data(), s.full_v.data(), s.m,
                    d, s.views, out.data(), mass.data());
    double sum = full_share / total;
    for (size_t sp = 0; sp < s.views.size(); ++sp) {
        EXPECT_NEAR(mass[sp], want[sp] / total, 1e-5 + 1e-4 * want[sp] / total) << "span " << sp;
        sum += mass[sp];
    }
    EXPECT_NEAR(sum, 1.0, 1e-4);
    // The same output with or without the masses.
    std::vector<float> plain(d);
    mixed_attention(q.data(), d, static_cast<float>(scale), s.full_k.data(), s.full_v.data(), s.m,
                    d, s.views, plain.data());
    EXPECT_EQ(plain, out);
}
