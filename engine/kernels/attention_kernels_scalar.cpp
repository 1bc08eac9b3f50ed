// Attention's float kernels at the scalar level; the code is attention_kernels.inc.
#include "engine/kernels/attention_kernels.h"

namespace spanscope::attention_detail {
namespace {

#define ATTN_WIDTH 1
#include "engine/kernels/attention_kernels.inc"
#undef ATTN_WIDTH

} // namespace

Kernels scalar_kernels() {
    return make_kernels();
}

} // namespace spanscope::attention_detail
