// The two resolutions of a SEKV span: summary weights and rows, and low-rank factors checked
// against singular values from another LAPACK routine (dgesvd, not the Gram-matrix eigen-solver
// the factors use): the squared error of a rank-r approximation is the sum of the discarded
// squared singular values (Eckart–Young), and full rank reconstructs the rows.
#include "engine/sekv/span_factors.h"

#include "engine/kernels/ops.h"
#include "random_fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

extern "C" void dgesvd_(const char* jobu, const char* jobvt, const int* m, const int* n, double* a,
                        const int* lda, double* s, double* u, const int* ldu, double* vt,
                        const int* ldvt, double* work, const int* lwork, int* info);

using namespace spanscope;
using spanscope::test::randn;

namespace {
// Singular values of rows [n][d], descending, by dgesvd.
std::vector<double> singular_values(const std::vector<float>& rows, int64_t n, int64_t d) {
    std::vector<double> a(rows.begin(), rows.end()); // row-major [n][d] = column-major [d][n]
    const int m = static_cast<int>(d), nn = static_cast<int>(n);
    std::vector<double> s(static_cast<size_t>(std::min(n, d)));
    int lwork = -1, info = 0, one = 1;
    double q = 0, dummy = 0;
    dgesvd_("N", "N", &m, &nn, a.data(), &m, s.data(), &dummy, &one, &dummy, &one, &q, &lwork,
            &info);
    lwork = static_cast<int>(q);
    std::vector<double> work(static_cast<size_t>(lwork));
    dgesvd_("N", "N", &m, &nn, a.data(), &m, s.data(), &dummy, &one, &dummy, &one, work.data(),
            &lwork, &info);
    EXPECT_EQ(info, 0);
    return s;
}

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
    double e = 0;
    for (size_t i = 0; i < a.size(); ++i)
        e += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    return e;
}
} // namespace

TEST(SpanFactors, WeightsFollowSurprisalAndSumToOne) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float s[] = {1, 3, -2, nan};
    const auto w = span_weights(s, 4);
    EXPECT_FLOAT_EQ(w[0], 0.25f);
    EXPECT_FLOAT_EQ(w[1], 0.75f);
    EXPECT_FLOAT_EQ(w[2], 0.0f);
    EXPECT_FLOAT_EQ(w[3], 0.0f);
    const float zero[] = {0, 0, 0};
    for (const auto x : span_weights(zero, 3))
        EXPECT_FLOAT_EQ(x, 1.0f / 3);
    std::mt19937 rng(3);
    std::vector<float> r(50);
    for (auto& x : r)
        x = static_cast<float>(rng() % 1000) / 100.0f;
    const auto wr = span_weights(r.data(), 50);
    double sum = 0;
    for (const auto x : wr)
        sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_THROW(span_weights(r.data(), 0), std::invalid_argument);
}

TEST(SpanFactors, SummaryOfEqualRowsIsThatRow) {
    const int64_t n = 7, d = 5;
    std::vector<float> rows(static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j)
            rows[i * d + j] = 0.5f * static_cast<float>(j) - 1.0f;
    const float s[] = {0.1f, 2, 0.3f, 4, 0, 1, 7};
    const auto w = span_weights(s, n);
    std::vector<float> out(d);
    summary_row(rows.data(), n, d, w.data(), out.data());
    for (int64_t j = 0; j < d; ++j)
        EXPECT_NEAR(out[j], rows[j], 1e-6);
}

