// Scalar conversions between fp32 and the two 16-bit float formats of GGUF: IEEE binary16 (f16)
// and bfloat16 (bf16).
//
// Rounding: fp32 -> f16 and fp32 -> bf16 round to nearest, ties to even, like ggml
// (GGML_FP32_TO_FP16, ggml_compute_fp32_to_bf16) and numpy's astype(float16). NaN becomes a quiet
// NaN; f16 overflow (|x| >= 65520) becomes +-inf. f16/bf16 -> fp32 is exact.
//
// The functions are `static inline` on purpose: SIMD translation units compiled with -mavx2 or
// -mavx512f include this header. With external (COMDAT) linkage the linker could pick the copy
// built with AVX-512 instructions for every caller and crash on CPUs without them; internal
// linkage gives each translation unit its own copy.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace spanscope {

static inline float fp32_from_bits(uint32_t w) {
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
}

static inline uint32_t fp32_to_bits(float f) {
    uint32_t w;
    std::memcpy(&w, &f, sizeof w);
    return w;
}

/// IEEE binary16 bits -> fp32 (exact; subnormals, inf and NaN preserved).
static inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    // F. Giesen, "half_to_float" (public domain): shift exponent and mantissa into place, fix
    // the exponent bias, renormalise subnormals with one exact float subtraction.
    const uint32_t shifted_exp = 0x7c00u << 13;
    uint32_t o = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
    const uint32_t exp = shifted_exp & o;
    o += (127u - 15u) << 23;
    if (exp == shifted_exp) {
        o += (128u - 16u) << 23; // inf / NaN
    } else if (exp == 0) {
        o += 1u << 23; // zero / subnormal
        o = fp32_to_bits(fp32_from_bits(o) - fp32_from_bits(113u << 23));
    }
    o |= (static_cast<uint32_t>(h) & 0x8000u) << 16;
    return fp32_from_bits(o);
#endif
}

/// fp32 -> IEEE binary16 bits, round to nearest even.
static inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    // F. Giesen, "float_to_half_fast3_rtne" (public domain).
    uint32_t u = fp32_to_bits(f);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    uint16_t o;
    if (u >= ((127u + 16u) << 23)) {
        o = u > (255u << 23) ? 0x7e00 : 0x7c00; // NaN -> quiet NaN, too large -> inf
    } else if (u < (113u << 23)) {
        // Subnormal or zero: one float addition aligns the 10 mantissa bits at the bottom and
        // rounds to nearest even.
        const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
        const float sum = fp32_from_bits(u) + fp32_from_bits(denorm_magic);
        o = static_cast<uint16_t>(fp32_to_bits(sum) - denorm_magic);
    } else {
        const uint32_t mant_odd = (u >> 13) & 1u;
        u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
        u += mant_odd;
        o = static_cast<uint16_t>(u >> 13);
    }
    return static_cast<uint16_t>(o | (sign >> 16));
#endif
}

/// bfloat16 bits -> fp32 (exact).
static inline float bf16_to_fp32(uint16_t h) {
    return fp32_from_bits(static_cast<uint32_t>(h) << 16);
}

/// fp32 -> bfloat16 bits, round to nearest even; NaN is kept and made quiet (as ggml does).
static inline uint16_t fp32_to_bf16(float f) {
    const uint32_t u = fp32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<uint16_t>((u >> 16) | 64u);
    }
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

} // namespace spanscope
