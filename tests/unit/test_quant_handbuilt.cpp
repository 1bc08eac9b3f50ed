// Tests of the quantisation kernels (engine/kernels/quant.h) on hand-built blocks: each block is
// written byte by byte with known values, for every type; and the API's levels and errors. The SIMD
// levels against the scalar reference and gguf-py's reference are in test_quant.cpp.
#include "engine/kernels/fp16.h"
#include "engine/kernels/quant.h"
#include "quant_test_util.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
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

void put_f16(std::vector<uint8_t>& b, size_t off, float v) {
    const uint16_t h = fp32_to_fp16(v);
    std::memcpy(b.data() + off, &h, 2);
}

/// Packs 6-bit scales and mins of the 8 sub-blocks of Q4_K/Q5_K as get_scale_min_k4 reads them.
void pack_k4_scales(uint8_t* packed, const int sc[8], const int m[8]) {
    std::memset(packed, 0, 12);
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            packed[j] = static_cast<uint8_t>(sc[j]);
            packed[j + 4] = static_cast<uint8_t>(m[j]);
        } else {
            packed[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
            packed[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
            packed[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
        }
    }
}

// =============================================================== (a) hand-built blocks

// Each test writes a block byte by byte from the layout in ggml-common.h and checks exact
// floats computed independently from that layout. All values are small integers times powers of
// two, so they are exact in fp32 whatever the evaluation order.

TEST(quant_HandBuilt, F32F16BF16) {
    const float f32[3] = {1.5f, -0.25f, 3.0e38f};
    std::vector<uint8_t> b(12);
    std::memcpy(b.data(), f32, 12);
    EXPECT_EQ(dequantized(TensorType::F32, b, 3), (std::vector<float>{1.5f, -0.25f, 3.0e38f}));

    // f16: 1.0, -2.0, smallest subnormal 2^-24, +inf, 65504 (largest finite).
    const uint16_t h[5] = {0x3C00, 0xC000, 0x0001, 0x7C00, 0x7BFF};
    std::vector<uint8_t> hb(10);
    std::memcpy(hb.data(), h, 10);
    const auto f = dequantized(TensorType::F16, hb, 5);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[1], -2.0f);
    EXPECT_EQ(f[2], std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isinf(f[3]) && f[3] > 0);
    EXPECT_EQ(f[4], 65504.0f);
    // Round to nearest even: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> 1 (even mantissa);
    // 65520 overflows to inf; 2^-25 (a tie with 0) -> 0; 3 * 2^-26 -> 2^-24.
    const std::vector<float> in = {1.0f + std::ldexp(1.0f, -11), 65520.0f, std::ldexp(1.0f, -25),
                                   3 * std::ldexp(1.0f, -26)};
    const auto q = quantized(TensorType::F16, in);
    uint16_t out[4];
    std::memcpy(out, q.data(), 8);
    EXPECT_EQ(out[0], 0x3C00);
    EXPECT_EQ(out[1], 0x7C00);
    EXPECT_EQ(out[2], 0x0000);
    EXPECT_EQ(out[3], 0x0001);

    // bf16: 0x3F80 = 1.0, 0xC040 = -3.0; fp32 0x3F808000 is a tie -> 0x3F80, 0x3F818000 -> 0x3F82.
    const uint16_t bf[2] = {0x3F80, 0xC040};
    std::vector<uint8_t> bb(4);
    std::memcpy(bb.data(), bf, 4);
    EXPECT_EQ(dequantized(TensorType::BF16, bb, 2), (std::vector<float>{1.0f, -3.0f}));
    float t0, t1;
    const uint32_t u0 = 0x3F808000u, u1 = 0x3F818000u;
    std::memcpy(&t0, &u0, 4);
    std::memcpy(&t1, &u1, 4);
    const auto qb = quantized(TensorType::BF16, {t0, t1});
    uint16_t ob[2];
    std::memcpy(ob, qb.data(), 4);
    EXPECT_EQ(ob[0], 0x3F80);
    EXPECT_EQ(ob[1], 0x3F82);
}

TEST(quant_HandBuilt, Q4_0) {
    // d = 0.5; qs[j] = j (low nibble, element j) | (15 - j) << 4 (element j + 16).
    std::vector<uint8_t> b(18);
    put_f16(b, 0, 0.5f);
    for (int j = 0; j < 16; ++j) {
        b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    }
    const auto y = dequantized(TensorType::Q4_0, b, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
        EXPECT_EQ(y[j + 16], (7 - j) * 0.5f) << j;
    }
}

TEST(quant_HandBuilt, Q4_1) {
    // d = 0.5, m = -1: x = q * 0.5 - 1.
    std::vector<uint8_t> b(20);
    put_f16(b, 0, 0.5f);
    put_f16(b, 2, -1.0f);
    for (int j = 0; j < 16; ++j) {
        b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    }
    const auto y = dequantized(TensorType::Q4_1, b, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], j * 0.5f - 1.0f) << j;
        EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 1.0f) << j;
    }
}

