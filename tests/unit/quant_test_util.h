// Helpers shared by the kernel tests (test_quant.cpp, test_quant_handbuilt.cpp, test_qgemm.cpp,
// test_attention_levels.cpp, test_ops.cpp).
#pragma once

#include "engine/kernels/quant.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
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

/// Why `level` does not run here, for a skip message.
inline std::string level_missing_reason(KernelLevel level) {
    return "kernel level " + std::string(kernel_level_name(level)) +
           " does not run here: the CPU lacks it (or, for amx, Linux refused the tile state; "
           "best: " +
           std::string(kernel_level_name(best_kernel_level())) + ")";
}

/// A test run once per kernel level (its parameter), skipped with the reason where the level
/// does not run.
class KernelLevelTest : public ::testing::TestWithParam<KernelLevel> {
protected:
    void SetUp() override {
        if (!level_supported(GetParam()))
            GTEST_SKIP() << level_missing_reason(GetParam());
    }
};

/// The test name of a level parameter ("avx512", ...).
inline std::string level_param_name(const ::testing::TestParamInfo<KernelLevel>& info) {
    return std::string(kernel_level_name(info.param));
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
    for (KernelLevel l : kernel_levels()) {
        if (l == KernelLevel::Scalar)
            continue;
        if (level_supported(l))
            levels.push_back(l);
        else
            std::printf("[ %s: not tested ]\n", level_missing_reason(l).c_str());
    }
    return levels;
}

} // namespace spanscope::test
