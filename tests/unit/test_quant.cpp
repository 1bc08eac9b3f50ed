// Tests of the quantisation kernels (engine/kernels/quant.h):
//  (a) quantisation quality, and vec_dot against the dot product of dequantised rows;
//  (b) every SIMD level against the scalar reference (dequantize and quantize byte/bit-exact,
//      vec_dot within a floating-point reassociation bound);
//  (c) an independent reference: gguf-py's quantisation and dequantisation, including real
//      blocks of the model file (tests/reference/fixtures/quant_reference.json, written by
//      tests/reference/make_quant_fixtures.py).
// Hand-built blocks with known values, for every type, are in test_quant_handbuilt.cpp.
#include "engine/kernels/fp16.h"
#include "engine/kernels/quant.h"
#include "quant_test_util.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spanscope;
using spanscope::test::dequantized;
using spanscope::test::level_supported;
using spanscope::test::LevelGuard;
using spanscope::test::quantized;
using spanscope::test::runnable_levels;

namespace {

const TensorType kAllTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1, TensorType::Q4_K,
    TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K};

std::vector<float> random_floats(int64_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) {
        x = dist(rng);
    }
    return v;
}

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

std::vector<uint8_t> from_hex(const std::string& s) {
    std::vector<uint8_t> out(s.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
        out[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
    }
    return out;
}

std::vector<float> floats_from_hex(const std::string& s) {
    const auto b = from_hex(s);
    std::vector<float> out(b.size() / 4);
    std::memcpy(out.data(), b.data(), b.size());
    return out;
}

// =============================================================== quantisation quality

TEST(quant_Quality, RoundTripErrorIsSmall) {
    // Relative RMS error of quantize -> dequantize on N(0, 1) data. Bounds are about 1.5x the
    // step / sqrt(12) of each format (e.g. Q4_0: step ~ 2.3 sigma / 8); they catch a quantiser
    // that picks wrong scales, not small differences.
    struct Case {
        TensorType t;
        double max_rel_rms;
    };
    const Case cases[] = {
        {TensorType::F16, 1e-3},  {TensorType::BF16, 5e-3}, {TensorType::Q4_0, 0.12},
        {TensorType::Q4_1, 0.1},  {TensorType::Q5_0, 0.06}, {TensorType::Q5_1, 0.05},
        {TensorType::Q8_0, 0.01}, {TensorType::Q8_1, 0.01}, {TensorType::Q4_K, 0.12},
        {TensorType::Q5_K, 0.06}, {TensorType::Q6_K, 0.03}, {TensorType::Q8_K, 0.012}};
    const int64_t n = 4096;
    const auto x = random_floats(n, 7);
    for (const auto& c : cases) {
        const auto y = dequantized(c.t, quantized(c.t, x), n);
        double err = 0, ref = 0;
        for (int64_t i = 0; i < n; ++i) {
            err += (y[i] - x[i]) * (y[i] - x[i]);
            ref += x[i] * x[i];
        }
        EXPECT_LT(std::sqrt(err / ref), c.max_rel_rms) << traits(c.t).name;
    }
}

/// Bound on the difference of two fp32 evaluations of the same dot product that differ only in
/// the order of n_adds additions (and fused vs separate multiply-add): each evaluation is within
/// n_adds * eps/2 * S of the exact value (recursive summation, Higham 2002, eq. 3.5), where S
/// is the sum of the magnitudes of the terms. Factor 4 covers the K-quants, whose terms
/// (d*sc*q*x and dmin*m*x) can be larger than |w*x|.
double dot_tolerance(int64_t n_adds, double sum_abs_terms) {
    return 4.0 * static_cast<double>(n_adds + 16) * FLT_EPSILON * sum_abs_terms + 1e-30;
}

TEST(quant_Quality, VecDotMatchesDequantizedDot) {
    // vec_dot(w, q(x)) must equal sum(deq(w) * deq(q(x))): checks that the dot kernels read the
    // block layouts the same way dequantisation does.
    for (KernelLevel level : runnable_levels()) {
        LevelGuard guard(level);
        for (TensorType t : kAllTypes) {
            const int64_t n = 1024;
            const auto w = quantized(t, random_floats(n, 11));
            const auto wd = dequantized(t, w, n);
            const TensorType vt = traits(t).vec_dot_type;
            const auto xf = random_floats(n, 12);
            const auto xq = quantized(vt, xf);
            const auto xd = dequantized(vt, xq, n);
            double exact = 0, s = 0;
            for (int64_t i = 0; i < n; ++i) {
                exact += static_cast<double>(wd[i]) * xd[i];
                s += std::fabs(static_cast<double>(wd[i]) * xd[i]);
            }
            const float got = vec_dot(t, n, w.data(), xq.data());
            EXPECT_NEAR(got, exact, dot_tolerance(n, s))
                << traits(t).name << " at " << kernel_level_name(level);
        }
    }
}

// =============================================================== (b) SIMD levels vs scalar

class quant_Level : public spanscope::test::KernelLevelTest {};

std::vector<int64_t> sizes_for(TensorType t) {
    if (traits(t).block_size == kQK_K) {
        return {256, 512, 768, 2048};
    }
    return {32, 64, 96, 640, 1024, 2048}; // 96: an odd number of blocks (kernel tails)
}

TEST_P(quant_Level, DequantizeIsBitExact) {
    // Same operations in the same order as the scalar code (d*q, then -m or +m, no FMA): the
    // floats must be identical.
    for (TensorType t : kAllTypes) {
        for (int64_t n : sizes_for(t)) {
            const auto w = quantized(t, random_floats(n, 100 + static_cast<uint32_t>(n)));
            std::vector<float> ref, got;
            {
                LevelGuard g(KernelLevel::Scalar);
                ref = dequantized(t, w, n);
            }
            {
                LevelGuard g(GetParam());
                got = dequantized(t, w, n);
            }
            for (int64_t i = 0; i < n; ++i) {
                ASSERT_EQ(bits(got[i]), bits(ref[i])) << traits(t).name << " n=" << n << " i=" << i;
            }
        }
    }
}

TEST_P(quant_Level, QuantizeIsByteIdentical) {
    // The SIMD quantisers (Q8_0, Q8_1, Q8_K) use the reference's scale and rounding exactly
    // (roundf emulated as trunc + |frac| >= 0.5; nearest_int == round-to-nearest-even), so the
    // bytes must be identical; the other types use the scalar code at every level.
    for (TensorType t : kAllTypes) {
        for (int64_t n : sizes_for(t)) {
            auto x = random_floats(n, 200 + static_cast<uint32_t>(n), 0.3f);
            std::fill(x.begin(), x.begin() + 32, 0.0f); // a zero block
            for (int i = 32; i < 64 && i < n; ++i) {
                x[i] = static_cast<float>(i - 48) * 0.5f; // exact ties
            }
            std::vector<uint8_t> ref, got;
            {
                LevelGuard g(KernelLevel::Scalar);
                ref = quantized(t, x);
            }
            {
                LevelGuard g(GetParam());
                got = quantized(t, x);
            }
            ASSERT_EQ(got, ref) << traits(t).name << " n=" << n;
        }
    }
}

TEST_P(quant_Level, VecDotMatchesScalar) {
    // Both levels compute the same exact integer sums per block; they differ only in the fp32
    // order of the per-block accumulation (and FMA), see dot_tolerance.
    for (TensorType t : kAllTypes) {
        const TensorType vt = traits(t).vec_dot_type;
        for (int64_t n : sizes_for(t)) {
            const auto w = quantized(t, random_floats(n, 300 + static_cast<uint32_t>(n)));
            const auto xq = quantized(vt, random_floats(n, 400 + static_cast<uint32_t>(n)));
            const auto wd = dequantized(t, w, n);
            const auto xd = dequantized(vt, xq, n);
            double s = 0;
            for (int64_t i = 0; i < n; ++i) {
                s += std::fabs(static_cast<double>(wd[i]) * xd[i]);
            }
            float ref, got;
            {
                LevelGuard g(KernelLevel::Scalar);
                ref = vec_dot(t, n, w.data(), xq.data());
            }
            {
                LevelGuard g(GetParam());
                got = vec_dot(t, n, w.data(), xq.data());
            }
            const int64_t n_adds = traits(t).quantized ? n / traits(t).block_size * 2 : n;
            EXPECT_NEAR(got, ref, dot_tolerance(n_adds, s)) << traits(t).name << " n=" << n;
        }
    }
}

// vec_dot_rows (decode's loop over a matrix, with kernels of its own at some levels): each row
// within the scalar reference's tolerance, and a row's result the same bits whether it is
// computed among 9 rows or alone (the split over threads must not change decode's logits).
TEST_P(quant_Level, VecDotRowsMatchesScalarAndDoesNotDependOnTheSplit) {
    for (TensorType t : kAllTypes) {
        const TensorType vt = traits(t).vec_dot_type;
        const int64_t n =
            traits(t).block_size == 1 ? 96 : 4 * std::max<int64_t>(32, traits(t).block_size);
        const int64_t rows = 9;
        const size_t rb = row_bytes(t, n);
        std::vector<uint8_t> w;
        for (int64_t r = 0; r < rows; ++r) {
            const auto row = quantized(t, random_floats(n, 700 + static_cast<uint32_t>(r)));
            w.insert(w.end(), row.begin(), row.end());
        }
        const auto xq = quantized(vt, random_floats(n, 800));
        const auto xd = dequantized(vt, xq, n);
        std::vector<float> ref(static_cast<size_t>(rows)), all(ref.size()), one(ref.size());
        {
            LevelGuard scalar(KernelLevel::Scalar);
            for (int64_t r = 0; r < rows; ++r)
                ref[static_cast<size_t>(r)] = vec_dot(t, n, w.data() + r * rb, xq.data());
        }
        {
            LevelGuard g(GetParam());
            vec_dot_rows(t, n, rows, w.data(), rb, xq.data(), all.data());
            for (int64_t r = 0; r < rows; ++r)
                vec_dot_rows(t, n, 1, w.data() + r * rb, rb, xq.data(), one.data() + r);
        }
        for (int64_t r = 0; r < rows; ++r) {
            const size_t i = static_cast<size_t>(r);
            EXPECT_EQ(std::memcmp(&one[i], &all[i], sizeof(float)), 0)
                << traits(t).name << " row " << r;
            const std::vector<uint8_t> row(w.begin() + r * rb, w.begin() + (r + 1) * rb);
            const auto wd = dequantized(t, row, n);
            double s = 0;
            for (int64_t k = 0; k < n; ++k)
                s += std::fabs(static_cast<double>(wd[static_cast<size_t>(k)]) *
                               xd[static_cast<size_t>(k)]);
            const int64_t n_adds = traits(t).quantized ? n / traits(t).block_size * 2 : n;
            EXPECT_NEAR(all[i], ref[i], dot_tolerance(n_adds, s)) << traits(t).name << " row " << r;
        }
    }
}

// Q4_0, Q4_1 and Q5_1 rows sum in vec_dot's order and lanes (quant.h): the same bits as vec_dot
// at every level, so a decode step's logits do not depend on which of the two ran (a prefill's
// last tokens use vec_dot_rows, a single-row product vec_dot).
TEST_P(quant_Level, VecDotRowsOfQ4AndQ5_1GiveVecDotsBits) {
    for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_1}) {
        const int64_t n = 7 * 32, rows = 6; // an odd block count: vec_dot's pairs leave a tail
        const size_t rb = row_bytes(t, n);
        std::vector<uint8_t> w;
        for (int64_t r = 0; r < rows; ++r) {
            const auto row = quantized(t, random_floats(n, 900 + static_cast<uint32_t>(r)));
            w.insert(w.end(), row.begin(), row.end());
        }
        const auto xq = quantized(traits(t).vec_dot_type, random_floats(n, 901));
        LevelGuard g(GetParam());
        std::vector<float> all(static_cast<size_t>(rows));
        vec_dot_rows(t, n, rows, w.data(), rb, xq.data(), all.data());
        for (int64_t r = 0; r < rows; ++r) {
            const float one = vec_dot(t, n, w.data() + r * rb, xq.data());
            EXPECT_EQ(std::memcmp(&one, &all[static_cast<size_t>(r)], sizeof(float)), 0)
                << traits(t).name << " row " << r << ": " << one << " vs "
                << all[static_cast<size_t>(r)];
        }
    }
}

