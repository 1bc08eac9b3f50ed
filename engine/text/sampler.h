// Next-token sampling: greedy, temperature, top-k, top-p (Holtzman et al. 2020, "The Curious
// Case of Neural Text Degeneration", §3.1), with a fixed seed.
#pragma once

#include <cstdint>
#include <random>

namespace spanscope {

struct SamplingParams {
    float temperature = 0.0f; ///< 0 = greedy (argmax; ties to the lowest id)
    int top_k = 40;           ///< <= 0: no top-k cut
    float top_p = 0.95f;      ///< >= 1: no nucleus cut
    uint64_t seed = 0;
};

class Sampler {
public:
    /// Throws std::invalid_argument for temperature < 0 or top_p <= 0.
    explicit Sampler(const SamplingParams& params);
    /// Pick a token from logits[n_vocab] (raw logits).
    int32_t sample(const float* logits, int32_t n_vocab);

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
};

/// Index of the largest logit (lowest index on ties).
int32_t argmax(const float* logits, int32_t n);

} // namespace spanscope
