// Scalar reference kernels of the K-quants Q4_K, Q5_K, Q6_K and Q8_K, with ggml's reference
// quantisers (make_qx_quants, make_qkx2_quants, quantize_row_*_K_ref): dequantisation and dot
// products follow ggml's generic C code (ggml-quants.c, ggml-cpu/quants.c).

#include "engine/kernels/quant_no_contract.h" // first: no automatic FMA below

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spanscope::quant_detail {
namespace {

// ggml-quants.c: GROUP_MAX_EPS
constexpr float kGroupMaxEps = 1e-15f;

/// Round to nearest, ties to even, for |fval| <= 4194303 (ggml-quants.c, nearest_int).
int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int i;
    std::memcpy(&i, &val, sizeof(int));
    return (i & 0x007fffff) - 0x00400000;
}

/// Symmetric quantisation of n values to [-nmax, nmax-1] with a least-squares search over 19
/// candidate scales (ggml-quants.c, make_qx_quants; rmse_type 1, no importance weights).
/// L receives the levels + nmax. Returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        std::fill(L, L + n, int8_t{0});
        return 0.f;
    }
    float iscale = static_cast<float>(-nmax) / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) {
            continue;
        }
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/// Asymmetric quantisation x ~ scale*L - min, L in [0, nmax], searching nstep+1 candidate scales
/// with weighted least squares for scale and min (ggml-quants.c, make_qkx2_quants). Returns the
/// scale; *the_min receives the (non-negative) min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) {
            min = x[i];
        }
        if (x[i] > max) {
            max = x[i];
        }
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) {
        min = 0;
    }
    if (max == min) {
        std::fill(L, L + n, uint8_t{0});
        *the_min = -min;
        return 0.f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * static_cast<float>(L[i]) + min - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            const auto fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, static_cast<size_t>(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-element sub-block scale and min by
/// make_qkx2_quants, 6-bit sub-block scales/mins packed as in get_scale_min_k4, then the final
/// levels recomputed from the rounded scales (quantize_row_q4_K_ref / quantize_row_q5_K_ref).
void quantize_k_scales_mins(const float* x, int nmax, float rmin, float rdelta, int nstep,
                            uint16_t* d_out, uint16_t* dmin_out, uint8_t* packed, uint8_t* L) {
    uint8_t Laux[32];
    float weights[32];
    float mins[kQK_K / 32];
    float scales[kQK_K / 32];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) {
            sum_x2 += x[32 * j + l] * x[32 * j + l];
        }
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) {
            weights[l] = av_x + std::fabs(x[32 * j + l]);
        }
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, rdelta, nstep);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < kQK_K / 32; ++j) {
        auto ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
        auto lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
        ls = std::min<uint8_t>(63, ls);
        lm = std::min<uint8_t>(63, lm);
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
            packed[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
        }
    }
    *d_out = fp32_to_fp16(max_scale / 63.f);
    *dmin_out = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < kQK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed, &sc, &m);
        const float d = fp16_to_fp32(*d_out) * static_cast<float>(sc);
        if (d == 0.0f) {
            continue;
        }
        const float dm = fp16_to_fp32(*dmin_out) * static_cast<float>(m);
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

void quantize_q4_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_K*>(dst);
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::memset(&y[i], 0, sizeof(BlockQ4_K));
        quantize_k_scales_mins(x, 15, -1.f, 0.1f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < kQK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) {
                q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            }
        }
    }
}

void dequantize_q4_K(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ4_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* q = x[i].qs;
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < kQK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = min * static_cast<float>(m);
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = min * static_cast<float>(m);
            for (int l = 0; l < 32; ++l) {
                *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
            }
            q += 32;
            is += 2;
        }
    }
}

/// Sum over the 8 sub-blocks of min_j * (sum of the 32 activations of sub-block j).
int k_mins_dot_bsums(const uint8_t* packed, const int16_t* bsums) {
    int sum = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, packed, &sc, &m);
        sum += m * (bsums[2 * j] + bsums[2 * j + 1]);
    }
    return sum;
}

float vec_dot_q4_K(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* q4 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int sumi = 0;
        for (int j = 0; j < kQK_K / 64; ++j, q4 += 32, q8 += 64) {
            uint8_t sc_lo, sc_hi, m;
            get_scale_min_k4(2 * j, x[i].scales, &sc_lo, &m);
            get_scale_min_k4(2 * j + 1, x[i].scales, &sc_hi, &m);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; ++l) {
                lo += (q4[l] & 0xF) * q8[l];
                hi += (q4[l] >> 4) * q8[l + 32];
            }
            sumi += sc_lo * lo + sc_hi * hi;
        }
        const int summ = k_mins_dot_bsums(x[i].scales, y[i].bsums);
        sumf += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(sumi) -
                fp16_to_fp32(x[i].dmin) * y[i].d * static_cast<float>(summ);
    }
    return sumf;
}