// The extremes of Q8_0's bytes: a weight of -128 (the format allows it, though ggml's quantiser
// writes [-127, 127]) against activations of both signs, at every level, against the exact sum
// of the dequantised products (both factors are exact in double).
TEST_P(quant_Level, Q8_0WeightsOfMinus128AreMultipliedExactly) {
    const int64_t n = 64, rows = 5;
    const size_t rb = row_bytes(TensorType::Q8_0, n);
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < n / 32; ++b) {
            uint8_t* block = w.data() + r * rb + b * 34;
            const uint16_t d = fp32_to_fp16(0.25f * static_cast<float>(r + 1));
            std::memcpy(block, &d, 2);
            for (int j = 0; j < 32; ++j)
                block[2 + j] = static_cast<uint8_t>(j % 3 == 0 ? -128 : j % 3 == 1 ? 127 : -5);
        }
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
        x[static_cast<size_t>(k)] = (k % 2 ? -1.0f : 1.0f) * (0.5f + static_cast<float>(k % 7));
    const auto xq = quantized(TensorType::Q8_0, x);
    const auto xd = dequantized(TensorType::Q8_0, xq, n);
    std::vector<float> got(static_cast<size_t>(rows));
    {
        LevelGuard g(GetParam());
        vec_dot_rows(TensorType::Q8_0, n, rows, w.data(), rb, xq.data(), got.data());
    }
    for (int64_t r = 0; r < rows; ++r) {
        const std::vector<uint8_t> row(w.begin() + r * rb, w.begin() + (r + 1) * rb);
        const auto wd = dequantized(TensorType::Q8_0, row, n);
        double want = 0, mag = 0;
        for (int64_t k = 0; k < n; ++k) {
            want += static_cast<double>(wd[static_cast<size_t>(k)]) * xd[static_cast<size_t>(k)];
            mag += std::fabs(static_cast<double>(wd[static_cast<size_t>(k)]) *
                             xd[static_cast<size_t>(k)]);
        }
        // Each block's integer sum is exact; the float steps round a few times.
        EXPECT_NEAR(got[static_cast<size_t>(r)], want, 8 * FLT_EPSILON * mag) << "row " << r;
    }
}

