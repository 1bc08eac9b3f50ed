#include "lab/evaluation/eval_fidelity.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope::eval {

std::vector<float> log_softmax(const std::vector<float>& logits) {
    const float mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const float x : logits)
        sum += std::exp(static_cast<double>(x - mx));
    const double log_sum = std::log(sum);
    std::vector<float> out(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) // shifted first: exact for large logits too
        out[i] = static_cast<float>(static_cast<double>(logits[i] - mx) - log_sum);
    return out;
}

nlohmann::json fidelity(const std::vector<int32_t>& tokens,
                        const std::vector<std::vector<float>>& forced,
                        const std::vector<int32_t>& ref_tokens,
                        const std::vector<std::vector<float>>& ref) {
    const size_t longer = std::max(tokens.size(), ref_tokens.size());
    size_t same = 0;
    for (size_t i = 0; i < std::min(tokens.size(), ref_tokens.size()); ++i)
        same += tokens[i] == ref_tokens[i];
    const size_t n = std::min(forced.size(), ref.size());
    size_t top1 = 0;
    double kl = 0;
    for (size_t i = 0; i < n; ++i) {
        const auto& p = ref[i];
        const auto& q = forced[i];
        top1 += std::max_element(p.begin(), p.end()) - p.begin() ==
                std::max_element(q.begin(), q.end()) - q.begin();
        double d = 0;
        for (size_t j = 0; j < p.size(); ++j)
            d += std::exp(static_cast<double>(p[j])) * (static_cast<double>(p[j]) - q[j]);
        // KL ≥ 0; a value below the rounding of the sums is a bug, not something to clamp.
        if (d < -1e-4)
            throw std::logic_error("fidelity: negative KL divergence " + std::to_string(d) +
                                   " at answer position " + std::to_string(i));
        kl += std::max(0.0, d);
    }
    return {{"greedy_agreement", longer ? static_cast<double>(same) / longer : 1.0},
            {"top1_agreement", n ? static_cast<double>(top1) / n : 1.0},
            {"kl", n ? kl / n : 0.0},
            {"positions", n}};
}

} // namespace spanscope::eval
