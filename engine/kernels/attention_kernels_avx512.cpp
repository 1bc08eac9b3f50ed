// Attention's float kernels at the AVX-512 level (compiled with -mavx512f -mavx2 -mfma);
// the code is attention_kernels.inc.
#include <immintrin.h>

#include "engine/kernels/attention_kernels.h"

namespace spanscope::attention_detail {
namespace {

#define ATTN_WIDTH 16
#include "engine/kernels/attention_kernels.inc"
#undef ATTN_WIDTH

} // namespace

Kernels avx512_kernels() {
    return make_kernels();
}

} // namespace spanscope::attention_detail
