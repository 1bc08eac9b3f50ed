// Attention's float kernels at the AVX2 level (compiled with -mavx2 -mfma); the code is
// attention_kernels.inc.
#include <immintrin.h>

#include "engine/kernels/attention_kernels.h"

namespace spanscope::attention_detail {
namespace {

#define ATTN_WIDTH 8
#include "engine/kernels/attention_kernels.inc"
#undef ATTN_WIDTH

} // namespace

Kernels avx2_kernels() {
    return make_kernels();
}

} // namespace spanscope::attention_detail
