// AVX2/FMA/F16C kernels (compiled with -mavx2 -mfma -mf16c, see engine/CMakeLists.txt); run only
// when quant.cpp has checked the CPU supports them.

#include "engine/kernels/quant_no_contract.h" // first: no automatic FMA below

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant_impl.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

namespace spanscope::quant_detail {
namespace {

#define SPANSCOPE_X86_VNNI 0
#include "engine/kernels/quant_x86.inc"
#undef SPANSCOPE_X86_VNNI

} // namespace

void fill_avx2_kernels(KernelTable& table) {
    fill_x86_kernels(table);
}

} // namespace spanscope::quant_detail
