// AVX2/FMA/F16C kernels (compiled with -mavx2 -mfma -mf16c, see engine/CMakeLists.txt); run only
// when quant.cpp has checked the CPU supports them.

// Dequantisation must round d*q and d*q - m like the scalar reference: no fused multiply-add
// unless written explicitly (_mm256_fmadd_ps in the dot products).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "fp16.h"
#include "quant_impl.h"

#include <immintrin.h>

#include <cstring>

namespace spanscope::quant_detail {
namespace {

#define SPANSCOPE_X86_VNNI 0
#include "quant_x86.inc"
#undef SPANSCOPE_X86_VNNI

} // namespace

void fill_avx2_kernels(KernelTable& table) {
    fill_x86_kernels(table);
}

} // namespace spanscope::quant_detail
