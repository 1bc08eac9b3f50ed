// The two resolutions of a SEKV span: summary weights and rows, and low-rank factors checked
// against singular values from another LAPACK routine (dgesvd, not the Gram-matrix eigen-solver
// the factors use): the squared error of a rank-r approximation is the sum of the discarded
// squared singular values (Eckart–Young), and full rank reconstructs the rows.
#include "engine/sekv/span_factors.h"

#include "engine/kernels/ops.h"
#include "engine/kernels/rope.h"
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

TEST(SpanFactors, F16ConversionIsExactOnTheWayBackAndRefusesWhatWouldOverflow) {
    const std::vector<float> x = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-3f, 3.14159f};
    const auto h = to_f16(x.data(), static_cast<int64_t>(x.size()), "test");
    const auto back = from_f16(h.data(), static_cast<int64_t>(h.size()));
    for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(back[i], x[i], std::ldexp(std::fabs(x[i]), -11)) << i;
    EXPECT_EQ(back[3], 65504.0f);
    const auto again = to_f16(back.data(), static_cast<int64_t>(back.size()), "test");
    EXPECT_EQ(again, h); // widened values are f16 values: rounding them again changes nothing
    const float big[] = {1.0f, 70000.0f};
    EXPECT_THROW(to_f16(big, 2, "test"), std::range_error);
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

// The factors are held in f16 (round to nearest: relative error at most u = 2^-11 per entry), so
// a rebuilt entry Σ_r l_ir r_rj differs from the one of the exact factors by at most
// (2u + u²) Σ_r |l_ir| |r_rj|. Returns the Frobenius norm of that entry-wise bound [rows][dim].
double f16_rounding_bound(const SpanFactors& f) {
    const double u = std::ldexp(1.0, -11);
    const auto l = f.left_f32(), r = f.right_f32();
    double sq = 0;
    for (int64_t i = 0; i < f.rows; ++i)
        for (int64_t j = 0; j < f.dim; ++j) {
            double b = 0;
            for (int c = 0; c < f.rank; ++c)
                b += std::fabs(l[i * f.rank + c]) * std::fabs(r[c * f.dim + j]);
            b *= 2 * u + u * u;
            sq += b * b;
        }
    return std::sqrt(sq);
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
            // Eckart–Young: the exact factors' error is √discarded; the f16 rounding moves the
            // rebuilt rows by at most f16_rounding_bound (triangle inequality).
            const double err = squared_error(rows, approx);
            EXPECT_NEAR(std::sqrt(err), std::sqrt(discarded),
                        f16_rounding_bound(f) + 1e-4 * (1 + std::sqrt(discarded)))
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
    double sq = 0;
    for (size_t i = 0; i < rows.size(); ++i)
        sq += (back[i] - rows[i]) * (back[i] - rows[i]);
    EXPECT_LE(std::sqrt(sq), f16_rounding_bound(f) + 1e-4);
    // Half of the bound's worst case is already far from what f16 allows per entry: a rebuilt
    // entry of the full-rank factors is the row entry within f16's relative precision.
    const double u = std::ldexp(1.0, -11);
    const auto l = f.left_f32(), r = f.right_f32();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) {
            double b = 0;
            for (int c = 0; c < f.rank; ++c)
                b += std::fabs(l[i * f.rank + c]) * std::fabs(r[c * d + j]);
            EXPECT_NEAR(back[i * d + j], rows[i * d + j], (2 * u + u * u) * b + 1e-5)
                << i << "," << j;
        }
    const auto again = low_rank_factors(rows.data(), n, d, 32);
    EXPECT_EQ(again.left, f.left);
    EXPECT_EQ(again.right, f.right);
    // Held in f16 (the default right type): two bytes per entry, and widening is exact.
    EXPECT_EQ(f.left.size(), static_cast<size_t>(n * f.rank));
    EXPECT_EQ(f.right_type, TensorType::F16);
    EXPECT_EQ(f.right.size(), static_cast<size_t>(f.rank * d) * sizeof(uint16_t));
    // Fixed signs: each left column's largest-magnitude entry is positive.
    for (int c = 0; c < f.rank; ++c) {
        float big = 0;
        for (int64_t i = 0; i < n; ++i)
            if (std::fabs(l[i * f.rank + c]) > std::fabs(big))
                big = l[i * f.rank + c];
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
    // The same up to f16 rounding: an entry may round the other way (one f16 step, 2^-10 of its
    // magnitude), and the moved right factor is rounded once more after its rotation.
    const auto l0 = f0.left_f32(), l1 = f1.left_f32(), rt0 = f0.right_f32(), rt1 = f1.right_f32();
    for (size_t i = 0; i < l0.size(); ++i)
        EXPECT_NEAR(l0[i], l1[i], std::ldexp(1.0, -10) * std::fabs(l1[i]) + 1e-4) << i;
    for (size_t i = 0; i < rt0.size(); ++i)
        EXPECT_NEAR(rt0[i], rt1[i], std::ldexp(1.0, -9) * std::fabs(rt1[i]) + 1e-3) << i;
    std::vector<float> r0(k0.size()), r1(k1.size());
    reconstruct(f0, r0.data());
    reconstruct(f1, r1.data());
    const double bound = 2 * (f16_rounding_bound(f0) + f16_rounding_bound(f1));
    double sq = 0;
    for (size_t i = 0; i < r0.size(); ++i)
        sq += (r0[i] - r1[i]) * (r0[i] - r1[i]);
    EXPECT_LE(std::sqrt(sq), bound + 1e-3);
}

