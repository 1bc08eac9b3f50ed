// Dequantisation, quantisation and dot-product kernels for the GGUF tensor types.
//
// Block formats follow ggml (ggml-common.h, ggml-quants.c): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1
// use blocks of 32 elements with an f16 scale (and min); Q4_K, Q5_K, Q6_K, Q8_K use
// super-blocks of 256 elements. Every kernel has a scalar reference; SIMD variants (AVX2/FMA,
// AVX-512) are selected at run time from the CPU's features and must agree with the scalar
// reference (tests/unit/test_quant.cpp).
#pragma once

#include "engine/kernels/tensor_type.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace spanscope {

/// Kernel implementation level. `Auto` picks the best one the CPU supports: Amx (Avx512 plus the
/// AMX tiles with their int8 products, where the kernel grants the process the tile state:
/// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked once; refused, the next level),
/// else Avx512 (AVX-512 F/BW/VL/DQ with VNNI), else AvxVnni (AVX2 with the VEX-encoded VNNI of
/// CPUs without AVX-512), else Avx2 (AVX2/FMA/F16C), else Scalar. The dot-product kernels of
/// AvxVnni are those of Avx2 and those of Amx those of Avx512; the integer matrix product
/// (qgemm.h) has its own kernel at every level.
enum class KernelLevel { Scalar = 0, Avx2 = 1, Avx512 = 2, AvxVnni = 3, Amx = 4, Auto = 99 };

/// Best level this CPU supports (cpuid + OS support for the register state).
KernelLevel best_kernel_level();
/// Whether this CPU (and the OS's saving of its registers) runs `level`; Scalar and Auto always.
bool kernel_level_supported(KernelLevel level);
/// Force a level for all subsequent kernel calls (tests compare levels). Throws
/// std::runtime_error if the CPU does not support it. Auto restores the best level.
void set_kernel_level(KernelLevel level);
KernelLevel kernel_level();
std::string_view kernel_level_name(KernelLevel level);
/// Every level but Auto, from the simplest: Scalar, Avx2, AvxVnni, Avx512, Amx.
std::vector<KernelLevel> kernel_levels();
/// The level called `name` (kernel_level_name's names); Auto for "best"; nullopt for others.
std::optional<KernelLevel> kernel_level_from_name(std::string_view name);

/// Dequantise n elements (n % block_size == 0) from `src` (row_bytes(t, n) bytes) into dst[n].
/// Bit-exact with gguf-py and with ggml's dequantize_row_* compiled without FMA contraction, at
/// every kernel level.
/// Throws std::invalid_argument if n is negative or not a multiple of the block size.
void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);

/// Quantise n floats into `dst` (row_bytes(t, n) bytes), with ggml's reference rounding
/// (quantize_row_*_ref). Supported for every type in TensorType. Used for activations
/// (Q8_0, Q8_1, Q8_K) and by the GGUF writer for test models. The output bytes are the same at
/// every kernel level. Throws std::invalid_argument like dequantize_row.
void quantize_row(TensorType t, const float* src, void* dst, int64_t n);

/// Dot product of a weight row `w` of type t (n elements) with an activation row `xq` already
/// quantised to traits(t).vec_dot_type (for F32/F16/BF16 weights the vec_dot_type is F32, so
/// xq is a float*). Returns the dot product as float (fp32 accumulation; the integer products of
/// a block are exact, levels differ only in the fp32 summation order). As in ggml's SIMD kernels,
/// the activation levels must lie in [-127, 127] (quantize_row never produces -128).
/// Throws std::invalid_argument like dequantize_row.
float vec_dot(TensorType t, int64_t n, const void* w, const void* xq);

/// out[r] = the dot product of row r (at w + r * row_stride) with xq, for r < n_rows, with one
/// dispatch and one argument check for all rows (the decode hot loop: a whole weight matrix times
/// one vector). Some levels have a kernel of their own for it: AVX2 and AVX-512 for Q8_0 and Q5_0
/// sum in another order than vec_dot (the same exact block sums; within vec_dot's tolerance), and
/// for Q4_0, Q4_1 and Q5_1 in vec_dot's order and lanes (the same bits as vec_dot at that level),
/// four rows per activation load; a row's result never depends on n_rows or on the row's place
/// among the rows.
void vec_dot_rows(TensorType t, int64_t n, int64_t n_rows, const void* w, size_t row_stride,
                  const void* xq, float* out);

} // namespace spanscope
