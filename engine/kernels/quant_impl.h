// Internal to the quantisation kernels (quant.cpp, quant_scalar*.cpp, quant_avx2.cpp,
// quant_avx512.cpp): ggml's block structures and the per-level tables of kernel functions.
// Not part of the engine's public interface; use quant.h.
//
// Functions defined here are `static inline` (internal linkage): this header is compiled with
// different -m flags in different files, and a shared COMDAT copy built with AVX-512 could be
// picked by the linker for scalar callers (see fp16.h).
#pragma once

#include "engine/kernels/tensor_type.h"

#include <cstddef>
#include <cstdint>

namespace spanscope::quant_detail {

// ---- Block layouts, byte-identical with ggml-common.h. f16 values are stored as raw bits.

inline constexpr int kQK = 32; ///< elements per block of the 32-element formats

struct BlockQ4_0 {
    uint16_t d;          // scale (f16)
    uint8_t qs[kQK / 2]; // element j in the low nibble of qs[j], element j+16 in the high one
};
struct BlockQ4_1 {
    uint16_t d, m; // scale and minimum (f16): x = q*d + m
    uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4]; // bit j = 5th bit of element j
    uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
    uint16_t d;
    int8_t qs[kQK];
};
struct BlockQ8_1 {
    uint16_t d; // scale
    uint16_t s; // d * sum(qs)
    int8_t qs[kQK];
};
struct BlockQ4_K {
    uint16_t d;            // super-block scale of the 6-bit sub-block scales
    uint16_t dmin;         // super-block scale of the 6-bit sub-block mins
    uint8_t scales[12];    // 8 scales and 8 mins, 6 bits each (get_scale_min_k4)
    uint8_t qs[kQK_K / 2]; // per 64 elements: 32 bytes, low nibbles first 32, high nibbles next 32
};
struct BlockQ5_K {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[kQK_K / 8]; // qh[l] bit 2j / 2j+1: 5th bit of element l of sub-block 2j / 2j+1
    uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];     // low 4 bits
    uint8_t qh[kQK_K / 4];     // high 2 bits
    int8_t scales[kQK_K / 16]; // 8-bit scale per 16 elements
    uint16_t d;
};
struct BlockQ8_K {
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16]; // sum of each group of 16 qs
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

/// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block
/// (ggml-quants.c, get_scale_min_k4).
static inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

// ---- Kernel tables

/// dst[n] <- src (n elements, n % block_size == 0, checked by the caller).
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
/// dst (row_bytes(t, n)) <- src[n].
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);
/// Dot product of n elements of a weight row with an activation row of the vec_dot type.
using VecDotFn = float (*)(int64_t n, const void* w, const void* xq);

/// out[r] = the dot product of row r (at w + r * row_stride) with xq, for r < n_rows: the decode
/// loop over a whole matrix, where a level has one (else vec_dot is called per row). Its
/// summation order may differ from vec_dot's, but a row's result must not depend on n_rows nor
/// on the row's place among them.
using VecDotRowsFn = void (*)(int64_t n, int64_t n_rows, const void* w, size_t row_stride,
                              const void* xq, float* out);

struct TypeKernels {
    DequantizeFn dequantize = nullptr;
    QuantizeFn quantize = nullptr;
    VecDotFn vec_dot = nullptr;
    VecDotRowsFn vec_dot_rows = nullptr;
};

/// Slots indexed by the on-disk type id (TensorType values are < 31).
inline constexpr size_t kTypeSlots = 31;

struct KernelTable {
    TypeKernels by_type[kTypeSlots];
};

static inline constexpr size_t slot(TensorType t) {
    return static_cast<uint32_t>(t);
}

/// Fills every type with the scalar reference kernels.
void fill_scalar_kernels(KernelTable& table);
/// The scalar reference kernels of one family each (called by fill_scalar_kernels):
/// F32/F16/BF16 (quant_scalar_float.cpp), the 32-element blocks Q4_0..Q8_1
/// (quant_scalar_q32.cpp), the K-quants Q4_K..Q8_K (quant_scalar_kquant.cpp).
void fill_scalar_float_kernels(KernelTable& table);
void fill_scalar_q32_kernels(KernelTable& table);
void fill_scalar_kquant_kernels(KernelTable& table);
/// Overwrites the entries that have an AVX2/FMA/F16C implementation (call after the scalar fill).
void fill_avx2_kernels(KernelTable& table);
/// Overwrites the entries that have an AVX-512 implementation (call after the AVX2 fill).
void fill_avx512_kernels(KernelTable& table);

} // namespace spanscope::quant_detail