// Q8_0 right factors (the host tier's default for head dimensions that are multiples of 32):
// 34 bytes per 32 entries, and each rebuilt entry within the rounding it allows — per right
// entry half a step (max|x|/254 of its block) and the f16 rounding of the block's scale, times
// |l|, plus the f16 rounding of the left factor — of the rows; the exact factors' own error is
// zero at full rank.
TEST(SpanFactors, Q8RightFactorsRebuildTheRowsWithinTheirBlocksRounding) {
    const int64_t n = 20, d = 64;
    const auto rows = randn(static_cast<size_t>(n * d), 21, 2.0f);
    const auto f = low_rank_factors(rows.data(), n, d, 32, TensorType::Q8_0);
    ASSERT_EQ(f.right_type, TensorType::Q8_0);
    EXPECT_EQ(f.rank, 20);
    EXPECT_EQ(f.right.size(), static_cast<size_t>(f.rank) * 2 * 34); // two blocks of 32 per row
    const auto exact = low_rank_factors(rows.data(), n, d, 32, TensorType::F16);
    const auto l = f.left_f32(), r = f.right_f32(), r16 = exact.right_f32();
    std::vector<float> back(rows.size());
    reconstruct(f, back.data());
    const double u = std::ldexp(1.0, -11);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < d; ++j) {
            double bound = 0;
            for (int c = 0; c < f.rank; ++c) {
                double block_max = 0; // the right factor's block holding entry j, as held in f16
                for (int64_t x = j / 32 * 32; x < j / 32 * 32 + 32; ++x)
                    block_max = std::max(block_max, std::fabs(static_cast<double>(r16[c * d + x])));
                // Half a step (max/254), the f16 rounding of the block's scale (|q| ≤ 127 steps
                // of a scale off by 2^-11: max · 2^-11), and the f16 entry's own rounding.
                const double entry =
                    block_max * (1.0 / 254 + u) * 1.01 + 2 * u * std::fabs(r16[c * d + j]);
                bound += std::fabs(l[i * f.rank + c]) * entry * (1 + 2 * u);
                EXPECT_NEAR(r[c * d + j], r16[c * d + j], entry + 1e-6);
            }
            EXPECT_NEAR(back[i * d + j], rows[i * d + j], bound + 1e-5) << i << "," << j;
        }
    // A head dimension that is not a multiple of 32 falls back to f16.
    const auto odd = low_rank_factors(rows.data(), 8, 40, 4, TensorType::Q8_0);
    EXPECT_EQ(odd.right_type, TensorType::F16);
    EXPECT_THROW(low_rank_factors(rows.data(), n, d, 4, TensorType::Q4_0), std::invalid_argument);
}