TEST(quant_HandBuilt, Q5_0) {
    // d = 0.25; qh = 0xAAAAAAAA: the 5th bit is set for odd elements.
    std::vector<uint8_t> b(22);
    put_f16(b, 0, 0.25f);
    for (int k = 0; k < 4; ++k) {
        b[2 + k] = 0xAA;
    }
    for (int j = 0; j < 16; ++j) {
        b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    }
    const auto y = dequantized(TensorType::Q5_0, b, 32);
    for (int e = 0; e < 32; ++e) {
        const int nib = e < 16 ? e : 15 - (e - 16);
        const int q = nib + ((e & 1) ? 16 : 0) - 16;
        EXPECT_EQ(y[e], q * 0.25f) << e;
    }
}

TEST(quant_HandBuilt, Q5_1) {
    // d = 0.5, m = 2; qh = 0x0000FFFF: the 5th bit set for elements 0..15.
    std::vector<uint8_t> b(24);
    put_f16(b, 0, 0.5f);
    put_f16(b, 2, 2.0f);
    b[4] = 0xFF;
    b[5] = 0xFF;
    for (int j = 0; j < 16; ++j) {
        b[8 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    }
    const auto y = dequantized(TensorType::Q5_1, b, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], (j + 16) * 0.5f + 2.0f) << j;
        EXPECT_EQ(y[j + 16], (15 - j) * 0.5f + 2.0f) << j;
    }
}

TEST(quant_HandBuilt, Q8_0AndQ8_1) {
    std::vector<uint8_t> b(34);
    put_f16(b, 0, 0.5f);
    for (int j = 0; j < 32; ++j) {
        b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
    }
    const auto y = dequantized(TensorType::Q8_0, b, 32);
    for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(y[j], (j - 16) * 0.5f) << j;
    }
    // Q8_0 . Q8_0 of the block with itself: 0.25 * sum (j-16)^2 = 0.25 * 2736.
    EXPECT_EQ(vec_dot(TensorType::Q8_0, 32, b.data(), b.data()), 684.0f);

    std::vector<uint8_t> c(36);
    put_f16(c, 0, 2.0f);
    put_f16(c, 2, 123.0f); // s is not used by dequantisation
    for (int j = 0; j < 32; ++j) {
        c[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(-j));
    }
    const auto z = dequantized(TensorType::Q8_1, c, 32);
    for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(z[j], -2.0f * j) << j;
    }
}

TEST(quant_HandBuilt, Q4_K) {
    // d = 0.5, dmin = 0.25; sub-block j has scale j + 1 + 50*(j>=4) (6 bits) and min 2j + 1;
    // element l of each 64-group: low nibble l % 16 (first sub-block), high nibble 15 - l % 16.
    std::vector<uint8_t> b(144);
    put_f16(b, 0, 0.5f);
    put_f16(b, 2, 0.25f);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = j + 1 + (j >= 4 ? 50 : 0);
        mn[j] = 2 * j + 1 + (j >= 4 ? 40 : 0);
    }
    pack_k4_scales(b.data() + 4, sc, mn);
    for (int l = 0; l < 128; ++l) {
        b[16 + l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
    }
    const auto y = dequantized(TensorType::Q4_K, b, 256);
    for (int e = 0; e < 256; ++e) {
        const int sub = e / 32, l = e % 32;
        const int q = (sub % 2 == 0) ? l % 16 : 15 - l % 16;
        EXPECT_EQ(y[e], 0.5f * sc[sub] * q - 0.25f * mn[sub]) << e;
    }
}

TEST(quant_HandBuilt, Q5_K) {
    std::vector<uint8_t> b(176);
    put_f16(b, 0, 0.5f);
    put_f16(b, 2, 0.25f);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = 63 - j;
        mn[j] = j * 9;
    }
    pack_k4_scales(b.data() + 4, sc, mn);
    // qh[l]: bit s set (5th bit of element l of sub-block s) when (l + s) is odd.
    for (int l = 0; l < 32; ++l) {
        uint8_t h = 0;
        for (int s = 0; s < 8; ++s) {
            h |= static_cast<uint8_t>(((l + s) & 1) << s);
        }
        b[16 + l] = h;
    }
    for (int l = 0; l < 128; ++l) {
        b[48 + l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
    }
    const auto y = dequantized(TensorType::Q5_K, b, 256);
    for (int e = 0; e < 256; ++e) {
        const int sub = e / 32, l = e % 32;
        const int q = ((sub % 2 == 0) ? l % 16 : 15 - l % 16) + (((l + sub) & 1) ? 16 : 0);
        EXPECT_EQ(y[e], 0.5f * sc[sub] * q - 0.25f * mn[sub]) << e;
    }
}