INSTANTIATE_TEST_SUITE_P(Simd, quant_Level,
                         ::testing::Values(KernelLevel::Avx2, KernelLevel::AvxVnni,
                                           KernelLevel::Avx512, KernelLevel::Amx),
                         spanscope::test::level_param_name);

// =============================================================== (c) gguf-py reference

TEST(quant_Reference, MatchesGgufPy) {
    const std::string path =
        spanscope::test::data_dir() + "/reference/fixtures/quant_reference.json";
    std::ifstream in(path);
    ASSERT_TRUE(in) << "missing fixture " << path
                    << " (run tests/reference/make_quant_fixtures.py)";
    const auto doc = nlohmann::json::parse(in);
    int n_cases = 0, n_quantize = 0, n_real = 0;
    for (const auto& c : doc.at("cases")) {
        const auto t = static_cast<TensorType>(c.at("type_id").get<uint32_t>());
        ASSERT_TRUE(tensor_type_traits(static_cast<uint32_t>(t)).has_value());
        ASSERT_EQ(traits(t).name, c.at("type").get<std::string>());
        const int64_t n = c.at("n").get<int64_t>();
        const auto bytes = from_hex(c.at("bytes").get<std::string>());
        const auto expect = floats_from_hex(c.at("dequant").get<std::string>());
        ASSERT_EQ(bytes.size(), row_bytes(t, n));
        ASSERT_EQ(expect.size(), static_cast<size_t>(n));
        const std::string what =
            c.at("type").get<std::string>() + " (" + c.at("source").get<std::string>() + ")";
        for (KernelLevel level : runnable_levels()) {
            LevelGuard guard(level);
            const auto got = dequantized(t, bytes, n);
            for (int64_t i = 0; i < n; ++i) {
                // Exact: gguf-py (numpy, fp32) evaluates the same products and differences.
                ASSERT_EQ(bits(got[i]), bits(expect[i]))
                    << what << " i=" << i << " at " << kernel_level_name(level) << ": " << got[i]
                    << " vs " << expect[i];
            }
            if (c.contains("input")) {
                const auto x = floats_from_hex(c.at("input").get<std::string>());
                ASSERT_EQ(quantized(t, x), bytes) << what << " at " << kernel_level_name(level);
            }
        }
        ++n_cases;
        n_quantize += c.contains("input") ? 1 : 0;
        n_real += c.at("source").get<std::string>().find(".gguf") != std::string::npos ? 1 : 0;
    }
    EXPECT_GE(n_cases, 11);
    EXPECT_GE(n_quantize, 8);
    EXPECT_GE(n_real, 4) << "fixture lacks the real-model blocks";
}

} // namespace
