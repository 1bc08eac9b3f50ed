// The integer matrix product (engine/kernels/qgemm.h):
// (a) the scalar reference against an independent double-precision product of the dequantised
//     weights (dequantize_row, bit-exact with ggml) and the dequantised activations, within a
//     bound derived from the float steps' rounding;
// (b) every SIMD level the CPU has against the scalar reference, bit for bit (the block sums are
//     exact integers and the float steps are the same sequence), skipped with a reason elsewhere;
// (c) the result of a token does not depend on the batch it is in, nor on the thread count, and
//     the tiled form equals the plain one;
// (d) bad arguments are refused.
#include "engine/kernels/qgemm.h"

#include "engine/kernels/quant.h"
#include "quant_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace spanscope;
using spanscope::test::level_supported;
using spanscope::test::LevelGuard;

namespace {

const TensorType kTypes[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0,
                             TensorType::Q5_1, TensorType::Q8_0, TensorType::Q4_K,
                             TensorType::Q5_K, TensorType::Q6_K};

struct Case {
    TensorType type;
    int64_t rows, cols, tokens;
    std::vector<uint8_t> weights;
    std::vector<float> x;
    WeightMatrix matrix() const {
        WeightMatrix w;
        w.type = type;
        w.cols = cols;
        w.rows = rows;
        w.data = weights.data();
        w.row_stride = row_bytes(type, cols);
        return w;
    }
};

Case make_case(TensorType t, int64_t rows, int64_t cols, int64_t tokens, unsigned seed) {
    Case c{t, rows, cols, tokens, {}, {}};
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(cols));
    const size_t rb = row_bytes(t, cols);
    c.weights.resize(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        // Rows of different scales and an offset, so that minimums matter.
        const float scale = 0.01f + 0.05f * static_cast<float>(r % 7);
        const float offset = 0.02f * static_cast<float>(r % 3);
        for (auto& v : row)
            v = nd(rng) * scale + offset;
        quantize_row(t, row.data(), c.weights.data() + rb * static_cast<size_t>(r), cols);
    }
    c.x.resize(static_cast<size_t>(tokens * cols));
    for (size_t i = 0; i < c.x.size(); ++i)
        c.x[i] = nd(rng) * (i % 97 == 0 ? 8.0f : 1.0f); // a few outliers per block
    return c;
}

std::vector<float> run(const Case& c, int threads, const float* x = nullptr, int64_t tokens = -1) {
    const int64_t n = tokens < 0 ? c.tokens : tokens;
    QgemmActivations xq;
    qgemm_quantize(x ? x : c.x.data(), n, c.cols, xq);
    std::vector<float> y(static_cast<size_t>(n * c.rows), std::nanf(""));
    ThreadPool pool(threads);
    qgemm(c.matrix(), 0, c.rows, xq, y.data(), c.rows, pool);
    return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

} // namespace

// (a) The scalar reference against double precision.
TEST(qgemm, ScalarMatchesADoublePrecisionProduct) {
    LevelGuard g(KernelLevel::Scalar);
    for (TensorType t : kTypes) {
        const int64_t cols = 512, rows = 13, tokens = 9;
        const Case c = make_case(t, rows, cols, tokens, 7);
        const auto y = run(c, 2);
        QgemmActivations xq;
        qgemm_quantize(c.x.data(), tokens, cols, xq);
        const double u = std::ldexp(1.0, -24);
        const int64_t nb = cols / 16; // the most weight blocks a row has
        for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> w(static_cast<size_t>(cols));
            dequantize_row(t, c.weights.data() + row_bytes(t, cols) * static_cast<size_t>(r),
                           w.data(), cols);
            double wmax = 0.0;
            for (float v : w)
                wmax = std::max(wmax, std::fabs(static_cast<double>(v)));
            for (int64_t tk = 0; tk < tokens; ++tk) {
                double exact = 0.0, mag = 0.0;
                for (int64_t k = 0; k < cols; ++k) {
                    const size_t i = static_cast<size_t>(tk * cols + k);
                    const double xv =
                        static_cast<double>(xq.d[static_cast<size_t>(tk * cols / 32 + k / 32)]) *
                        xq.q[i];
                    exact += static_cast<double>(w[static_cast<size_t>(k)]) * xv;
                    mag += std::fabs(xv);
                }
                // Each block adds at most two roundings of its terms (the scale product and
                // the fused add) and the weights' own rounding in dequantize_row; terms are at
                // most 3 · max|w| · |x| (minimum and scaled quant of opposite signs).
                const double tol = (2.0 * static_cast<double>(nb) + 8.0) * u * 3.0 * wmax * mag;
                EXPECT_NEAR(y[static_cast<size_t>(tk * rows + r)], exact, tol)
                    << traits(t).name << " row " << r << " token " << tk;
            }
        }
    }
}