TEST(SpanFactors, ErrorEqualsDiscardedSingularValues) {
    for (const auto& [n, d] : {std::pair<int64_t, int64_t>{40, 64}, {64, 16}, {9, 256}}) {
        const auto rows = randn(static_cast<size_t>(n * d), static_cast<uint64_t>(n * 1000 + d));
        const auto sv = singular_values(rows, n, d);
        for (const int rank : {1, 4, 8, 32}) {
            const auto f = low_rank_factors(rows.data(), n, d, rank);
            std::vector<float> approx(rows.size());
            reconstruct(f, approx.data());
            double discarded = 0;
            for (size_t i = static_cast<size_t>(f.rank); i < sv.size(); ++i)
                discarded += sv[i] * sv[i];
            const double err = squared_error(rows, approx);
            EXPECT_NEAR(err, discarded, 1e-4 * (1 + discarded))
                << n << "x" << d << " rank " << rank;
            EXPECT_NEAR(f.discarded(), discarded, 1e-6 * (1 + discarded));
            for (size_t i = 0; i < sv.size() && i < f.sigma2.size(); ++i)
                EXPECT_NEAR(f.sigma2[i], sv[i] * sv[i], 1e-6 * (1 + sv[0] * sv[0]));
        }
    }
}

TEST(SpanFactors, FullRankReconstructsAndIsDeterministic) {
    const int64_t n = 24, d = 64;
    const auto rows = randn(static_cast<size_t>(n * d), 11);
    const auto f = low_rank_factors(rows.data(), n, d, 32);
    EXPECT_EQ(f.rank, 24);
    std::vector<float> back(rows.size());
    reconstruct(f, back.data());
    for (size_t i = 0; i < rows.size(); ++i)
        EXPECT_NEAR(back[i], rows[i], 1e-4) << i;
    const auto again = low_rank_factors(rows.data(), n, d, 32);
    EXPECT_EQ(again.left, f.left);
    EXPECT_EQ(again.right, f.right);
    // Fixed signs: each left column's largest-magnitude entry is positive.
    for (int r = 0; r < f.rank; ++r) {
        float big = 0;
        for (int64_t i = 0; i < n; ++i)
            if (std::fabs(f.left[i * f.rank + r]) > std::fabs(big))
                big = f.left[i * f.rank + r];
        EXPECT_GT(big, 0.0f);
    }
    EXPECT_THROW(low_rank_factors(rows.data(), 0, d, 4), std::invalid_argument);
    EXPECT_THROW(low_rank_factors(rows.data(), n, d, 0), std::invalid_argument);
}

TEST(SpanFactors, MovingAKeySpanEqualsBuildingItAtTheNewPosition) {
    // Unrotated keys of one head, rotated at positions 100.. and at 100 + delta..
    const int64_t n = 20;
    const int d = 64;
    const double base = 1e6;
    const int32_t delta = 1234;
    const auto raw = randn(static_cast<size_t>(n * d), 5);
    auto at = [&](int32_t first) {
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            pos[i] = first + static_cast<int32_t>(i);
        std::vector<float> k = raw;
        rope_neox(k.data(), RopeTable(pos.data(), n, d, base), n, 1);
        return k;
    };
    const auto k0 = at(100), k1 = at(100 + delta);
    const float s[] = {1, 2, 0.5f, 3, 1, 1, 2, 4, 0.1f, 1, 2, 2, 1, 3, 1, 1, 5, 1, 2, 1};
    const auto w = span_weights(s, n);
    auto f0 = low_rank_factors(k0.data(), n, d, 8);
    std::vector<float> sum0(d), sum1(d);
    summary_row(k0.data(), n, d, w.data(), sum0.data());
    move_key_span(f0, sum0.data(), delta, base);
    const auto f1 = low_rank_factors(k1.data(), n, d, 8);
    summary_row(k1.data(), n, d, w.data(), sum1.data());
    for (int j = 0; j < d; ++j)
        EXPECT_NEAR(sum0[j], sum1[j], 1e-4) << j;
    for (size_t i = 0; i < f0.left.size(); ++i)
        EXPECT_NEAR(f0.left[i], f1.left[i], 1e-4) << i;
    for (size_t i = 0; i < f0.right.size(); ++i)
        EXPECT_NEAR(f0.right[i], f1.right[i], 1e-3) << i;
    std::vector<float> r0(k0.size()), r1(k1.size());
    reconstruct(f0, r0.data());
    reconstruct(f1, r1.data());
    for (size_t i = 0; i < r0.size(); ++i)
        EXPECT_NEAR(r0[i], r1[i], 1e-3) << i;
}
