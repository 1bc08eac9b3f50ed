// AMX kernel of the integer matrix product (compiled with -mamx-tile -mamx-int8 and AVX-512, see
// engine/CMakeLists.txt; run only when quant.cpp found the tiles usable and the kernel granted
// the process their state).
//
// Per block of L columns, a tile product gives 16 tokens × 16 weight rows at once. The int16
// activations are split into bytes, q = 256 · hi + lo (hi signed, lo unsigned), so that
// tdpbssd (s8 × s8) and tdpbusd (u8 × s8) give Σ w · hi and Σ w · lo exactly; their combination
// 256 · Σ w · hi + Σ w · lo is the block sum Σ w · q of the scalar reference, and the float steps
// that follow are the reference's, so the results are bit for bit those of every other level.
//
// Tiles: 0, 1 the block sums of hi and lo (16 tokens × 16 rows of int32) of even blocks, 5, 6
// those of odd blocks, 2, 3 the activations' hi and lo bytes (16 tokens × L), 4 and 7 the
// weights of even and odd blocks (L / 4 rows of 16 × 4 bytes: the strip's int8 layout). The
// tile products of block b + 1 are issued before the vector work that scales block b, so the
// two overlap. Loaded with the configuration at each call, released at its end.
#include "engine/kernels/quant_no_contract.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/qgemm_impl.h"
#include "engine/kernels/quant_impl.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace spanscope::qgemm_detail {
namespace {

// The symmetric types' strip packer (qgemm_pack_x86.inc) and the weight decoders it uses.
using quant_detail::BlockQ4_0;
using quant_detail::BlockQ5_0;
using quant_detail::BlockQ8_0;
#include "engine/kernels/quant_x86_bytes.inc"
// after the decoders it uses
#include "engine/kernels/qgemm_pack_x86.inc"

constexpr int kRows = 16;
static_assert(kRows == kPackLanes);
constexpr int kTokens = 16;

struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

TileConfig config_for(int L) {
    TileConfig c;
    for (int t : {0, 1, 5, 6}) {
        c.colsb[t] = 64;
        c.rows[t] = kTokens;
    }
    for (int t : {2, 3}) {
        c.colsb[t] = static_cast<uint16_t>(L);
        c.rows[t] = kTokens;
    }
    for (int t : {4, 7}) {
        c.colsb[t] = 64;
        c.rows[t] = static_cast<uint8_t>(L / 4);
    }
    return c;
}

// GCC's tile intrinsics paste the tile number into inline assembly, so the tile numbers must be
// literals: macros rather than templates.
/// Block sums of one block into tiles CH, CL: hi · w and lo · w, w in tile TB.
#define QGEMM_AMX_ISSUE(CH, CL, TB, ah, al, stride, w)                                             \
    do {                                                                                           \
        _tile_zero(CH);                                                                            \
        _tile_zero(CL);                                                                            \
        _tile_loadd(2, (ah), (stride));                                                            \
        _tile_loadd(3, (al), (stride));                                                            \
        _tile_loadd(TB, (w), 64);                                                                  \
        _tile_dpbssd(CH, 2, TB);                                                                   \
        _tile_dpbusd(CL, 3, TB);                                                                   \
    } while (0)
#define QGEMM_AMX_DRAIN(CH, CL, chi, clo)                                                          \
    do {                                                                                           \
        _tile_stored(CH, (chi), 64);                                                               \
        _tile_stored(CL, (clo), 64);                                                               \
    } while (0)

template <int L, bool MIN>
void run(const uint8_t* strip, const Shape& s, const QgemmActivations& xq, float* y, int64_t ldy,
         int nr_valid) {
    const int64_t K = xq.cols, nb = K / 32, n_blocks = s.n_blocks();
    const TileConfig cfg = config_for(L);
    _tile_loadconfig(&cfg);
    const auto mask = static_cast<__mmask16>((1u << nr_valid) - 1u);
    alignas(64) int32_t chi[kTokens * 16], clo[kTokens * 16];
    for (int64_t t0 = 0; t0 < xq.n; t0 += kTokens) {
        const int m = static_cast<int>(std::min<int64_t>(kTokens, xq.n - t0));
        // The activations' tile of 16 tokens (zero rows past the last token), 32 columns a block.
        const int8_t* ah = xq.hi.data() + t0 * K;
        const uint8_t* al = xq.lo.data() + t0 * K;
        float dx[kTokens] = {}, dsx[kTokens] = {};
        __m512 acc[kTokens];
        for (int i = 0; i < kTokens; ++i)
            acc[i] = _mm512_setzero_ps();
        const size_t scales = MIN ? 128 : 64; // dw, then mw, before the quants of a block
        auto block = [&](int64_t b) { return strip + static_cast<size_t>(b) * s.block_bytes; };
        // Block b's columns: 32-column block b·L/32 of the tile (16 × 32 bytes), at (b·L) % 32.
        auto at = [](int64_t b) { return (b * L / 32) * 512 + (b * L) % 32; };
        QGEMM_AMX_ISSUE(0, 1, 4, ah, al, 32, block(0) + scales);
        for (int64_t b = 0; b < n_blocks; ++b) {
            const bool more = b + 1 < n_blocks;
            if (b % 2 == 0) {
                if (more)
                    QGEMM_AMX_ISSUE(5, 6, 7, ah + at(b + 1), al + at(b + 1), 32,
                                    block(b + 1) + scales);
                QGEMM_AMX_DRAIN(0, 1, chi, clo);
            } else {
                if (more)
                    QGEMM_AMX_ISSUE(0, 1, 4, ah + at(b + 1), al + at(b + 1), 32,
                                    block(b + 1) + scales);
                QGEMM_AMX_DRAIN(5, 6, chi, clo);
            }
            const uint8_t* p = block(b);
            const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(p));
            __m512 mw = _mm512_setzero_ps();
            if constexpr (MIN)
                mw = _mm512_loadu_ps(reinterpret_cast<const float*>(p + 64));
            const int64_t a = b * L / 32;
            for (int i = 0; i < m; ++i) {
                dx[i] = xq.d[static_cast<size_t>((t0 + i) * nb + a)];
                if constexpr (MIN)
                    dsx[i] = xq.ds[static_cast<size_t>((t0 + i) * nb + a)];
            }
            for (int i = 0; i < kTokens; ++i) {
                const __m512i v =
                    _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(chi + 16 * i), 8),
                                     _mm512_load_si512(clo + 16 * i));
                const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(dx[i]));
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), sc, acc[i]);
                if constexpr (MIN)
                    acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(dsx[i]), acc[i]);
            }
        }
        for (int i = 0; i < m; ++i)
            _mm512_mask_storeu_ps(y + (t0 + i) * ldy, mask, acc[i]);
    }
    _tile_release();
}

void kernel_amx(const uint8_t* strip, const Shape& s, const QgemmActivations& xq, float* y,
                int64_t ldy, int nr_valid) {
    if (s.block == 16)
        run<16, false>(strip, s, xq, y, ldy, nr_valid);
    else if (s.has_min)
        run<32, true>(strip, s, xq, y, ldy, nr_valid);
    else
        run<32, false>(strip, s, xq, y, ldy, nr_valid);
}

} // namespace

Level amx_level() {
    Level lv = avx512_level(); // its activation quantiser
    lv.nr = kRows;
    lv.group = 4;
    lv.needs_split = true;
    lv.kernel = kernel_amx;
    lv.pack_sym = pack_sym_x86<4>;
    return lv;
}

} // namespace spanscope::qgemm_detail