void quantize_q5_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_K*>(dst);
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::memset(&y[i], 0, sizeof(BlockQ5_K));
        quantize_k_scales_mins(x, 31, -0.5f, 0.1f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t* qh = y[i].qh;
        uint8_t* ql = y[i].qs;
        uint8_t m1 = 1, m2 = 2;
        for (int nn = 0; nn < kQK_K; nn += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[nn + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[nn + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<uint8_t>(m1 << 2);
            m2 = static_cast<uint8_t>(m2 << 2);
            ql += 32;
        }
    }
}

void dequantize_q5_K(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ5_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* ql = x[i].qs;
        const uint8_t* qh = x[i].qh;
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < kQK_K; j += 64) {
            get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * static_cast<float>(sc);
            const float m1 = min * static_cast<float>(m);
            get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * static_cast<float>(sc);
            const float m2 = min * static_cast<float>(m);
            for (int l = 0; l < 32; ++l) {
                *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            }
            ql += 32;
            is += 2;
            u1 <<= 2;
            u2 <<= 2;
        }
    }
}

float vec_dot_q5_K(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* ql = x[i].qs;
        const uint8_t* qh = x[i].qh;
        const int8_t* q8 = y[i].qs;
        int sumi = 0;
        for (int j = 0; j < kQK_K / 64; ++j, ql += 32, q8 += 64) {
            uint8_t sc_lo, sc_hi, m;
            get_scale_min_k4(2 * j, x[i].scales, &sc_lo, &m);
            get_scale_min_k4(2 * j + 1, x[i].scales, &sc_hi, &m);
            const unsigned u1 = 1u << (2 * j), u2 = 2u << (2 * j);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; ++l) {
                lo += ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) * q8[l];
                hi += ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) * q8[l + 32];
            }
            sumi += sc_lo * lo + sc_hi * hi;
        }
        const int summ = k_mins_dot_bsums(x[i].scales, y[i].bsums);
        sumf += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(sumi) -
                fp16_to_fp32(x[i].dmin) * y[i].d * static_cast<float>(summ);
    }
    return sumf;
}

void quantize_q6_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ6_K*>(dst);
    int8_t L[kQK_K];
    float scales[kQK_K / 16];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < kQK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        std::memset(&y[i], 0, sizeof(BlockQ6_K));
        if (max_abs_scale < kGroupMaxEps) {
            y[i].d = fp32_to_fp16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < kQK_K / 16; ++ib) {
            y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j]);
            if (d == 0.0f) {
                continue;
            }
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-32, std::min(31, l));
                L[16 * j + ii] = static_cast<int8_t>(l + 32);
            }
        }
        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] =
                    static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                         ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void dequantize_q6_K(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        for (int nn = 0; nn < kQK_K; nn += 128, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
                y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

float vec_dot_q6_K(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* q8 = y[i].qs;
        const int8_t* sc = x[i].scales;
        int sumi = 0;
        for (int nn = 0; nn < kQK_K; nn += 128, ql += 64, qh += 32, q8 += 128, sc += 8) {
            int part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                part[is + 0] += q1 * q8[l + 0];
                part[is + 2] += q2 * q8[l + 32];
                part[is + 4] += q3 * q8[l + 64];
                part[is + 6] += q4 * q8[l + 96];
            }
            for (int k = 0; k < 8; ++k) {
                sumi += sc[k] * part[k];
            }
        }
        sumf += fp16_to_fp32(x[i].d) * y[i].d * static_cast<float>(sumi);
    }
    return sumf;
}

void quantize_q8_K(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float max = 0;
        float amax = 0;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        // ggml uses -127/max (not -128/max) so that no level is -128.
        const float iscale = -127.f / max;
        for (int j = 0; j < kQK_K; ++j) {
            const int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = static_cast<int8_t>(std::min(127, v));
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) {
                sum += y[i].qs[j * 16 + ii];
            }
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1 / iscale;
    }
}

void dequantize_q8_K(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
        for (int j = 0; j < kQK_K; ++j) {
            y[j] = x[i].d * static_cast<float>(x[i].qs[j]);
        }
    }
}

float vec_dot_q8_K(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ8_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK_K; ++j) {
            sumi += x[i].qs[j] * y[i].qs[j];
        }
        sumf += x[i].d * y[i].d * static_cast<float>(sumi);
    }
    return sumf;
}

} // namespace

void fill_scalar_kquant_kernels(KernelTable& table) {
    auto set = [&table](TensorType t, DequantizeFn dq, QuantizeFn q, VecDotFn dot) {
        table.by_type[slot(t)] = TypeKernels{dq, q, dot};
    };
    set(TensorType::Q4_K, dequantize_q4_K, quantize_q4_K, vec_dot_q4_K);
    set(TensorType::Q5_K, dequantize_q5_K, quantize_q5_K, vec_dot_q5_K);
    set(TensorType::Q6_K, dequantize_q6_K, quantize_q6_K, vec_dot_q6_K);
    set(TensorType::Q8_K, dequantize_q8_K, quantize_q8_K, vec_dot_q8_K);
}

} // namespace spanscope::quant_detail
