// SEKV segmentation rules (docs/sekv.md) on surprisals whose mean and deviation are known by
// hand.
#include "engine/sekv/segmentation.h"
#include "engine/sekv/sekv_spans.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace spanscope;

namespace {
// Every token is in exactly one span or in full_resolution; spans hold no anchor.
void expect_partition(const Segmentation& s, int64_t n) {
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (const auto& sp : s.spans) {
        ASSERT_LT(sp.begin, sp.end);
        for (int64_t i = sp.begin; i < sp.end; ++i)
            ++seen[i];
    }
    for (const auto i : s.full_resolution)
        ++seen[i];
    for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(seen[i], 1) << "token " << i;
    for (const auto a : s.anchors)
        for (const auto& sp : s.spans)
            EXPECT_FALSE(a >= sp.begin && a < sp.end) << "anchor " << a << " inside a span";
}
} // namespace

TEST(Segmentation, ThresholdIsMeanPlusAlphaPopulationSigma) {
    // 1 1 1 1 5: mean 1.8, population sigma sqrt((4 · 0.64 + 10.24) / 5) = 1.6.
    const float s[] = {1, 1, 1, 1, 5};
    const auto seg = segment(s, 5, {1.0, 1, 0});
    EXPECT_NEAR(seg.threshold, 3.4, 1e-9);
    EXPECT_EQ(seg.anchors, (std::vector<int64_t>{0, 4}));
    ASSERT_EQ(seg.spans.size(), 1u);
    EXPECT_EQ(seg.spans[0].begin, 1);
    EXPECT_EQ(seg.spans[0].end, 4);
    const auto half = segment(s, 5, {0.5, 1, 0});
    EXPECT_NEAR(half.threshold, 2.6, 1e-9);
}

TEST(Segmentation, ShortRunsStayAtFullResolution) {
    // Anchors (value 9) at 0, 3 and 9: runs 1-2 (2 tokens, short) and 4-8 (5 tokens, a span).
    std::vector<float> s(12, 1.0f);
    s[3] = s[9] = 9.0f;
    const auto seg = segment(s.data(), 12, {1.0, 4, 0});
    EXPECT_EQ(seg.anchors, (std::vector<int64_t>{0, 3, 9}));
    ASSERT_EQ(seg.spans.size(), 1u);
    EXPECT_EQ(seg.spans[0].begin, 4);
    EXPECT_EQ(seg.spans[0].end, 9);
    // The tail 10-11 (2 tokens) is short too.
    EXPECT_EQ(seg.full_resolution, (std::vector<int64_t>{0, 1, 2, 3, 9, 10, 11}));
    expect_partition(seg, 12);
}

TEST(Segmentation, LongRunsSplitIntoNearEqualSpans) {
    std::vector<float> s(23, 1.0f); // all equal: only position 0 is an anchor; a run of 22
    const auto seg = segment(s.data(), 23, {1.0, 4, 8});
    ASSERT_EQ(seg.spans.size(), 3u); // ceil(22 / 8)
    for (const auto& sp : seg.spans) {
        EXPECT_LE(sp.size(), 8);
        EXPECT_GE(sp.size(), 7);
    }
    expect_partition(seg, 23);
}

TEST(Segmentation, UnknownSurprisalIsAnAnchorAndIgnoredInTheStatistics) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float s[] = {1, 1, 1, 1, 5, nan};
    const auto seg = segment(s, 6, {1.0, 1, 0});
    EXPECT_NEAR(seg.threshold, 3.4, 1e-9); // as without the NaN
    EXPECT_EQ(seg.anchors, (std::vector<int64_t>{0, 4, 5}));
}

TEST(Segmentation, RandomSurprisalsPartitionTheTokens) {
    std::mt19937 rng(7);
    std::gamma_distribution<float> g(1.5f, 2.0f);
    for (int trial = 0; trial < 20; ++trial) {
        const int64_t n = 1 + static_cast<int64_t>(rng() % 700);
        std::vector<float> s(static_cast<size_t>(n));
        for (auto& x : s)
            x = g(rng);
        const auto seg = segment(s.data(), n, {1.0, 4, trial % 2 ? 32 : 0});
        expect_partition(seg, n);
        EXPECT_EQ(seg.anchors.front(), 0);
        for (const auto& sp : seg.spans)
            EXPECT_GE(sp.size(), 4);
    }
}

TEST(Segmentation, BadOptionsAreRefused) {
    const float s[] = {1, 2};
    EXPECT_THROW(segment(s, 0, {}), std::invalid_argument);
    EXPECT_THROW(segment(s, 2, {1.0, 0, 0}), std::invalid_argument);
    EXPECT_THROW(segment(s, 2, {1.0, 4, 6}), std::invalid_argument); // < 2 · 4 - 1
    EXPECT_NO_THROW(segment(s, 2, {1.0, 4, 7}));
}

// segment_within_budget counts what the fast tier keeps per span: with span_rows 2 (a summary
// row and a key sketch as large again) the segmentation it settles on fits the budget at two rows
// a span, where the one that counts a single row would not.
TEST(Segmentation, WithinBudgetCountsEachSpansRows) {
    std::mt19937 rng(11);
    std::gamma_distribution<float> g(1.5f, 2.0f);
    const int64_t n = 4000, reserve = 128;
    const double budget = 0.35;
    std::vector<float> s(static_cast<size_t>(n));
    for (auto& x : s)
        x = g(rng);
    auto rows = [&](const Segmentation& seg, double span_rows) {
        return static_cast<double>(seg.full_resolution.size()) +
               span_rows * static_cast<double>(seg.spans.size()) + static_cast<double>(reserve);
    };
    bool met1 = false, met2 = false;
    double alpha1 = 0, alpha2 = 0;
    const SegmentationOptions o{1.0, 4, 32};
    const auto one = segment_within_budget(s.data(), n, o, budget, reserve, &alpha1, &met1, 1.0);
    const auto two = segment_within_budget(s.data(), n, o, budget, reserve, &alpha2, &met2, 2.0);
    ASSERT_TRUE(met1);
    ASSERT_TRUE(met2);
    expect_partition(two, n);
    EXPECT_LE(rows(one, 1.0), budget * n);
    EXPECT_GT(rows(one, 2.0), budget * n) << "the draw does not tell one row a span from two";
    EXPECT_LE(rows(two, 2.0), budget * n);
    EXPECT_GT(alpha2, alpha1);
    EXPECT_LT(two.spans.size(), one.spans.size());
    // The default is one row a span.
    bool met = false;
    const auto dflt = segment_within_budget(s.data(), n, o, budget, reserve, nullptr, &met);
    EXPECT_EQ(dflt.spans.size(), one.spans.size());
    for (const double bad :
         {0.5, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()})
        EXPECT_THROW(segment_within_budget(s.data(), n, o, budget, reserve, nullptr, nullptr, bad),
                     std::invalid_argument);
}
