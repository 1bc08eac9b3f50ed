// Scalar reference kernels of the unquantised types F32, F16 and BF16: conversion by fp16.h and
// plain dot products against f32 activations (ggml-cpu's generic C code).

#include "engine/kernels/quant_no_contract.h" // first: no automatic FMA below

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant_impl.h"

#include <cstring>

namespace spanscope::quant_detail {
namespace {

void dequantize_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}
float vec_dot_f32(int64_t n, const void* w, const void* xq) {
    const auto* a = static_cast<const float*>(w);
    const auto* b = static_cast<const float*>(xq);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        sum += a[i] * b[i];
    }
    return sum;
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = fp16_to_fp32(h[i]);
    }
}
void quantize_f16(const float* src, void* dst, int64_t n) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        h[i] = fp32_to_fp16(src[i]);
    }
}
float vec_dot_f16(int64_t n, const void* w, const void* xq) {
    const auto* a = static_cast<const uint16_t*>(w);
    const auto* b = static_cast<const float*>(xq);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        sum += fp16_to_fp32(a[i]) * b[i];
    }
    return sum;
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = bf16_to_fp32(h[i]);
    }
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        h[i] = fp32_to_bf16(src[i]);
    }
}
float vec_dot_bf16(int64_t n, const void* w, const void* xq) {
    const auto* a = static_cast<const uint16_t*>(w);
    const auto* b = static_cast<const float*>(xq);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        sum += bf16_to_fp32(a[i]) * b[i];
    }
    return sum;
}

} // namespace

void fill_scalar_float_kernels(KernelTable& table) {
    auto set = [&table](TensorType t, DequantizeFn dq, QuantizeFn q, VecDotFn dot) {
        table.by_type[slot(t)] = TypeKernels{dq, q, dot};
    };
    set(TensorType::F32, dequantize_f32, quantize_f32, vec_dot_f32);
    set(TensorType::F16, dequantize_f16, quantize_f16, vec_dot_f16);
    set(TensorType::BF16, dequantize_bf16, quantize_bf16, vec_dot_bf16);
}

} // namespace spanscope::quant_detail
