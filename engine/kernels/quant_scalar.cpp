// Scalar reference kernels: dequantisation and dot products follow ggml's generic C code
// (ggml-quants.c, ggml-cpu/quants.c), quantisation follows quantize_row_*_ref. Every SIMD level
// is tested against these. One file per family of types:
//   quant_scalar_float.cpp   F32, F16, BF16
//   quant_scalar_q32.cpp     the 32-element blocks Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1
//   quant_scalar_kquant.cpp  Q4_K, Q5_K, Q6_K, Q8_K and their reference quantisers

#include "engine/kernels/quant_impl.h"

namespace spanscope::quant_detail {

void fill_scalar_kernels(KernelTable& table) {
    fill_scalar_float_kernels(table);
    fill_scalar_q32_kernels(table);
    fill_scalar_kquant_kernels(table);
}

} // namespace spanscope::quant_detail
