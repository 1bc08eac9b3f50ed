// Surprisal of every token of a prefill: -log p(actual next token), in nats, from the same
// forward pass (SEKV cuts spans at high-surprisal tokens). Computing it
// needs the logits of every row; they are never materialised as [n][n_vocab]: for quantised
// output matrices the integer product (qgemm.h) hands over tiles of [n][512] logits, each reduced
// at once to a max and a sum of exponentials per row (an online log-sum-exp, merged in vocabulary
// order, so the result does not depend on the thread count); float output matrices run over
// vocabulary slices with a running log-sum-exp.
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/kernels/thread_pool.h"

#include <atomic>
#include <cstdint>

namespace spanscope {

/// What forward() should also compute: for every row t of the ubatch with targets[t] >= 0,
/// surprisal[t] = logsumexp(logits_t) - logits_t[targets[t]] (nats); rows with targets[t] < 0
/// get NaN. targets, surprisal: [n] (n = the ubatch's token count).
struct SurprisalRequest {
    const int32_t* targets = nullptr;
    float* surprisal = nullptr;
};

/// Surprisal of `targets` under logits = hidden · lm_headᵀ.
/// hidden: [n][lm_head.cols] (final-normed hidden states); targets, out: [n].
/// Throws std::invalid_argument for a target outside [0, lm_head.rows).
/// slice_rows: vocabulary rows per slice of a float lm_head (memory: n * slice_rows floats).
/// cancel: checked before each tile or slice; throws Cancelled (out is then incomplete).
void token_surprisal(const WeightMatrix& lm_head, const float* hidden, int64_t n,
                     const int32_t* targets, float* out, ThreadPool& pool,
                     int64_t slice_rows = 8192, const std::atomic<bool>* cancel = nullptr);

} // namespace spanscope
