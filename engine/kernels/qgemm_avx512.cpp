// AVX512-VNNI kernel of the integer matrix product (compiled with -mavx512f/bw/vl/dq/vnni, see
// engine/CMakeLists.txt; run only when quant.cpp found the CPU and OS support it).
//
// One strip is 16 weight rows: one zmm lane per row. For each pair of columns the strip holds
// 16 × 2 int16 quants, and vpdpwssd adds the 2 products of each row with the token's 2
// activations (broadcast) to that row's lane, so after a block the lane holds the exact
// Σ q_w · q_x of its row. Up to 8 tokens share each load of the weights.
#include "engine/kernels/quant_no_contract.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/qgemm_impl.h"
#include "engine/kernels/quant_impl.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

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
constexpr int kTokens = 8;

template <int NT, int L, bool MIN>
void tile(const uint8_t* strip, int64_t n_blocks, const QgemmActivations& xq, int64_t t0, float* y,
          int64_t ldy, __mmask16 mask) {
    const int64_t K = xq.cols, nb = K / 32;
    __m512 acc[NT];
    for (int i = 0; i < NT; ++i)
        acc[i] = _mm512_setzero_ps();
    const uint8_t* p = strip;
    const int16_t* x = xq.q.data() + t0 * K;
    const float* d = xq.d.data() + t0 * nb;
    const float* ds = xq.ds.data() + t0 * nb;
    for (int64_t b = 0; b < n_blocks; ++b) {
        const __m512 dw = _mm512_loadu_ps(reinterpret_cast<const float*>(p));
        p += 64;
        __m512 mw = _mm512_setzero_ps();
        if constexpr (MIN) {
            mw = _mm512_loadu_ps(reinterpret_cast<const float*>(p));
            p += 64;
        }
        __m512i is[NT];
        for (int i = 0; i < NT; ++i)
            is[i] = _mm512_setzero_si512();
        const int64_t k = b * L;
        for (int g = 0; g < L / 2; ++g) {
            const __m512i wq = _mm512_loadu_si512(p + 64 * g);
            for (int i = 0; i < NT; ++i) {
                int32_t v;
                std::memcpy(&v, x + i * K + k + 2 * g, 4);
                is[i] = _mm512_dpwssd_epi32(is[i], _mm512_set1_epi32(v), wq);
            }
        }
        p += 32 * L;
        const int64_t a = k / 32;
        for (int i = 0; i < NT; ++i) {
            const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(d[i * nb + a]));
            acc[i] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, is[i]), sc, acc[i]);
            if constexpr (MIN)
                acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(ds[i * nb + a]), acc[i]);
        }
    }
    for (int i = 0; i < NT; ++i)
        _mm512_mask_storeu_ps(y + (t0 + i) * ldy, mask, acc[i]);
}

template <int L, bool MIN>
void run(const uint8_t* strip, const Shape& s, const QgemmActivations& xq, float* y, int64_t ldy,
         __mmask16 mask) {
    const int64_t nbk = s.n_blocks();
    int64_t t = 0;
    for (; t + kTokens <= xq.n; t += kTokens)
        tile<kTokens, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
    switch (xq.n - t) {
    case 7:
        tile<7, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 6:
        tile<6, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 5:
        tile<5, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 4:
        tile<4, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 3:
        tile<3, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 2:
        tile<2, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    case 1:
        tile<1, L, MIN>(strip, nbk, xq, t, y, ldy, mask);
        break;
    default:
        break;
    }
}

void kernel_avx512(const uint8_t* strip, const Shape& s, const QgemmActivations& xq, float* y,
                   int64_t ldy, int nr_valid) {
    const auto mask = static_cast<__mmask16>((1u << nr_valid) - 1u);
    if (s.block == 16)
        run<16, false>(strip, s, xq, y, ldy, mask);
    else if (s.has_min)
        run<32, true>(strip, s, xq, y, ldy, mask);
    else
        run<32, false>(strip, s, xq, y, ldy, mask);
}

void quantize_avx512(const float* x, int64_t n_blocks, int16_t* q, float* d, float* ds) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512i hi = _mm512_set1_epi32(32767), lo = _mm512_set1_epi32(-32767);
    for (int64_t a = 0; a < n_blocks; ++a, x += 32, q += 32) {
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1));
        alignas(64) float t[16];
        _mm512_store_ps(t, m);
        float amax = 0.0f;
        for (float v : t)
            amax = std::max(amax, v);
        const bool nan = (_mm512_cmp_ps_mask(x0, x0, _CMP_UNORD_Q) |
                          _mm512_cmp_ps_mask(x1, x1, _CMP_UNORD_Q)) != 0;
        const float dd = block_scale(amax, nan);
        const __m512 id = _mm512_set1_ps(inverse_scale(dd));
        // cvtps rounds in the default mode (to nearest, ties to even), as nearbyint does.
        const __m512i q0 =
            _mm512_max_epi32(lo, _mm512_min_epi32(hi, _mm512_cvtps_epi32(_mm512_mul_ps(x0, id))));
        const __m512i q1 =
            _mm512_max_epi32(lo, _mm512_min_epi32(hi, _mm512_cvtps_epi32(_mm512_mul_ps(x1, id))));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm512_cvtepi32_epi16(q0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 16), _mm512_cvtepi32_epi16(q1));
        alignas(64) int32_t s[16];
        _mm512_store_si512(s, _mm512_add_epi32(q0, q1));
        int32_t sum = 0;
        for (int32_t v : s)
            sum += v;
        d[a] = dd;
        ds[a] = dd * static_cast<float>(sum);
    }
}

} // namespace

Level avx512_level() {
    Level lv;
    lv.nr = kRows;
    lv.kernel = kernel_avx512;
    lv.pack_sym = pack_sym_x86<2>;
    lv.quantize = quantize_avx512;
    return lv;
}

} // namespace spanscope::qgemm_detail
