// AVX-VNNI kernel of the integer matrix product (compiled with -mavx2 -mfma -mavxvnni, see
// engine/CMakeLists.txt): int16 products with the VEX-encoded vpdpwssd of CPUs without AVX-512.
#include "engine/kernels/quant_no_contract.h"

#include "engine/kernels/fp16.h"
#include "engine/kernels/qgemm_impl.h"
#include "engine/kernels/quant_impl.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace spanscope::qgemm_detail {
namespace {

#define QGEMM_YMM_VNNI 1
#include "engine/kernels/qgemm_ymm.inc"
#undef QGEMM_YMM_VNNI

} // namespace

Level avxvnni_level() {
    return ymm_level();
}

} // namespace spanscope::qgemm_detail
