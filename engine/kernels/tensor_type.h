// Tensor element types of the GGUF format and their block layout.
// Source: GGUF specification (ggml/docs/gguf.md) and the block structures of ggml-common.h;
// the numeric values are the on-disk enum values and must never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace spanscope {

/// On-disk GGUF tensor type ids (explicit values, as written in files).
enum class TensorType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    BF16 = 30,
};

/// Super-block size of the K-quants (elements).
inline constexpr int64_t kQK_K = 256;

struct TensorTypeTraits {
    std::string_view name; ///< "f32", "q4_K", ... as ggml names them
    int64_t block_size;    ///< elements per block (1 for float types)
    size_t block_bytes;    ///< bytes per block
    bool quantized;
    TensorType vec_dot_type; ///< type the activation vector is quantised to for vec_dot
};

/// Traits of a known type; std::nullopt for an id this engine does not support.
std::optional<TensorTypeTraits> tensor_type_traits(uint32_t id);
/// Traits of a known type (the enum guarantees it is known).
const TensorTypeTraits& traits(TensorType t);

/// Bytes occupied by a row of n elements. Requires n % block_size == 0.
size_t row_bytes(TensorType t, int64_t n);

} // namespace spanscope
