// Evaluation metrics (lab/evaluation/eval_metrics.h) against values computed by hand from their
// definitions: RULER's string match, SQuAD v1.1's token F1, the Wilson score interval.
#include "lab/evaluation/eval_metrics.h"

#include <gtest/gtest.h>

#include <stdexcept>

using namespace spanscope::eval;

TEST(EvalMetrics, StringMatchAllCountsEveryExpectedStringCaseInsensitive) {
    EXPECT_DOUBLE_EQ(string_match_all("The code is 12345.", {"12345"}), 1.0);
    EXPECT_DOUBLE_EQ(string_match_all("The code is 1234.", {"12345"}), 0.0);
    // Two of three values present: RULER's partial credit.
    EXPECT_DOUBLE_EQ(string_match_all("Codes: 12345 and 67890", {"12345", "67890", "11111"}),
                     2.0 / 3.0);
    EXPECT_DOUBLE_EQ(string_match_all("uuid 3F2504E0-4F89-41D3", {"3f2504e0-4f89-41d3"}), 1.0);
    EXPECT_DOUBLE_EQ(string_match_all("Free Software Foundation", {"free SOFTWARE foundation"}),
                     1.0);
    EXPECT_DOUBLE_EQ(string_match_all("anything", {}), 0.0);
}

TEST(EvalMetrics, StringMatchPartNeedsAnyOne) {
    EXPECT_DOUBLE_EQ(string_match_part("It is thirty days.", {"30", "THIRTY"}), 1.0);
    EXPECT_DOUBLE_EQ(string_match_part("It is 60 days.", {"30", "thirty"}), 0.0);
    EXPECT_DOUBLE_EQ(string_match_part("Codes: 12345", {"12345", "67890"}), 1.0);
    EXPECT_DOUBLE_EQ(string_match_part("", {"x"}), 0.0);
}

TEST(EvalMetrics, TokenF1NormalisesLikeSquad) {
    // normalize_answer: lower, no punctuation, no articles, one space.
    EXPECT_DOUBLE_EQ(token_f1("The Cat!", {"cat"}), 1.0);
    EXPECT_DOUBLE_EQ(token_f1("  an   apple, a pie.", {"apple pie"}), 1.0);
    EXPECT_DOUBLE_EQ(token_f1("Free-Software (Foundation)", {"freesoftware foundation"}), 1.0);
    // "the" inside a word is not an article.
    EXPECT_DOUBLE_EQ(token_f1("theory", {"ory"}), 0.0);
    EXPECT_DOUBLE_EQ(token_f1("them", {"them"}), 1.0);
}

TEST(EvalMetrics, TokenF1OfPartialOverlaps) {
    // pred {quick, brown, fox}, truth {quick, red, fox, jumps}: 2 common,
    // P = 2/3, R = 2/4, F1 = 2·(2/3)(1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7.
    EXPECT_NEAR(token_f1("the quick brown fox", {"quick red fox jumps"}), 4.0 / 7.0, 1e-12);
    // Multisets: pred {x, x, y}, truth {x, y, y}: common min counts x 1 + y 1 = 2,
    // P = R = 2/3, F1 = 2/3.
    EXPECT_NEAR(token_f1("x x y", {"x y y"}), 2.0 / 3.0, 1e-12);
    // "30 days" against "30": P = 1/2, R = 1, F1 = 2/3; against "thirty": 0; the max is 2/3.
    EXPECT_NEAR(token_f1("30 days", {"thirty", "30"}), 2.0 / 3.0, 1e-12);
}

TEST(EvalMetrics, TokenF1IsZeroForEmpty) {
    EXPECT_DOUBLE_EQ(token_f1("", {"30"}), 0.0);
    EXPECT_DOUBLE_EQ(token_f1("30", {}), 0.0);
    // Both normalise to nothing: no common token, 0 as in SQuAD v1.1.
    EXPECT_DOUBLE_EQ(token_f1("the", {"a"}), 0.0);
}

TEST(EvalMetrics, ScoreDispatchesOnTheMetricName) {
    EXPECT_DOUBLE_EQ(score("string_match_all", "a 1 b", {"1", "2"}), 0.5);
    EXPECT_DOUBLE_EQ(score("string_match_part", "a 1 b", {"1", "2"}), 1.0);
    EXPECT_NEAR(score("token_f1", "30 days", {"30"}), 2.0 / 3.0, 1e-12);
    EXPECT_THROW(score("exact_match", "a", {"a"}), std::invalid_argument);
}

