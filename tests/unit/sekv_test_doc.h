// The SEKV memory tests' document: random rows of 4 query heads over 2 KV heads of dimension 16
// with surprisals that cut it into anchors and spans of at most 12 tokens, stored and sealed
// (test_memory_sekv.cpp, test_sekv_routing.cpp).
#pragma once

#include "engine/sekv/memory_sekv.h"
#include "random_fill.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace spanscope::test {

inline const AttentionShape kShape{4, 2, 16, 0.25f, 0};
inline constexpr int64_t kRow = 2 * 16;

inline std::vector<int32_t> iota_pos(int32_t begin, int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        p[i] = begin + static_cast<int32_t>(i);
    return p;
}

// A document of n rows with surprisals that make anchors and spans of at most 12 tokens.
struct Doc {
    int64_t n;
    std::vector<float> k, v, surprisal;
    Segmentation seg;
};
inline Doc make_doc(int64_t n, uint32_t seed) {
    Doc d{n, randn(n * kRow, seed), randn(n * kRow, seed + 1), {}, {}};
    std::mt19937 rng(seed + 2);
    std::exponential_distribution<float> e(1.0f);
    for (int64_t i = 0; i < n; ++i)
        d.surprisal.push_back(e(rng));
    d.surprisal[0] = NAN;
    d.seg = segment(d.surprisal.data(), n, {1.0, 4, 12});
    return d;
}

// Store the document's rows at positions 0..n-1 into sekv and seal them into spans.
inline void store_and_seal(SekvMemory& sekv, const Doc& doc) {
    const auto pos = iota_pos(0, doc.n);
    sekv.store(doc.k.data(), doc.v.data(), pos.data(), doc.n);
    sekv.seal({&doc.seg, doc.surprisal.data(), 0, doc.n});
}

inline SekvOptions options(bool expand_all, double rate = 0.1, int64_t budget_rows = 0) {
    SekvOptions o;
    o.rank = {32, 1.0, nullptr};
    o.router.expand_all = expand_all;
    o.router.expand_rate = rate;
    o.router.budget_rows = budget_rows;
    return o;
}

} // namespace spanscope::test
