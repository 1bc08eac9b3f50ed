// AVX-512 kernels (compiled with -mavx512f/bw/vl/dq/vnni, see engine/CMakeLists.txt); run only
// when quant.cpp has checked the CPU and OS support them. This file must compile on any x86-64
// build machine, including ones that cannot run it.
//
// The kernels are the AVX2 ones (quant_x86.inc) with the 8-bit dot product done by AVX512-VNNI
// vpdpbusd (one instruction instead of maddubs + madd + add) on 256-bit vectors, which avoids the
// frequency drop of 512-bit registers on older Xeons for this memory-bound work.

#include "engine/kernels/quant_no_contract.h" // first: no automatic FMA below

#include "engine/kernels/fp16.h"
#include "engine/kernels/quant_impl.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

namespace spanscope::quant_detail {
namespace {

#define SPANSCOPE_X86_VNNI 1
#include "engine/kernels/quant_x86.inc"
#undef SPANSCOPE_X86_VNNI

} // namespace

void fill_avx512_kernels(KernelTable& table) {
    fill_x86_kernels(table);
}

} // namespace spanscope::quant_detail
