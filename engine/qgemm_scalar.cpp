// The scalar reference of the integer matrix product: it defines the arithmetic (qgemm.h) that
// every SIMD level reproduces bit for bit.
#include "quant_no_contract.h" // first: every rounding step as written

#include "qgemm_impl.h"

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

} // namespace

Level scalar_level() {
    Level lv;
    lv.nr = kRows;
    lv.kernel = kernel_scalar;
    return lv;
}

} // namespace spanscope::qgemm_detail
