// The scalar reference of the integer matrix product: it defines the arithmetic (qgemm.h) that
// every SIMD level reproduces bit for bit.
#include "engine/kernels/quant_no_contract.h" // first: every rounding step as written

#include "engine/kernels/qgemm_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spanscope::qgemm_detail {
namespace {

constexpr int kRows = 4;

void kernel_scalar(const uint8_t* strip, const Shape& s, const QgemmActivations& xq, float* y,
                   int64_t ldy, int nr_valid) {
    const int64_t K = s.cols, nb = K / 32, L = s.block;
    for (int64_t t = 0; t < xq.n; ++t) {
        float acc[kRows] = {};
        const uint8_t* p = strip;
        const int16_t* qx = xq.q.data() + t * K;
        for (int64_t b = 0; b < s.n_blocks(); ++b) {
            float dw[kRows], mw[kRows] = {};
            std::memcpy(dw, p, sizeof dw);
            p += sizeof dw;
            if (s.has_min) {
                std::memcpy(mw, p, sizeof mw);
                p += sizeof mw;
            }
            const auto* qw = reinterpret_cast<const int16_t*>(p);
            const int64_t a = b * L / 32;
            const float dx = xq.d[static_cast<size_t>(t * nb + a)];
            const float ds = xq.ds[static_cast<size_t>(t * nb + a)];
            for (int r = 0; r < kRows; ++r) {
                int32_t isum = 0;
                for (int64_t k = 0; k < L; ++k)
                    isum += qw[(k / 2) * kRows * 2 + r * 2 + k % 2] * qx[b * L + k];
                acc[r] = std::fma(static_cast<float>(isum), dw[r] * dx, acc[r]);
                if (s.has_min)
                    acc[r] = std::fma(mw[r], ds, acc[r]);
            }
            p += 2 * L * kRows;
        }
        for (int r = 0; r < nr_valid; ++r)
            y[t * ldy + r] = acc[r];
    }
}

void quantize_scalar(const float* x, int64_t n_blocks, int16_t* q, float* d, float* ds) {
    for (int64_t a = 0; a < n_blocks; ++a, x += 32, q += 32) {
        float amax = 0.0f;
        bool nan = false;
        for (int j = 0; j < 32; ++j) {
            amax = std::max(amax, std::fabs(x[j]));
            nan = nan || std::isnan(x[j]);
        }
        const float dd = block_scale(amax, nan);
        const float id = inverse_scale(dd);
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) {
            const float v = std::nearbyint(x[j] * id); // the default mode: to nearest, ties to even
            q[j] = static_cast<int16_t>(v >= 32767.0f ? 32767 : v > -32767.0f ? v : -32767);
            sum += q[j];
        }
        d[a] = dd;
        ds[a] = dd * static_cast<float>(sum);
    }
}

} // namespace

Level scalar_level() {
    Level lv;
    lv.nr = kRows;
    lv.kernel = kernel_scalar;
    lv.quantize = quantize_scalar;
    return lv;
}

} // namespace spanscope::qgemm_detail
