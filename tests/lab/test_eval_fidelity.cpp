// The fidelity measures of the evaluation against values computed by hand.
#include "lab/evaluation/eval_fidelity.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace spanscope::eval;

namespace {
std::vector<float> logs(std::initializer_list<double> p) {
    std::vector<float> out;
    for (const double x : p)
        out.push_back(static_cast<float>(std::log(x)));
    return out;
}
} // namespace

TEST(EvalFidelity, LogSoftmaxNormalises) {
    const auto l = log_softmax({0.0f, static_cast<float>(std::log(3.0)) + 100.0f - 100.0f});
    EXPECT_NEAR(std::exp(l[0]), 0.25, 1e-6);
    EXPECT_NEAR(std::exp(l[1]), 0.75, 1e-6);
    const auto shifted = log_softmax({1000.0f, 1000.0f}); // no overflow
    EXPECT_NEAR(shifted[0], std::log(0.5), 1e-6);
}

TEST(EvalFidelity, KlIsOfTheReferenceAgainstThePolicyAndTop1ComparesArgmaxes) {
    // Position 0: ref (0.5, 0.5), policy (0.25, 0.75):
    //   KL = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75) = 0.143841; argmax 0 (first of a tie) vs 1.
    // Position 1: ref (0.9, 0.1), policy (0.8, 0.2):
    //   KL = 0.9 ln(0.9/0.8) + 0.1 ln(0.1/0.2) = 0.036690; argmax 0 vs 0.
    // (The reverse direction, KL(policy ‖ ref), would give 0.130812 and 0.040850.)
    const std::vector<std::vector<float>> ref{logs({0.5, 0.5}), logs({0.9, 0.1})};
    const std::vector<std::vector<float>> forced{logs({0.25, 0.75}), logs({0.8, 0.2})};
    const auto f = fidelity({5, 7, 9}, forced, {5, 8}, ref);
    EXPECT_NEAR(f["kl"].get<double>(), (0.143841 + 0.036690) / 2, 1e-5);
    EXPECT_DOUBLE_EQ(f["top1_agreement"].get<double>(), 0.5);
    EXPECT_NEAR(f["greedy_agreement"].get<double>(), 1.0 / 3.0, 1e-12); // 1 of the longer 3
    EXPECT_EQ(f["positions"].get<int>(), 2);
}

TEST(EvalFidelity, IdenticalDistributionsAgreeFully) {
    const std::vector<std::vector<float>> ref{logs({0.2, 0.3, 0.5})};
    const auto f = fidelity({}, ref, {}, ref);
    EXPECT_EQ(f["kl"].get<double>(), 0.0);
    EXPECT_EQ(f["top1_agreement"].get<double>(), 1.0);
    EXPECT_EQ(f["greedy_agreement"].get<double>(), 1.0);
}

// KL(p ‖ q) ≥ 0 for distributions: a negative value (here from a q that is not one, its
// "probabilities" summing to e) is a bug upstream and is refused, not clamped to 0.
TEST(EvalFidelity, ANegativeKlIsRefused) {
    const std::vector<std::vector<float>> ref{logs({0.5, 0.5})};
    const std::vector<std::vector<float>> not_normalised{logs({0.5 * M_E, 0.5 * M_E})};
    EXPECT_THROW(fidelity({1}, not_normalised, {1}, ref), std::logic_error);
}
