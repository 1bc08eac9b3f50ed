// The SEKV router: relevance written out by hand (training-free and trained forms), the row
// budget never exceeded, and τ calibrated on recorded queries expanding the target fraction of
// spans on new ones.
#include "engine/sekv/router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace spanscope;

TEST(Router, RelevanceIsTheSigmoidOfTheScaledScorePlusLogSize) {
    const float q[] = {1, 2, 0, -1};
    const float k[] = {0.5f, 0.25f, 3, 1};
    // q·k = 0.5 + 0.5 + 0 - 1 = 0; / sqrt(4) = 0; + log 8.
    EXPECT_NEAR(span_relevance(q, k, 4, 8), 1.0 / (1.0 + 1.0 / 8.0), 1e-12);
    // The training-free form is not normalised: a key twice as long doubles the score.
    const float k2[] = {1, 0.5f, 6, 2};
    const float q2[] = {1, 0, 0, 0}; // q·k = 0.5, q·2k = 1; / sqrt(4)
    EXPECT_NEAR(span_relevance(q2, k, 4, 1), 1.0 / (1.0 + std::exp(-0.25)), 1e-12);
    EXPECT_NEAR(span_relevance(q2, k2, 4, 1), 1.0 / (1.0 + std::exp(-0.5)), 1e-12);
    EXPECT_THROW(span_relevance(q, k, 4, 0), std::invalid_argument);
}

// The trained form (docs/sekv.md "The relevance's form"), residual:
// σ(q·k̄/√d + ⟨W q, W k̄⟩/√d′ + log|S|).
TEST(Router, TrainedRelevanceAddsTheProjectedDotProductToTheTrainingFreeScore) {
    const float q[] = {1, 2, 0, -1};
    const float k[] = {0.5f, 0.25f, 3, 1};
    // q·k = 0.5 + 0.5 + 0 - 1 = 0. W: the first two coordinates, d' = 2. W q = (1, 2),
    // W k = (0.5, 0.25); ⟨W q, W k⟩ = 0.5 + 0.5 = 1; score = 0/2 + 1/sqrt(2) + log 3.
    const float w[] = {1, 0, 0, 0, 0, 1, 0, 0};
    const double x = 1.0 / std::sqrt(2.0) + std::log(3.0);
    EXPECT_NEAR(span_relevance(q, k, 4, 3, w, 2), 1.0 / (1.0 + std::exp(-x)), 1e-7);
    // Both terms at once: k1 = (1, 1, 1, 1): q·k1 = 2, / sqrt(4) = 1; W k1 = (1, 1),
    // ⟨W q, W k1⟩ = 3, / sqrt(2).
    const float k1[] = {1, 1, 1, 1};
    EXPECT_NEAR(span_relevance(q, k1, 4, 3, w, 2),
                1.0 / (1.0 + std::exp(-(1.0 + 3.0 / std::sqrt(2.0) + std::log(3.0)))), 1e-7);
    // Not normalised: a summary key 7 times as long scores 7 times as much (q·k7 = 0 here).
    const float k7[] = {3.5f, 1.75f, 21, 7};
    const double x7 = 7.0 / std::sqrt(2.0) + std::log(3.0);
    EXPECT_NEAR(span_relevance(q, k7, 4, 3, w, 2), 1.0 / (1.0 + std::exp(-x7)), 1e-7);
    // A summary key W maps to zero keeps the training-free score: q·k0 = 0 + 0 + 0 + 2 = 2,
    // 2 / sqrt(4) = 1; + log 3.
    const float k0[] = {0, 0, 5, -2};
    EXPECT_NEAR(span_relevance(q, k0, 4, 3, w, 2), 1.0 / (1.0 + std::exp(-(1.0 + std::log(3.0)))),
                1e-12);
    // W = 0: the training-free form exactly.
    const float w0[] = {0, 0, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(span_relevance(q, k7, 4, 5, w0, 2), span_relevance(q, k7, 4, 5));
    // The projections the training's backward reads: W q and W k.
    const RelevanceScore score(q, 4, w, 2);
    ASSERT_EQ(score.projected_query().size(), 2u);
    EXPECT_EQ(score.projected_query()[0], 1.0);
    EXPECT_EQ(score.projected_query()[1], 2.0);
    double wk[2] = {0, 0};
    EXPECT_NEAR(score.logit(k7, 3, wk), x7, 1e-7);
    EXPECT_EQ(wk[0], 3.5);
    EXPECT_EQ(wk[1], 1.75);
    EXPECT_THROW(span_relevance(q, k, 4, 1, w, 0), std::invalid_argument);
    EXPECT_THROW(score.logit(k, 0), std::invalid_argument);
}

TEST(Router, BudgetIsNeverExceededAndTakesTheMostRelevant) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<double> u(0, 1);
    for (int trial = 0; trial < 200; ++trial) {
        const int n = 1 + static_cast<int>(rng() % 60);
        std::vector<double> rel(n);
        std::vector<int64_t> size(n);
        for (int i = 0; i < n; ++i) {
            rel[i] = u(rng);
            size[i] = 4 + static_cast<int64_t>(rng() % 60);
        }
        const int64_t budget = static_cast<int64_t>(rng() % 400);
        const auto chosen = route_spans(rel, size, 0.3, budget);
        int64_t rows = 0;
        for (const int i : chosen) {
            EXPECT_GT(rel[i], 0.3);
            rows += size[i];
        }
        if (budget > 0) {
            EXPECT_LE(rows, budget);
        }
        // Greedy by relevance: a span left out above τ did not fit after the more relevant.
        const auto all = route_spans(rel, size, 0.3, 0);
        EXPECT_LE(chosen.size(), all.size());
        if (budget == 0) {
            EXPECT_EQ(chosen, all);
        }
    }
}

TEST(Router, CalibratedTauExpandsTheTargetFraction) {
    // Relevances of spans for recorded queries (what a layer and head saw), then new queries
    // from the same distribution.
    std::mt19937 rng(2);
    std::normal_distribution<double> g(0, 1.5);
    auto draw = [&](int n) {
        std::vector<double> r(n);
        for (auto& x : r)
            x = 1.0 / (1.0 + std::exp(-g(rng)));
        return r;
    };
    for (const double target : {0.05, 0.1, 0.25, 0.5}) {
        const auto recorded = draw(20000);
        const double tau = calibrate_tau(recorded, target);
        int above = 0;
        for (const auto x : recorded)
            above += x > tau ? 1 : 0;
        EXPECT_NEAR(above / 20000.0, target, 1.0 / 20000 + 1e-12);
        const auto fresh = draw(20000);
        int fresh_above = 0;
        for (const auto x : fresh)
            fresh_above += x > tau ? 1 : 0;
        EXPECT_NEAR(fresh_above / 20000.0, target, 0.01) << "target " << target;
    }
    EXPECT_THROW(calibrate_tau({}, 0.1), std::invalid_argument);
    EXPECT_THROW(calibrate_tau({0.5}, 1.5), std::invalid_argument);
    const double all = calibrate_tau({0.2, 0.4}, 1.0);
    EXPECT_LT(all, 0.2);
    EXPECT_EQ(calibrate_tau({0.2, 0.4}, 0.0), 0.4);
}
