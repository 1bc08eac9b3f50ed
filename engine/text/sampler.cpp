#include "engine/text/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace spanscope {

int32_t argmax(const float* logits, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
    if (!(params.temperature >= 0.0f))
        throw std::invalid_argument("temperature must be >= 0");
    if (!(params.top_p > 0.0f))
        throw std::invalid_argument("top-p must be > 0");
}

int32_t Sampler::sample(const float* logits, int32_t n_vocab) {
    if (params_.temperature == 0.0f)
        return argmax(logits, n_vocab);
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    std::iota(ids.begin(), ids.end(), 0);
    size_t keep = ids.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep)
        keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(),
                      [&](int32_t a, int32_t b) {
                          return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                      });
    ids.resize(keep);
    std::vector<double> p(keep);
    const double mx = logits[ids[0]];
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
        p[i] = std::exp((logits[ids[i]] - mx) / params_.temperature);
        sum += p[i];
    }
    size_t cut = keep;
    if (params_.top_p < 1.0f) {
        double acc = 0.0;
        for (size_t i = 0; i < keep; ++i) {
            acc += p[i] / sum;
            if (acc >= params_.top_p) {
                cut = i + 1;
                break;
            }
        }
    }
    std::discrete_distribution<size_t> dist(p.begin(),
                                            p.begin() + static_cast<std::ptrdiff_t>(cut));
    return ids[dist(rng_)];
}

} // namespace spanscope
