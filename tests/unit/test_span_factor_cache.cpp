// The device cache's bookkeeping (span_factor_cache.h) and the packed host tier
// (span_factor_pack.h) of SEKV on the GPU: both are plain C++ and run on every machine; the
// copies and kernels that use them are tested against the CPU engine in test_cuda_sekv.
#include "engine/sekv/span_factor_cache.h"
#include "engine/sekv/span_factor_pack.h"
#include "random_fill.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace spanscope;
using spanscope::test::randn;

TEST(SpanFactorPack, UnpackedRowsAreTheFactorsProducts) {
    const int n_kv = 2, d = 16;
    const int64_t n = 11;
    const auto k = randn(size_t(n * n_kv * d), 1), v = randn(k.size(), 2);
    std::vector<float> s(size_t(n), 1.0f);
    // Ranks below the span's size, so that the product is not the rows themselves.
    const auto span = build_span(k.data(), v.data(), s.data(), n, n_kv, d, 40, {5, 1.0, nullptr});
    const int64_t floats = packed_factor_floats(span);
    int64_t want = 0;
    for (int g = 0; g < n_kv; ++g)
        want += (n + d) * (span.k[size_t(g)].rank + span.v[size_t(g)].rank);
    EXPECT_EQ(floats, want);
    std::vector<float> block(size_t(floats), NAN);
    const auto heads = pack_span_factors(span, block.data());
    ASSERT_EQ(heads.size(), size_t(n_kv));
    for (const float x : block)
        EXPECT_FALSE(std::isnan(x)) << "every float of the block is written";
    for (int g = 0; g < n_kv; ++g) {
        std::vector<float> uk(size_t(n * d)), uv(uk.size()), rk(uk.size()), rv(uk.size());
        unpack_span_rows(block.data(), heads[size_t(g)], n, d, uk.data(), uv.data());
        reconstruct(span.k[size_t(g)], rk.data());
        reconstruct(span.v[size_t(g)], rv.data());
        for (size_t i = 0; i < uk.size(); ++i) {
            EXPECT_NEAR(uk[i], rk[i], 1e-5f);
            EXPECT_NEAR(uv[i], rv[i], 1e-5f);
        }
        EXPECT_EQ(heads[size_t(g)].rank_k, span.k[size_t(g)].rank);
    }
}

TEST(SpanFactorPack, RefusesFactorsThatDoNotMatchTheSpan) {
    const int64_t n = 6;
    const auto k = randn(size_t(n * 8), 3), v = randn(k.size(), 4);
    std::vector<float> s(size_t(n), 1.0f);
    auto span = build_span(k.data(), v.data(), s.data(), n, 1, 8, 0, {4, 1.0, nullptr});
    std::vector<float> block(size_t(packed_factor_floats(span)));
    span.v[0].left.pop_back();
    EXPECT_THROW(pack_span_factors(span, block.data()), std::invalid_argument);
    span.v.clear();
    EXPECT_THROW(pack_span_factors(span, block.data()), std::invalid_argument);
}

TEST(SpanFactorCache, HitsKeepTheirSlotsAndTheLeastRecentlyUsedIsEvicted) {
    SpanFactorCache c(3);
    auto p = c.acquire({10, 20});
    ASSERT_EQ(p.size(), 2u);
    EXPECT_TRUE(p[0].fetch && p[1].fetch);
    EXPECT_NE(p[0].slot, p[1].slot);
    const int slot10 = p[0].slot, slot20 = p[1].slot;
    p = c.acquire({30});
    EXPECT_TRUE(p[0].fetch); // the free slot
    const int slot30 = p[0].slot;
    p = c.acquire({20, 10});
    EXPECT_FALSE(p[0].fetch);
    EXPECT_FALSE(p[1].fetch);
    EXPECT_EQ(p[0].slot, slot20);
    EXPECT_EQ(p[1].slot, slot10);
    // 30 is now the least recently used: 40 takes its slot.
    p = c.acquire({40});
    EXPECT_TRUE(p[0].fetch);
    EXPECT_EQ(p[0].slot, slot30);
    EXPECT_EQ(c.find(30), -1);
    EXPECT_EQ(c.find(10), slot10);
    const auto& n = c.counters();
    EXPECT_EQ(n.misses, 4);
    EXPECT_EQ(n.hits, 2);
    EXPECT_EQ(n.evictions, 1);
}

TEST(SpanFactorCache, ASpanWantedNowIsNeverEvictedForAnother) {
    SpanFactorCache c(2);
    c.acquire({1});
    c.acquire({2});
    // 1 is the least recently used, but wanted with 3: 2 goes.
    const auto p = c.acquire({1, 3});
    EXPECT_FALSE(p[0].fetch);
    EXPECT_TRUE(p[1].fetch);
    EXPECT_EQ(c.find(2), -1);
    EXPECT_NE(c.find(1), c.find(3));
}

TEST(SpanFactorCache, APrefetchNeverEvictsASpanItAsksForLater) {
    SpanFactorCache c(2);
    c.acquire({1}); // the least recently used
    c.acquire({2});
    const int slot1 = c.find(1);
    // 3 needs a slot: 1 is the oldest but asked for after it, so 2 goes.
    const auto placed = c.prefetch({3, 1});
    ASSERT_EQ(placed.size(), 1u);
    EXPECT_EQ(placed[0].first, 0u);
    EXPECT_EQ(c.find(1), slot1);
    EXPECT_EQ(c.find(2), -1);
    EXPECT_EQ(c.counters().evictions, 1);
}

TEST(SpanFactorCache, RefusesMoreSpansThanSlotsAndRepeatedSpans) {
    SpanFactorCache c(2);
    EXPECT_THROW(c.acquire({1, 2, 3}), std::length_error);
    EXPECT_THROW(c.acquire({1, 1}), std::invalid_argument);
    EXPECT_THROW(SpanFactorCache(-1), std::invalid_argument);
}

TEST(SpanFactorCache, PrefetchedSpansAreHitsAndPrefetchStopsAtTheSlots) {
    SpanFactorCache c(3);
    c.acquire({7});
    const auto placed = c.prefetch({7, 8, 9, 10, 11});
    // Only the first three (the cache's size) are considered: 7 is held, 8 and 9 take the
    // free slots.
    ASSERT_EQ(placed.size(), 2u);
    EXPECT_EQ(placed[0].first, 1u);
    EXPECT_EQ(placed[1].first, 2u);
    EXPECT_EQ(c.counters().prefetches, 2);
    const auto p = c.acquire({8, 9, 7});
    EXPECT_FALSE(p[0].fetch || p[1].fetch || p[2].fetch);
    EXPECT_EQ(c.counters().hits, 3);
    EXPECT_EQ(c.counters().evictions, 0);
    c.reset(4); // the three held spans are dropped
    EXPECT_EQ(c.counters().evictions, 3);
    EXPECT_EQ(c.find(8), -1);
    EXPECT_EQ(c.slots(), 4);
    c.acquire({8});
    c.clear();
    EXPECT_EQ(c.find(8), -1);
    EXPECT_EQ(c.counters().hits, 0);
    EXPECT_EQ(c.counters().evictions, 0);
    EXPECT_EQ(c.slots(), 4);
}
