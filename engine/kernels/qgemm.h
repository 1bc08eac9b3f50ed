// Integer matrix × matrix products of activations with quantised weights (prefill), our own
// kernels at every level the CPU has (scalar, AVX2, AVX-VNNI, AVX512-VNNI, AMX: quant.h's
// KernelLevel), independent of any library's CPU detection.
//
// The arithmetic is defined once, by the scalar reference, and every level reproduces it bit for
// bit: activations are quantised per block of 32 to int16 with a float scale (a step of 1/32767
// of the block's largest magnitude: close enough to float that paths which agree in float still
// agree, where int8 activations would turn float noise into whole quantisation steps); weight
// rows are unpacked to int8 values with a float scale per block of L elements (16 for Q6_K, 32
// otherwise) and, for the types with minimums, a float minimum per block of 32; then for each
// output y[t][r] = the result of, over the weight blocks b in order:
//     acc = fma(float(Σ_block q_w·q_x), dw[r][b] · dx[t][b·L/32], acc)
//     acc = fma(mw[r][b], dx[t][b] · float(Σ_block q_x), acc)          (types with minimums)
// The block sums are exact integers (|Σ| < 32 · 128 · 32767 < 2^31, any order gives the same
// int32), the float steps are the same sequence at every level, so results do not depend on the
// level, on how many tokens are in the batch, nor on the number of threads. qgemm_impl.h
// describes the packed weight strips.
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace spanscope {

/// Whether the integer path handles weights of type t (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
/// Q5_K, Q6_K).
bool qgemm_supports(TensorType t);

/// Activations quantised for qgemm: per token t < n and block a < cols / 32,
/// q[t][32a..32a+31] = x · (1 / d) rounded to nearest (ties to even), d = max|x| / 32767 over the
/// block (q = 0 for an all-zero block),
/// d[t][a] = d, ds[t][a] = d · Σ q (used by the weight types with minimums).
struct QgemmActivations {
    int64_t n = 0;          ///< tokens
    int64_t cols = 0;       ///< elements per token (a multiple of 32)
    std::vector<int16_t> q; ///< [n][cols]
    std::vector<float> d;   ///< [n][cols / 32]
    std::vector<float> ds;  ///< [n][cols / 32]
    /// The AMX level's split of q into bytes, q = 256 · hi + lo, in tiles (else empty): for
    /// tokens 16T..16T+15 and columns 32a..32a+31, 16 rows of 32 bytes at (T · cols / 32 + a) ·
    /// 512; rows past the last token are zero. [ceil(n / 16) · 16 · cols] each.
    std::vector<int8_t> hi;
    std::vector<uint8_t> lo;
};

/// Quantises x: [n][cols] floats (cols % 32 == 0), the tokens spread over `pool` if given.
/// The same bytes at every level and thread count.
/// A block holding a NaN or an infinity gets d = NaN, so the outputs it enters are NaN (as in
/// float); a block whose largest magnitude is below 32767 · FLT_MIN counts as zero.
/// Throws std::invalid_argument if cols is not a multiple of 32 or n < 0.
void qgemm_quantize(const float* x, int64_t n, int64_t cols, QgemmActivations& out,
                    ThreadPool* pool = nullptr);

/// y[t * ldy + (r - row_begin)] = Σ_c W[r][c] · x[t][c] with the arithmetic above, for t < xq.n,
/// row_begin <= r < row_end. w.cols must equal xq.cols.
/// Throws std::invalid_argument for an unsupported type, a column mismatch, a bad row range, or
/// activations not quantised by qgemm_quantize at the current kernel level.
void qgemm(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const QgemmActivations& xq,
           float* y, int64_t ldy, ThreadPool& pool);

/// The same product handed over in tiles instead of written out: rows [row_begin, row_end) are
/// cut into consecutive tiles of tile_rows rows (the last may be shorter; tile_rows is rounded up
/// to the level's strip height), and for each, fn(tile_index, first_row, rows, logits, thread)
/// is called once with logits: [xq.n][rows] (row-major; the thread's scratch, fn may overwrite
/// it, valid during the call only). Tiles are spread over the pool's threads; fn must be safe to
/// call concurrently for different tiles. An exception from fn is rethrown by qgemm_tiles.
using QgemmTileFn =
    std::function<void(int64_t tile, int64_t first_row, int64_t rows, float* logits, int)>;
void qgemm_tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                 const QgemmActivations& xq, int64_t tile_rows, const QgemmTileFn& fn,
                 ThreadPool& pool);

/// Rows per strip of the current level (tiles are multiples of it).
int qgemm_strip_rows();

} // namespace spanscope
