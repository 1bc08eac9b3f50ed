#include "engine/kernels/simd.h"

#include "engine/kernels/quant.h"

#include <cmath>

namespace spanscope {

namespace {
bool use_avx2() {
    const KernelLevel l = kernel_level();
    return l == KernelLevel::Avx2 || l == KernelLevel::AvxVnni || l == KernelLevel::Avx512 ||
           l == KernelLevel::Amx;
}
} // namespace

double exp_shifted_sum(float* x, int64_t n, float shift) {
    if (use_avx2())
        return simd_detail::exp_shifted_sum_avx2(x, n, shift);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::isinf(x[i]) && x[i] < 0 ? 0.0f : std::exp(x[i] - shift);
        sum += x[i];
    }
    return sum;
}

float max_value(const float* x, int64_t n) {
    if (use_avx2())
        return simd_detail::max_value_avx2(x, n);
    float m = x[0];
    for (int64_t i = 1; i < n; ++i)
        m = std::isnan(m) || x[i] > m ? x[i] : m;
    return m;
}

void geglu_tanh_rows(float* g, const float* u, int64_t n) {
    if (use_avx2()) {
        simd_detail::geglu_tanh_avx2(g, u, n);
        return;
    }
    constexpr float k2Sqrt2OverPi = 2.0f * 0.7978845608028654f;
    for (int64_t i = 0; i < n; ++i) {
        const float x = g[i];
        g[i] = x / (1.0f + std::exp(-k2Sqrt2OverPi * (x + 0.044715f * x * x * x))) * u[i];
    }
}

} // namespace spanscope
