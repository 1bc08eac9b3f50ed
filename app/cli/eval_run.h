// What `spanscope-cli eval` does with one sample: one prefill of its context shared by every
// memory policy (the compression is query-agnostic: each policy selects or summarises the same
// prefilled rows when the context is sealed), then each policy's answer, its memory per tier,
// and its fidelity to `full` (agreement of greedy tokens, top-1 agreement and KL of the
// next-token distribution at the answer positions, with `full`'s answer teacher-forced).
#pragma once

#include "chunking.h"
#include "session.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spanscope::cli {

/// One column of an evaluation: a policy at a fast-tier budget (1.0 for full).
struct EvalConfig {
    std::string policy;
    double budget = 1.0;
    /// "full", "sekv@35%".
    std::string label() const;
};

/// A context prefilled once: the memory of every layer, the global layers in an `h2o` memory
/// (it holds every row until sealed and records the accumulated attention and the last queries
/// that the eviction baselines select by), and each row's surprisal when a policy segments.
struct SharedPrefill {
    ModelMemory memory;
    int64_t n_past = 0;
    std::vector<float> row_surprisal; ///< [n_past] (Session::prefill's convention) or empty
    double seconds = 0;
};

/// Prefill `units` in order (unit_prefill.h), with the surprisal when `surprisal`.
/// base: threads, n_ctx and the layers the policies serve (base.sekv.layers).
SharedPrefill prefill_shared(const Model& model, const SessionOptions& base,
                             const std::vector<DocumentUnit>& units, bool surprisal);

/// The session options of `c` on top of `base` (budget set for SEKV and the eviction rules).
SessionOptions config_options(const SessionOptions& base, const EvalConfig& c);

/// A session holding the prefilled context under `options.global_policy`, sealed (SEKV and
/// chunk_summary segment it with the shared surprisal; the eviction rules select from the
/// shared statistics). Throws std::invalid_argument when a segmenting policy has no surprisal.
std::unique_ptr<Session> session_for(const Model& model, const SessionOptions& options,
                                     const SharedPrefill& p);

/// log-softmax of the next-token distribution at each answer position when `tokens` are
/// teacher-forced after `question` from `before` (n_past rows): [max(1, tokens.size())][n_vocab].
std::vector<std::vector<float>> teacher_forced(Session& session, const ModelMemory& before,
                                               int64_t n_past, const std::vector<int32_t>& question,
                                               const std::vector<int32_t>& tokens);

} // namespace spanscope::cli