TEST(quant_HandBuilt, Q6_K) {
    // Layout per 128 elements: ql[0..63], qh[0..31]; element 32k + l (k = 0..3, l = 0..31) has
    // low 4 bits in ql[l + 32*(k%2)] (low nibble for k < 2, high for k >= 2) and high 2 bits in
    // qh[l] bits 2k..2k+1. Scale index = element / 16. d = 0.5.
    std::vector<uint8_t> b(210, 0);
    int q6[256];
    for (int e = 0; e < 256; ++e) {
        q6[e] = (e * 7 + 3) % 64;
    }
    for (int half = 0; half < 2; ++half) {
        for (int k = 0; k < 4; ++k) {
            for (int l = 0; l < 32; ++l) {
                const int q = q6[128 * half + 32 * k + l];
                uint8_t& lo = b[64 * half + l + 32 * (k % 2)];
                lo |= static_cast<uint8_t>(k < 2 ? (q & 0xF) : ((q & 0xF) << 4));
                b[128 + 32 * half + l] |= static_cast<uint8_t>((q >> 4) << (2 * k));
            }
        }
    }
    for (int s = 0; s < 16; ++s) {
        b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s * 9 - 70));
    }
    put_f16(b, 208, 0.5f);
    const auto y = dequantized(TensorType::Q6_K, b, 256);
    for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(y[e], 0.5f * ((e / 16) * 9 - 70) * (q6[e] - 32)) << e;
    }
}

TEST(quant_HandBuilt, Q8_K) {
    std::vector<uint8_t> b(292, 0);
    const float d = 0.25f;
    std::memcpy(b.data(), &d, 4);
    for (int j = 0; j < 256; ++j) {
        b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 128 + (j == 0)));
    }
    const auto y = dequantized(TensorType::Q8_K, b, 256);
    for (int j = 0; j < 256; ++j) {
        EXPECT_EQ(y[j], 0.25f * (j - 128 + (j == 0))) << j;
    }
    // Quantising a ramp: max |x| = 127 is element 0 (negative), so d = 1 and the levels are the
    // integers themselves; bsums are sums of 16.
    std::vector<float> x(256);
    for (int j = 0; j < 256; ++j) {
        x[j] = static_cast<float>((j * 37) % 255 - 127);
    }
    x[0] = -127.0f;
    const auto q = quantized(TensorType::Q8_K, x);
    float qd;
    std::memcpy(&qd, q.data(), 4);
    EXPECT_EQ(qd, 1.0f);
    for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(static_cast<int8_t>(q[4 + 16 * g + j]), x[16 * g + j]);
            sum += static_cast<int>(x[16 * g + j]);
        }
        int16_t bs;
        std::memcpy(&bs, q.data() + 260 + 2 * g, 2);
        EXPECT_EQ(bs, sum) << g;
    }
}

TEST(quant_HandBuilt, Q8_0QuantizeRoundsHalfAwayFromZero) {
    // amax = 127 -> d = 1, id = 1: 2.5 -> 3, -2.5 -> -3, 1.5 -> 2, 0.49999997 -> 0 (roundf).
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 1.5f;
    x[4] = 0.49999997f;
    x[5] = -0.5f;
    for (KernelLevel level : runnable_levels()) {
        LevelGuard guard(level);
        const auto q = quantized(TensorType::Q8_0, x);
        EXPECT_EQ(fp16_to_fp32(static_cast<uint16_t>(q[0] | (q[1] << 8))), 1.0f);
        const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 2);
        EXPECT_EQ(qs[0], 127);
        EXPECT_EQ(qs[1], 3) << kernel_level_name(level);
        EXPECT_EQ(qs[2], -3) << kernel_level_name(level);
        EXPECT_EQ(qs[3], 2) << kernel_level_name(level);
        EXPECT_EQ(qs[4], 0) << kernel_level_name(level);
        EXPECT_EQ(qs[5], -1) << kernel_level_name(level);
    }
}

// =============================================================== API behaviour

TEST(quant_Api, LevelsAndErrors) {
    EXPECT_EQ(kernel_level_name(KernelLevel::Scalar), "scalar");
    EXPECT_EQ(kernel_level_name(KernelLevel::Avx512), "avx512");
    EXPECT_EQ(kernel_level(), best_kernel_level());
    {
        LevelGuard guard(KernelLevel::Scalar);
        EXPECT_EQ(kernel_level(), KernelLevel::Scalar);
    }
    EXPECT_EQ(kernel_level(), best_kernel_level());
    if (!level_supported(KernelLevel::Avx512)) {
        EXPECT_THROW(set_kernel_level(KernelLevel::Avx512), std::runtime_error);
        EXPECT_EQ(kernel_level(), best_kernel_level());
    }
    std::vector<float> x(48);
    std::vector<uint8_t> b(1024);
    EXPECT_THROW(quantize_row(TensorType::Q8_0, x.data(), b.data(), 48), std::invalid_argument);
    EXPECT_THROW(dequantize_row(TensorType::Q4_K, b.data(), x.data(), 32), std::invalid_argument);
    EXPECT_THROW(vec_dot(TensorType::Q5_0, 16, b.data(), b.data()), std::invalid_argument);
}

} // namespace
