// Scalar reference kernels of the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1:
// dequantisation and dot products follow ggml's generic C code (ggml-quants.c,
// ggml-cpu/quants.c), quantisation follows quantize_row_*_ref.

#include "engine/kernels/quant_no_contract.h" // first: no automatic FMA below

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spanscope::quant_detail {
namespace {

/// The first element of largest magnitude, with its sign (the reference's `max`).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void quantize_q4_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const float d = signed_absmax(x, kQK) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK / 2; ++j) {
            const uint8_t xi0 = std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
            const uint8_t xi1 =
                std::min<int8_t>(15, static_cast<int8_t>(x[kQK / 2 + j] * id + 8.5f));
            y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

void dequantize_q4_0(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + kQK / 2] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

float vec_dot_q4_0(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            sumi += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kQK / 2];
        }
        sumf += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

void quantize_q4_1(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ4_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float min = x[0];
        float max = x[0];
        for (int j = 1; j < kQK; ++j) {
            min = x[j] < min ? x[j] : min;
            max = x[j] > max ? x[j] : max;
        }
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < kQK / 2; ++j) {
            const uint8_t xi0 = std::min<int8_t>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f));
            const uint8_t xi1 =
                std::min<int8_t>(15, static_cast<int8_t>((x[kQK / 2 + j] - min) * id + 0.5f));
            y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

void dequantize_q4_1(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
            y[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
            y[j + kQK / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

float vec_dot_q4_1(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ4_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            sumi += (x[i].qs[j] & 0x0F) * y[i].qs[j];
            sumi += (x[i].qs[j] >> 4) * y[i].qs[j + kQK / 2];
        }
        sumf += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * static_cast<float>(sumi) +
                fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sumf;
}

void quantize_q5_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const float d = signed_absmax(x, kQK) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const uint8_t xi0 = std::min<int8_t>(31, static_cast<int8_t>(x[j] * id + 16.5f));
            const uint8_t xi1 =
                std::min<int8_t>(31, static_cast<int8_t>(x[kQK / 2 + j] * id + 16.5f));
            y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << j;
            qh |= ((xi1 & 0x10u) >> 4) << (j + kQK / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void dequantize_q5_0(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            y[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | xh0) - 16) * d;
            y[j + kQK / 2] = static_cast<float>(((x[i].qs[j] >> 4) | xh1) - 16) * d;
        }
    }
}

float vec_dot_q5_0(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ5_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            sumi += (((x[i].qs[j] & 0x0F) | xh0) - 16) * y[i].qs[j];
            sumi += (((x[i].qs[j] >> 4) | xh1) - 16) * y[i].qs[j + kQK / 2];
        }
        sumf += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

void quantize_q5_1(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ5_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float min = x[0];
        float max = x[0];
        for (int j = 1; j < kQK; ++j) {
            min = x[j] < min ? x[j] : min;
            max = x[j] > max ? x[j] : max;
        }
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const auto xi0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
            const auto xi1 = static_cast<uint8_t>((x[kQK / 2 + j] - min) * id + 0.5f);
            y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << j;
            qh |= ((xi1 & 0x10u) >> 4) << (j + kQK / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof qh);
    }
}

void dequantize_q5_1(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < kQK / 2; ++j) {
            const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            y[j] = static_cast<float>((x[i].qs[j] & 0x0F) | xh0) * d + m;
            y[j + kQK / 2] = static_cast<float>((x[i].qs[j] >> 4) | xh1) * d + m;
        }
    }
}

float vec_dot_q5_1(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const BlockQ5_1*>(w);
    const auto* y = static_cast<const BlockQ8_1*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof qh);
        int sumi = 0;
        for (int j = 0; j < kQK / 2; ++j) {
            const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            sumi += ((x[i].qs[j] & 0x0F) | xh0) * y[i].qs[j];
            sumi += ((x[i].qs[j] >> 4) | xh1) * y[i].qs[j + kQK / 2];
        }
        sumf += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * static_cast<float>(sumi) +
                fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
    }
    return sumf;
}

void quantize_q8_0(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) {
            amax = std::max(amax, std::fabs(x[j]));
        }
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
        }
    }
}

// Q8_0 and Q8_1 share the quants and the scale; Q8_1's extra sum s only serves Q4_1/Q5_1 dots.
template <class Block> void dequantize_q8(const void* src, float* y, int64_t n) {
    const auto* x = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < kQK; ++j) {
            y[j] = static_cast<float>(x[i].qs[j]) * d;
        }
    }
}

template <class Block> float vec_dot_q8(int64_t n, const void* w, const void* xq) {
    const auto* x = static_cast<const Block*>(w);
    const auto* y = static_cast<const Block*>(xq);
    float sumf = 0.0f;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int sumi = 0;
        for (int j = 0; j < kQK; ++j) {
            sumi += x[i].qs[j] * y[i].qs[j];
        }
        sumf += static_cast<float>(sumi) * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
    }
    return sumf;
}

void quantize_q8_1(const float* x, void* dst, int64_t n) {
    auto* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) {
            amax = std::max(amax, std::fabs(x[j]));
        }
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
    }
}

} // namespace

void fill_scalar_q32_kernels(KernelTable& table) {
    auto set = [&table](TensorType t, DequantizeFn dq, QuantizeFn q, VecDotFn dot) {
        table.by_type[slot(t)] = TypeKernels{dq, q, dot};
    };
    set(TensorType::Q4_0, dequantize_q4_0, quantize_q4_0, vec_dot_q4_0);
    set(TensorType::Q4_1, dequantize_q4_1, quantize_q4_1, vec_dot_q4_1);
    set(TensorType::Q5_0, dequantize_q5_0, quantize_q5_0, vec_dot_q5_0);
    set(TensorType::Q5_1, dequantize_q5_1, quantize_q5_1, vec_dot_q5_1);
    set(TensorType::Q8_0, dequantize_q8<BlockQ8_0>, quantize_q8_0, vec_dot_q8<BlockQ8_0>);
    set(TensorType::Q8_1, dequantize_q8<BlockQ8_1>, quantize_q8_1, vec_dot_q8<BlockQ8_1>);
}

} // namespace spanscope::quant_detail
