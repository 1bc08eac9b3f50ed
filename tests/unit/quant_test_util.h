// Helpers shared by the quantisation kernel tests (test_quant.cpp, test_quant_handbuilt.cpp).
#pragma once

#include "quant.h"

#include <cstdint>
#include <vector>

namespace spanscope::test {

/// Sets a kernel level for the scope of a test and restores the best one afterwards.
class LevelGuard {
public:
    explicit LevelGuard(KernelLevel level) { set_kernel_level(level); }
    ~LevelGuard() { set_kernel_level(KernelLevel::Auto); }
    LevelGuard(const LevelGuard&) = delete;
    LevelGuard& operator=(const LevelGuard&) = delete;
};

inline bool level_supported(KernelLevel level) {
    return kernel_level_supported(level);
}

inline std::vector<uint8_t> quantized(TensorType t, const std::vector<float>& x) {
    std::vector<uint8_t> out(row_bytes(t, static_cast<int64_t>(x.size())));
    quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

inline std::vector<float> dequantized(TensorType t, const std::vector<uint8_t>& bytes, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t, bytes.data(), out.data(), n);
    return out;
}

/// Every level this CPU runs, scalar first.
inline std::vector<KernelLevel> runnable_levels() {
    std::vector<KernelLevel> levels{KernelLevel::Scalar};
    for (KernelLevel l :
         {KernelLevel::Avx2, KernelLevel::AvxVnni, KernelLevel::Avx512, KernelLevel::Amx}) {
        if (level_supported(l)) {
            levels.push_back(l);
        }
    }
    return levels;
}

} // namespace spanscope::test