TEST(EvalMetrics, WilsonIntervalMatchesPublishedValues) {
    // 8/10 at 95 %: [0.4902, 0.9433], as statsmodels' proportion_confint(8, 10,
    // method="wilson") gives.
    auto i = wilson_interval(8, 10);
    EXPECT_NEAR(i.low, 0.4902, 5e-4);
    EXPECT_NEAR(i.high, 0.9433, 5e-4);
    // Newcombe 1998, "Two-sided confidence intervals for the single proportion: comparison of
    // seven methods", Stat. Med. 17:857-872, Table I, method 3 (Wilson score, no correction).
    i = wilson_interval(81, 263);
    EXPECT_NEAR(i.low, 0.2553, 5e-4);
    EXPECT_NEAR(i.high, 0.3662, 5e-4);
    i = wilson_interval(15, 148);
    EXPECT_NEAR(i.low, 0.0624, 5e-4);
    EXPECT_NEAR(i.high, 0.1605, 5e-4);
    i = wilson_interval(0, 20);
    EXPECT_NEAR(i.low, 0.0, 1e-9);
    EXPECT_NEAR(i.high, 0.1611, 5e-4);
    i = wilson_interval(1, 29);
    EXPECT_NEAR(i.low, 0.0061, 5e-4);
    EXPECT_NEAR(i.high, 0.1718, 5e-4);
    i = wilson_interval(20, 20);
    EXPECT_NEAR(i.low, 1 - 0.1611, 5e-4);
    EXPECT_DOUBLE_EQ(i.high, 1.0);
    i = wilson_interval(0, 0);
    EXPECT_DOUBLE_EQ(i.low, 0.0);
    EXPECT_DOUBLE_EQ(i.high, 1.0);
}

TEST(EvalMetrics, MeanIntervalIsWilsonForBinaryScores) {
    std::vector<double> s(10, 0.0);
    for (int k = 0; k < 8; ++k)
        s[static_cast<size_t>(k)] = 1.0;
    const auto m = mean_interval(s), w = wilson_interval(8, 10);
    EXPECT_DOUBLE_EQ(m.low, w.low);
    EXPECT_DOUBLE_EQ(m.high, w.high);
    const auto all = mean_interval(std::vector<double>(20, 1.0));
    EXPECT_NEAR(all.low, 1 - 0.1611, 5e-4); // not the point [1, 1] of the normal approximation
    const auto none = mean_interval({});
    EXPECT_DOUBLE_EQ(none.low, 0.0);
    EXPECT_DOUBLE_EQ(none.high, 1.0);
}

TEST(EvalMetrics, MeanIntervalIsNormalOtherwise) {
    // {0.5, 0.7, 0.9}: mean 0.7, s = sqrt((0.04 + 0 + 0.04) / 2) = 0.2,
    // half = 1.96 · 0.2 / sqrt(3) = 0.226321...
    auto m = mean_interval({0.5, 0.7, 0.9});
    EXPECT_NEAR(m.low, 0.7 - 0.2263206, 1e-6);
    EXPECT_NEAR(m.high, 0.7 + 0.2263206, 1e-6);
    // {0, 0, 0.5}: mean 1/6, s = sqrt((1/36 + 1/36 + 1/9) / 2) = 0.288675,
    // half = 1.96 · 0.288675 / sqrt(3) = 0.326667: the low end clamps to 0.
    m = mean_interval({0.0, 0.0, 0.5});
    EXPECT_DOUBLE_EQ(m.low, 0.0);
    EXPECT_NEAR(m.high, 1.0 / 6.0 + 0.3266667, 1e-6);
    m = mean_interval({0.4});
    EXPECT_DOUBLE_EQ(m.low, 0.0);
    EXPECT_DOUBLE_EQ(m.high, 1.0);
}

TEST(EvalMetrics, UnboundedMeanIntervalIsNotClamped) {
    // {2, 4, 6}: mean 4, s = 2, half = 1.96 · 2 / sqrt(3) = 2.2632...; beyond [0, 1].
    const auto m = mean_interval_unbounded({2.0, 4.0, 6.0});
    EXPECT_NEAR(m.low, 4 - 2.263206, 1e-5);
    EXPECT_NEAR(m.high, 4 + 2.263206, 1e-5);
    const auto one = mean_interval_unbounded({3.5});
    EXPECT_DOUBLE_EQ(one.low, 3.5);
    EXPECT_DOUBLE_EQ(one.high, 3.5);
    const auto none = mean_interval_unbounded({});
    EXPECT_DOUBLE_EQ(none.low, 0.0);
    EXPECT_DOUBLE_EQ(none.high, 0.0);
}