// (b) Every SIMD level against the scalar reference, bit for bit.
class qgemm_Level : public spanscope::test::KernelLevelTest {};

TEST_P(qgemm_Level, EqualsTheScalarReferenceBitForBit) {
    {
        // The activations: the same bytes, with and without a pool.
        const Case c = make_case(TensorType::Q8_0, 1, 512, 9, 3);
        std::vector<float> x = c.x;
        x[5] = 0.5f * std::nextafter(1.0f, 2.0f);        // values that round at a tie and near one
        std::fill(x.begin() + 64, x.begin() + 96, 0.0f); // an all-zero block
        QgemmActivations ref, got;
        {
            LevelGuard g(KernelLevel::Scalar);
            qgemm_quantize(x.data(), 9, 512, ref);
        }
        LevelGuard g(GetParam());
        ThreadPool pool(2);
        qgemm_quantize(x.data(), 9, 512, got, &pool);
        EXPECT_EQ(ref.q, got.q);
        EXPECT_EQ(std::memcmp(ref.d.data(), got.d.data(), ref.d.size() * 4), 0);
        EXPECT_EQ(std::memcmp(ref.ds.data(), got.ds.data(), ref.ds.size() * 4), 0);
    }
    for (TensorType t : kTypes) {
        // Rows not a multiple of any strip height, tokens not a multiple of any tile width.
        for (int64_t tokens : {1, 5, 19}) {
            const Case c = make_case(t, 37, 768, tokens, 11);
            std::vector<float> ref, got;
            {
                LevelGuard g(KernelLevel::Scalar);
                ref = run(c, 1);
            }
            {
                LevelGuard g(GetParam());
                got = run(c, 2);
            }
            EXPECT_TRUE(same_bits(ref, got)) << traits(t).name << " tokens " << tokens << " at "
                                             << kernel_level_name(GetParam());
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Simd, qgemm_Level,
                         ::testing::Values(KernelLevel::Avx2, KernelLevel::AvxVnni,
                                           KernelLevel::Avx512, KernelLevel::Amx),
                         spanscope::test::level_param_name);

// The quantiser itself against its definition: the scale from the block's largest magnitude, each
// q within half a step of x, ties to even; NaN and infinity give a NaN scale, magnitudes too small
// for a finite 1 / d a zero block.
TEST(qgemm, QuantisedActivationsFollowTheirDefinition) {
    for (KernelLevel level : spanscope::test::runnable_levels()) {
        LevelGuard g(level);
        const int64_t cols = 256;
        std::vector<float> x = make_case(TensorType::Q8_0, 1, cols, 1, 9).x;
        x[32] = 32767.0f; // block 1: scale 1, then ties
        x[33] = 0.5f;
        x[34] = 1.5f;
        x[35] = -2.5f;
        x[64] = std::nanf("");                               // block 2
        x[96] = INFINITY;                                    // block 3
        std::fill(x.begin() + 128, x.begin() + 160, 1e-36f); // block 4
        QgemmActivations xq;
        qgemm_quantize(x.data(), 1, cols, xq);
        const auto name = kernel_level_name(level);
        EXPECT_EQ(xq.q[33], 0) << name;
        EXPECT_EQ(xq.q[34], 2) << name;
        EXPECT_EQ(xq.q[35], -2) << name;
        EXPECT_TRUE(std::isnan(xq.d[2]) && std::isnan(xq.d[3])) << name;
        EXPECT_EQ(xq.d[4], 0.0f) << name;
        for (int64_t a : {0, 1, 5, 6, 7}) {
            float amax = 0.0f;
            for (int k = 0; k < 32; ++k)
                amax = std::max(amax, std::fabs(x[static_cast<size_t>(32 * a + k)]));
            const float d = xq.d[static_cast<size_t>(a)];
            EXPECT_EQ(d, amax / 32767.0f) << name << " block " << a;
            int sum = 0;
            for (int k = 0; k < 32; ++k) {
                const size_t i = static_cast<size_t>(32 * a + k);
                sum += xq.q[i];
                EXPECT_LE(std::fabs(static_cast<double>(xq.q[i]) * d - x[i]), 0.5001 * d)
                    << name << " element " << i;
            }
            EXPECT_EQ(xq.ds[static_cast<size_t>(a)], d * static_cast<float>(sum)) << name;
        }
    }
}

// (c) A token's result is the same alone, in any batch, on any number of threads, tiled or not.
TEST(qgemm, ResultsDoNotDependOnBatchThreadsOrTiling) {
    for (TensorType t : {TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
        const Case c = make_case(t, 70, 512, 23, 5);
        const auto all = run(c, 2);
        EXPECT_TRUE(same_bits(all, run(c, 1))) << traits(t).name;
        // Tokens 10..16 on their own.
        const auto part = run(c, 2, c.x.data() + 10 * c.cols, 7);
        const std::vector<float> expect(all.begin() + 10 * c.rows, all.begin() + 17 * c.rows);
        EXPECT_TRUE(same_bits(part, expect)) << traits(t).name;
        // Tiles of 24 rows (rounded up to the strip height), rows 3..61.
        QgemmActivations xq;
        qgemm_quantize(c.x.data(), c.tokens, c.cols, xq);
        ThreadPool pool(2);
        std::vector<float> tiled(static_cast<size_t>(c.tokens * 58), std::nanf(""));
        std::vector<int> seen(58, 0);
        qgemm_tiles(
            c.matrix(), 3, 61, xq, 24,
            [&](int64_t, int64_t first, int64_t rows, float* logits, int) {
                for (int64_t r = 0; r < rows; ++r) {
                    ++seen[static_cast<size_t>(first - 3 + r)];
                    for (int64_t tk = 0; tk < c.tokens; ++tk)
                        tiled[static_cast<size_t>(tk * 58 + first - 3 + r)] = logits[tk * rows + r];
                }
            },
            pool);
        for (int s : seen)
            EXPECT_EQ(s, 1);
        std::vector<float> expect_tiled;
        for (int64_t tk = 0; tk < c.tokens; ++tk)
            for (int64_t r = 3; r < 61; ++r)
                expect_tiled.push_back(all[static_cast<size_t>(tk * c.rows + r)]);
        EXPECT_TRUE(same_bits(tiled, expect_tiled)) << traits(t).name;
    }
}

// (d) Refusals.
TEST(qgemm, RefusesBadArguments) {
    const Case c = make_case(TensorType::Q8_0, 4, 64, 2, 1);
    QgemmActivations xq;
    EXPECT_THROW(qgemm_quantize(c.x.data(), 2, 48, xq), std::invalid_argument);
    EXPECT_THROW(qgemm_quantize(c.x.data(), -1, 64, xq), std::invalid_argument);
    {
        // Activations that lack what the level reads (here: cut short) are refused.
        QgemmActivations bad;
        qgemm_quantize(c.x.data(), 2, 64, bad);
        bad.q.pop_back();
        ThreadPool one(1);
        std::vector<float> out(8);
        EXPECT_THROW(qgemm(c.matrix(), 0, 4, bad, out.data(), 4, one), std::invalid_argument);
    }
    qgemm_quantize(c.x.data(), 1, 32, xq);
    ThreadPool pool(1);
    std::vector<float> y(64);
    EXPECT_THROW(qgemm(c.matrix(), 0, 4, xq, y.data(), 4, pool), std::invalid_argument);
    qgemm_quantize(c.x.data(), 2, 64, xq);
    EXPECT_THROW(qgemm(c.matrix(), 2, 5, xq, y.data(), 4, pool), std::invalid_argument);
    WeightMatrix f = c.matrix();
    f.type = TensorType::F32;
    EXPECT_FALSE(qgemm_supports(TensorType::F32));
    EXPECT_THROW(qgemm(f, 0, 1, xq, y.data(), 4, pool), std::invalid_argument);
}
