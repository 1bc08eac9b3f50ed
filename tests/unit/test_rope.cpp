// RoPE's frequencies and layouts (engine/kernels/rope.h) against the formulas written out here
// in double: the adjacent-pair ("normal") rotation of llama.cpp's `llama` architecture, linear
// position scaling and Llama 3 frequency factors.
#include "engine/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace spanscope {
namespace {

std::vector<float> random_vector(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v)
        x = d(rng);
    return v;
}

/// θ_i of pair i, written from the formula: p · scale · base^(−2i/d) / factor_i.
double angle(int32_t p, int i, int d, double base, double scale, const std::vector<float>& f) {
    double a = p * scale * std::pow(base, -2.0 * i / d);
    if (!f.empty())
        a /= f[static_cast<size_t>(i)];
    return a;
}

TEST(Rope, AdjacentPairsReorderedThenRotateHalfEqualsNormalRope) {
    const int d = 16, heads = 3;
    const int32_t pos[2] = {5, 911};
    const RopeFrequencies freqs(10000.0);
    auto x = random_vector(2 * heads * d, 1);
    // Normal RoPE: pair (x[2i], x[2i+1]) rotated by θ_i, computed here in double.
    std::vector<double> want(x.size());
    for (int t = 0; t < 2; ++t)
        for (int h = 0; h < heads; ++h)
            for (int i = 0; i < d / 2; ++i) {
                const size_t o = static_cast<size_t>((t * heads + h) * d);
                const double a = x[o + 2 * i], b = x[o + 2 * i + 1];
                const double th = angle(pos[t], i, d, 10000.0, 1.0, {});
                // reordered: pair i lands at (i, i + d/2)
                want[o + static_cast<size_t>(i)] = a * std::cos(th) - b * std::sin(th);
                want[o + static_cast<size_t>(i + d / 2)] = a * std::sin(th) + b * std::cos(th);
            }
    rope_pairs_to_halves(x.data(), 2 * heads, d);
    const RopeTable table(pos, 2, d, freqs);
    rope_neox(x.data(), table, 2, heads);
    for (size_t j = 0; j < x.size(); ++j)
        EXPECT_NEAR(x[j], want[j], 1e-5) << j;
}

TEST(Rope, ReorderingKeepsDotProducts) {
    const int d = 8;
    auto q = random_vector(d, 2), k = random_vector(d, 3);
    double before = 0, after = 0;
    for (int i = 0; i < d; ++i)
        before += double(q[i]) * k[i];
    rope_pairs_to_halves(q.data(), 1, d);
    rope_pairs_to_halves(k.data(), 1, d);
    for (int i = 0; i < d; ++i)
        after += double(q[i]) * k[i];
    EXPECT_NEAR(before, after, 1e-6);
    auto y = random_vector(d, 4);
    const auto x = y;
    rope_pairs_to_halves(y.data(), 1, d);
    EXPECT_EQ(y[1], x[2]);
    EXPECT_EQ(y[d / 2], x[1]);
    EXPECT_EQ(y[d - 1], x[d - 1]);
}

TEST(Rope, LinearScalingAndFrequencyFactorsFollowTheFormula) {
    const int d = 8;
    RopeFrequencies freqs;
    freqs.base = 500000.0;
    freqs.scale = 0.25;
    freqs.factors = {1.0f, 1.0f, 3.5f, 8.0f};
    const int32_t pos[3] = {0, 7, 4000};
    const RopeTable table(pos, 3, d, freqs);
    for (int t = 0; t < 3; ++t)
        for (int i = 0; i < d / 2; ++i) {
            const double th = angle(pos[t], i, d, 500000.0, 0.25, freqs.factors);
            EXPECT_NEAR(table.cos[static_cast<size_t>(t * d / 2 + i)], std::cos(th), 1e-6);
            EXPECT_NEAR(table.sin[static_cast<size_t>(t * d / 2 + i)], std::sin(th), 1e-6);
        }
    // A plain base differs (the test can fail if scale or factors were ignored).
    const RopeTable plain(pos, 3, d, RopeFrequencies(500000.0));
    EXPECT_GT(std::fabs(plain.sin[2 * d / 2 + 3] - table.sin[2 * d / 2 + 3]), 1e-3);
}

TEST(Rope, ShiftWithFactorsEqualsRotatingAtTheNewPosition) {
    const int d = 16, heads = 2;
    RopeFrequencies freqs;
    freqs.base = 100000.0;
    freqs.factors.resize(d / 2);
    for (int i = 0; i < d / 2; ++i)
        freqs.factors[static_cast<size_t>(i)] = 1.0f + 0.7f * static_cast<float>(i);
    const auto raw = random_vector(heads * d, 5);
    const int32_t p = 37, delta = 1200, q = p + delta;
    auto moved = raw, direct = raw;
    rope_neox(moved.data(), RopeTable(&p, 1, d, freqs), 1, heads);
    rope_shift_neox(moved.data(), 1, heads, d, delta, freqs);
    rope_neox(direct.data(), RopeTable(&q, 1, d, freqs), 1, heads);
    for (size_t j = 0; j < raw.size(); ++j)
        EXPECT_NEAR(moved[j], direct[j], 2e-5) << j;
}

TEST(Rope, FactorsOfAnotherLengthAreRefused) {
    RopeFrequencies freqs;
    freqs.factors = {1.0f, 2.0f, 3.0f};
    EXPECT_THROW(freqs.inverse_frequencies(8), std::invalid_argument);
}

} // namespace
} // namespace spanscope
