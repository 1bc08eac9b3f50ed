// Internal to the integer matrix product (qgemm.cpp and its per-level kernel files): the packed
// weight strip, the shape of a product, and the per-level kernel table. Use qgemm.h.
//
// A strip holds `nr` consecutive weight rows, block by block (blocks of L = 16 or 32 elements
// along the columns). Per block, in this order:
//     float dw[nr]                  scale of the block in each row
//     float mw[nr]                  minimum of the block (types with minimums only)
//     quants [L / g][nr][g]         g consecutive columns of a row per 32-bit lane: g = 2 int16
//                                   (vpmaddwd / vpdpwssd, one lane per row) or g = 4 int8 (the
//                                   AMX level: the B tile's layout, one 32-bit column per row)
// Rows past the matrix's end are zero (scale 0, quants 0), so a strip is always whole.
#pragma once

#include "engine/kernels/qgemm.h"

#include <cstddef>
#include <cstdint>
#include <limits>

namespace spanscope::qgemm_detail {

struct Shape {
    int64_t cols = 0;       ///< K, elements per row
    int block = 32;         ///< L, weight block length (16 or 32)
    bool has_min = false;   ///< the type has a minimum per block of 32
    int nr = 0;             ///< rows per strip
    int group = 2;          ///< quants per 32-bit lane: 2 (int16) or 4 (int8)
    size_t block_bytes = 0; ///< bytes of one packed block of a strip
    int64_t n_blocks() const { return cols / block; }
};

/// y[t * ldy + r] for t in [0, xq.n), r < nr_valid, from one packed strip.
using KernelFn = void (*)(const uint8_t* strip, const Shape& s, const QgemmActivations& xq,
                          float* y, int64_t ldy, int nr_valid);

/// Quantises n_blocks blocks of 32 activations as qgemm.h defines it: for each block,
/// d = block_scale(max|x|, the block holds a NaN), q = x · (1 / d) rounded to nearest, ties to
/// even, clamped to ±32767 (0 where d is 0 or NaN), ds = d · Σ q. Every level gives the same bytes.
using QuantizeFn = void (*)(const float* x, int64_t n_blocks, int16_t* q, float* d, float* ds);

/// The scale of a block of activations from its largest magnitude: amax / 32767; 0 (the block
/// counts as zero) below 32767 · FLT_MIN, where 1 / d would overflow; NaN when the block holds a
/// NaN or an infinity, so that every product it enters is NaN, as a float product would be.
static inline float block_scale(float amax, bool nan) {
    if (nan || !(amax <= std::numeric_limits<float>::max()))
        return std::numeric_limits<float>::quiet_NaN();
    if (amax < 32767.0f * std::numeric_limits<float>::min())
        return 0.0f;
    return amax / 32767.0f;
}

/// 1 / d for a finite d > 0, else 0.
static inline float inverse_scale(float d) {
    return d > 0.0f && d <= std::numeric_limits<float>::max() ? 1.0f / d : 0.0f;
}

/// Packs rows [row0, row0 + nr_valid) of a Q8_0, Q5_0 or Q4_0 matrix as one strip into `strip`
/// (s.block_bytes · s.n_blocks() bytes; rows past nr_valid zero): the bytes of qgemm.cpp's
/// pack_strip_sym.
using PackSymFn = void (*)(const WeightMatrix& w, int64_t row0, int nr_valid, const Shape& s,
                           uint8_t* strip);

struct Level {
    int nr = 0;               ///< rows per strip
    int group = 2;            ///< Shape::group of its strips
    bool needs_split = false; ///< reads QgemmActivations::hi and lo
    KernelFn kernel = nullptr;
    QuantizeFn quantize = nullptr;
    PackSymFn pack_sym =
        nullptr; ///< a SIMD packer of the symmetric types, or null (pack_strip_sym)
};

Level scalar_level();
Level avx2_level();
Level avxvnni_level();
Level avx512_level();
/// The AMX level (qgemm_amx.cpp).
Level amx_level();

} // namespace spanscope::qgemm_detail
