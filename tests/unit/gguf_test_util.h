// Helpers shared by the GGUF tests (test_gguf_roundtrip.cpp, test_gguf_corrupt.cpp,
// test_gguf_real_model.cpp).
#pragma once

#include "engine/gguf/gguf_reader.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace spanscope::test {

inline std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& b) {
    return GgufFile::from_memory(b.data(), b.size());
}

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(seed + i * 7);
    return out;
}

} // namespace spanscope::test
