// AVX2/FMA element-wise kernels (compiled with -mavx2 -mfma; called only when the CPU has
// them). The exponential follows Cephes expf (Moshier 1989): x = n·ln2 + r, |r| <= ln2/2,
// e^r by a degree-6 polynomial, 2^n through the exponent bits.
#include "engine/kernels/simd.h"

#include <immintrin.h>

#include <cmath>

namespace spanscope::simd_detail {
namespace {

inline __m256 exp256(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f);
    const __m256 lo = _mm256_set1_ps(-87.3365447505531f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ); // includes -inf: result 0
    x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    __m256 fx = _mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f));
    fx = _mm256_round_ps(fx, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x); // ln2 high part
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);     // ln2 low part
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), r);
    y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127));
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
    return _mm256_andnot_ps(under, y);
}

} // namespace

float max_value_avx2(const float* x, int64_t n) {
    // maxps keeps its second operand where either is NaN: the running maximum goes second, so a
    // NaN element is skipped unless the maximum is still NaN.
    __m256 m = _mm256_set1_ps(x[0]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    alignas(32) float t[8];
    _mm256_store_ps(t, m);
    float r = t[0];
    for (int k = 1; k < 8; ++k)
        r = std::isnan(r) || t[k] > r ? t[k] : r;
    for (; i < n; ++i)
        r = std::isnan(r) || x[i] > r ? x[i] : r;
    return r;
}

double exp_shifted_sum_avx2(float* x, int64_t n, float shift) {
    const __m256 s = _mm256_set1_ps(shift);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    double sum = 0.0;
    for (float l : lanes)
        sum += l;
    for (; i < n; ++i) {
        x[i] = std::isinf(x[i]) && x[i] < 0 ? 0.0f : std::exp(x[i] - shift);
        sum += x[i];
    }
    return sum;
}

void geglu_tanh_avx2(float* g, const float* u, int64_t n) {
    const __m256 c = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
    const __m256 k = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
        const __m256 z = _mm256_mul_ps(c, _mm256_fmadd_ps(k, x3, x));
        const __m256 gelu = _mm256_div_ps(x, _mm256_add_ps(one, exp256(z)));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; ++i) {
        const float x = g[i];
        g[i] =
            x / (1.0f + std::exp(-2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x))) * u[i];
    }
}

} // namespace spanscope::simd_detail
