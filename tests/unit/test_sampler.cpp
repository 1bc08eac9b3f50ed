// Sampling rules on hand-made logits.
#include "engine/text/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

using namespace spanscope;

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    const std::vector<float> l{0.5f, 2.0f, -1.0f, 2.0f};
    Sampler s(SamplingParams{});
    EXPECT_EQ(s.sample(l.data(), 4), 1);
    EXPECT_EQ(argmax(l.data(), 4), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
    const std::vector<float> l{0.1f, 0.3f, 0.2f};
    Sampler s(SamplingParams{5.0f, 1, 1.0f, 42});
    for (int i = 0; i < 50; ++i)
        EXPECT_EQ(s.sample(l.data(), 3), 1);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
    // Probabilities at T=1: ~0.665, 0.245, 0.090: top-p 0.6 keeps only the first.
    const std::vector<float> l{2.0f, 1.0f, 0.0f};
    Sampler s(SamplingParams{1.0f, 0, 0.6f, 7});
    for (int i = 0; i < 50; ++i)
        EXPECT_EQ(s.sample(l.data(), 3), 0);
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
    const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    Sampler s(SamplingParams{1.0f, 0, 1.0f, 3});
    std::map<int, int> count;
    const int n = 20000;
    for (int i = 0; i < n; ++i)
        ++count[s.sample(l.data(), 3)];
    EXPECT_NEAR(count[0] / double(n), 0.5, 0.02);
    EXPECT_NEAR(count[1] / double(n), 0.3, 0.02);
    EXPECT_NEAR(count[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, SameSeedSameSequence) {
    std::vector<float> l(100);
    for (int i = 0; i < 100; ++i)
        l[i] = std::sin(i * 0.37f);
    Sampler a(SamplingParams{0.9f, 40, 0.95f, 123}), b(SamplingParams{0.9f, 40, 0.95f, 123}),
        c(SamplingParams{0.9f, 40, 0.95f, 124});
    std::vector<int> sa, sb, sc;
    for (int i = 0; i < 30; ++i) {
        sa.push_back(a.sample(l.data(), 100));
        sb.push_back(b.sample(l.data(), 100));
        sc.push_back(c.sample(l.data(), 100));
    }
    EXPECT_EQ(sa, sb);
    EXPECT_NE(sa, sc);
}

TEST(Sampler, RejectsBadParameters) {
    EXPECT_THROW(Sampler(SamplingParams{-1.0f, 40, 0.9f, 0}), std::invalid_argument);
    EXPECT_THROW(Sampler(SamplingParams{1.0f, 40, 0.0f, 0}), std::invalid_argument);
}
