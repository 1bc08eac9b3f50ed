// Gaussian test data shared by the unit tests: one definition, so every test draws its inputs the
// same way.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace spanscope::test {

/// n samples of N(0, sd²) drawn from `rng` (advanced by the draw), as floats.
template <std::uniform_random_bit_generator Rng>
std::vector<float> randn(size_t n, Rng& rng, float sd = 1.0f) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (auto& x : v)
        x = d(rng);
    return v;
}

/// n samples of N(0, sd²) from a std::mt19937_64 seeded with `seed`: the same seed gives the same
/// values with one standard library (std::normal_distribution's algorithm is the library's, so
/// a test must not rest on one draw's values).
inline std::vector<float> randn(size_t n, uint64_t seed, float sd = 1.0f) {
    std::mt19937_64 rng(seed);
    return randn(n, rng, sd);
}

} // namespace spanscope::test
