// Element-wise building blocks against their textbook definitions (double precision), at every
// kernel level this CPU runs.
#include "engine/kernels/ops.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/simd.h"
#include "quant_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace spanscope;

using spanscope::test::LevelGuard;
using spanscope::test::runnable_levels;

TEST(Ops, ExpShiftedSumIsAccurate) {
    for (KernelLevel level : runnable_levels()) {
        LevelGuard guard(level);
        std::vector<float> x;
        for (float v = -87.0f; v <= 88.0f; v += 0.0137f)
            x.push_back(v);
        x.push_back(-std::numeric_limits<float>::infinity());
        std::vector<float> y = x;
        const double sum = exp_shifted_sum(y.data(), static_cast<int64_t>(y.size()), 1.5f);
        double ref_sum = 0, worst = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            // The kernel subtracts in float; the reference exponentiates that same argument.
            const double ref = std::exp(double(x[i] - 1.5f));
            ref_sum += ref;
            if (ref > 1e-30)
                worst = std::max(worst, std::abs(y[i] - ref) / ref);
        }
        EXPECT_EQ(y.back(), 0.0f) << "exp(-inf) must be 0";
        EXPECT_LT(worst, 3e-7) << kernel_level_name(level);
        EXPECT_NEAR(sum / ref_sum, 1.0, 1e-6);
    }
}

TEST(Ops, MaxValueIsTheLargestElementAtEveryLevel) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 10.0f);
    for (KernelLevel level : spanscope::test::runnable_levels()) {
        spanscope::test::LevelGuard g(level);
        for (int64_t n : {1, 7, 8, 9, 31, 512, 1000}) {
            std::vector<float> x(static_cast<size_t>(n));
            for (auto& v : x)
                v = nd(rng);
            x[static_cast<size_t>(n / 2)] = 1000.0f + static_cast<float>(n); // the largest
            EXPECT_EQ(max_value(x.data(), n), 1000.0f + static_cast<float>(n))
                << kernel_level_name(level) << " n " << n;
            x.back() = 5000.0f; // at the end, past the last whole vector
            EXPECT_EQ(max_value(x.data(), n), 5000.0f) << kernel_level_name(level) << " n " << n;
        }
    }
}

TEST(Ops, GegluMatchesTheTanhDefinition) {
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> g0(1003), u(1003);
    for (size_t i = 0; i < g0.size(); ++i) {
        g0[i] = d(rng);
        u[i] = d(rng);
    }
    g0[0] = -100.0f; // exp overflow side: gelu -> -0
    g0[1] = 100.0f;
    for (KernelLevel level : runnable_levels()) {
        LevelGuard guard(level);
        auto g = g0;
        geglu_tanh(g.data(), u.data(), static_cast<int64_t>(g.size()));
        for (size_t i = 0; i < g.size(); ++i) {
            const double x = g0[i];
            const double ref =
                0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
            EXPECT_NEAR(g[i], ref, 1e-5 * (1 + std::abs(ref)))
                << i << " " << kernel_level_name(level);
        }
    }
}

TEST(Ops, RmsNormAndRope) {
    std::vector<float> x{1, 2, 3, 4, -1, 0, 0, 1};
    const std::vector<float> w{1, 0.5f, 2, 1};
    rms_norm(x.data(), w.data(), 2, 4, 0.0f);
    const double r0 = 1 / std::sqrt((1 + 4 + 9 + 16) / 4.0);
    EXPECT_NEAR(x[1], 2 * r0 * 0.5, 1e-6);
    EXPECT_NEAR(x[2], 3 * r0 * 2, 1e-6);
    const double r1 = 1 / std::sqrt(2 / 4.0);
    EXPECT_NEAR(x[4], -1 * r1, 1e-6);

    // Rotate-half RoPE, d = 4, base 100: pairs (0,2) at angle p, (1,3) at angle p/10.
    std::vector<float> v{1, 0, 0, 1};
    const int32_t pos = 3;
    RopeTable t(&pos, 1, 4, 100.0);
    rope_neox(v.data(), t, 1, 1);
    EXPECT_NEAR(v[0], std::cos(3.0), 1e-6);
    EXPECT_NEAR(v[2], std::sin(3.0), 1e-6);
    EXPECT_NEAR(v[1], -std::sin(0.3), 1e-6);
    EXPECT_NEAR(v[3], std::cos(0.3), 1e-6);
}
