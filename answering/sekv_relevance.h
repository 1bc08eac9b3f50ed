// Relevance of a document section's stored SEKV summaries to a question (issue 7): the
// question's queries, from one forward pass of the question alone, against each span's summary
// key as mixed-resolution attention scores it (docs/sekv.md item 6: a summary row with bias
// +log|S| stands for the span's |S| rows). Used to rank sections when not all fit the context.
#pragma once

#include "engine/kernels/thread_pool.h"
#include "engine/model/model.h"
#include "storage/sekv_state.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

namespace spanscope {

/// The queries of a question at some attention layers.
struct QuestionQueries {
    int64_t n_tokens = 0;              ///< question tokens (a BOS before them not counted)
    int64_t first_pos = 1;             ///< position of the first question token: 1 after a BOS
    std::vector<int> layers;           ///< ascending
    std::vector<std::vector<float>> q; ///< per layer: [n_tokens][n_head][head_dim], rotated at
                                       ///< positions first_pos..first_pos + n_tokens − 1
};

/// Run [BOS] + `question` once through the model with a fresh full-attention memory (a cost of
/// question.size() tokens, + 1 for the BOS where Tokenizer::add_bos() asks for one, as every
/// prompt starts; no logits) and keep the queries each of `layers` attends with.
/// question: token ids without BOS; cancel: optional, checked by the forward pass (throws
/// Cancelled). Throws std::invalid_argument for an empty question, a layer that does not exist
/// or is not a global-attention layer with full-head RoPE, a vocabulary that asks for a BOS and
/// has none.
QuestionQueries question_queries(const Model& model, const std::vector<int32_t>& question,
                                 const std::vector<int>& layers, ThreadPool& pool,
                                 const std::atomic<bool>* cancel = nullptr);

/// How much attention the question would pay the section through its summary rows, per token:
/// for each layer of `q` that the state holds, each query head h (reading KV head
/// h / (n_head / n_kv_head)) and each question token t,
///     s = log Σ_S exp(scale · q_t,h · k̄_S + log|S|) − log Σ_S |S|
/// over the section's spans S (k̄_S the summary key, scale the layer's attention scale), the
/// queries first moved by RoPE to sit right after the section (question token t at position
/// n_tokens + t, the section's keys at 0…n_tokens−1), as they would when the question follows
/// it; the result is the mean of s over layers, heads and tokens (nats; higher is more
/// relevant; comparable across sections of different lengths because it is per token).
/// std::nullopt when the state has no span in those layers.
std::optional<double> sekv_relevance(const QuestionQueries& q, const SekvUnitState& state,
                                     const ModelInfo& info);

} // namespace spanscope
