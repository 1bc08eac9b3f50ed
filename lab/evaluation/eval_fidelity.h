// Fidelity of a compressed policy to `full` without labels (issue 6): agreement of the greedy
// tokens, and at each answer position (with full's answer teacher-forced) top-1 agreement and
// the KL divergence of the next-token distributions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

namespace spanscope::eval {

/// log-softmax of `logits` [n_vocab] (nats), max-shifted.
std::vector<float> log_softmax(const std::vector<float>& logits);

/// Fidelity of an answer to the reference. tokens: the policy's own greedy tokens; forced:
/// [positions][n_vocab] its log-probabilities with the reference tokens teacher-forced;
/// ref_tokens, ref: the reference's tokens and log-probabilities [positions][n_vocab].
/// Returns {"greedy_agreement": positions i < the longer answer where both answers have the
/// same token, over the longer answer's length (1 for two empty answers); "top1_agreement":
/// share of the min(|forced|, |ref|) positions whose argmax agrees; "kl": mean over those
/// positions of KL(ref ‖ forced) = Σ_v p_ref(v)·(log p_ref(v) − log p_forced(v)), nats;
/// "positions"}.
nlohmann::json fidelity(const std::vector<int32_t>& tokens,
                        const std::vector<std::vector<float>>& forced,
                        const std::vector<int32_t>& ref_tokens,
                        const std::vector<std::vector<float>>& ref);

} // namespace spanscope::eval
