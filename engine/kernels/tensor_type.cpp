#include "engine/kernels/tensor_type.h"

#include <array>
#include <stdexcept>
#include <string>

namespace spanscope {
namespace {

// Block layouts from ggml-common.h (block_q4_0 = f16 d + 16 nibbles bytes, ...).
constexpr TensorTypeTraits kF32{"f32", 1, 4, false, TensorType::F32};
constexpr TensorTypeTraits kF16{"f16", 1, 2, false, TensorType::F32};
constexpr TensorTypeTraits kBF16{"bf16", 1, 2, false, TensorType::F32};
constexpr TensorTypeTraits kQ4_0{"q4_0", 32, 18, true, TensorType::Q8_0};
constexpr TensorTypeTraits kQ4_1{"q4_1", 32, 20, true, TensorType::Q8_1};
constexpr TensorTypeTraits kQ5_0{"q5_0", 32, 22, true, TensorType::Q8_0};
constexpr TensorTypeTraits kQ5_1{"q5_1", 32, 24, true, TensorType::Q8_1};
constexpr TensorTypeTraits kQ8_0{"q8_0", 32, 34, true, TensorType::Q8_0};
constexpr TensorTypeTraits kQ8_1{"q8_1", 32, 36, true, TensorType::Q8_1};
constexpr TensorTypeTraits kQ4_K{"q4_K", kQK_K, 144, true, TensorType::Q8_K};
constexpr TensorTypeTraits kQ5_K{"q5_K", kQK_K, 176, true, TensorType::Q8_K};
constexpr TensorTypeTraits kQ6_K{"q6_K", kQK_K, 210, true, TensorType::Q8_K};
constexpr TensorTypeTraits kQ8_K{"q8_K", kQK_K, 292, true, TensorType::Q8_K};

} // namespace

std::optional<TensorTypeTraits> tensor_type_traits(uint32_t id) {
    switch (static_cast<TensorType>(id)) {
    case TensorType::F32:
        return kF32;
    case TensorType::F16:
        return kF16;
    case TensorType::BF16:
        return kBF16;
    case TensorType::Q4_0:
        return kQ4_0;
    case TensorType::Q4_1:
        return kQ4_1;
    case TensorType::Q5_0:
        return kQ5_0;
    case TensorType::Q5_1:
        return kQ5_1;
    case TensorType::Q8_0:
        return kQ8_0;
    case TensorType::Q8_1:
        return kQ8_1;
    case TensorType::Q4_K:
        return kQ4_K;
    case TensorType::Q5_K:
        return kQ5_K;
    case TensorType::Q6_K:
        return kQ6_K;
    case TensorType::Q8_K:
        return kQ8_K;
    }
    return std::nullopt;
}

const TensorTypeTraits& traits(TensorType t) {
    static const auto table = [] {
        std::array<std::optional<TensorTypeTraits>, 64> all{};
        for (uint32_t id = 0; id < all.size(); ++id)
            all[id] = tensor_type_traits(id);
        return all;
    }();
    const auto id = static_cast<uint32_t>(t);
    if (id >= table.size() || !table[id])
        throw std::invalid_argument("unknown tensor type " + std::to_string(id));
    return *table[id];
}

size_t row_bytes(TensorType t, int64_t n) {
    const auto& tr = traits(t);
    if (n < 0 || n % tr.block_size != 0) {
        throw std::invalid_argument(
            "row of " + std::to_string(n) + " elements is not a multiple of " +
            std::to_string(tr.block_size) + " for type " + std::string(tr.name));
    }
    return static_cast<size_t>(n / tr.block_size) * tr.block_bytes;
}

} // namespace spanscope
