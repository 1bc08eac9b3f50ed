// What `spanscope-lab eval` does with one sample: one prefill of its context shared by every
// memory policy (the compression is query-agnostic: each policy selects or summarises the same
// prefilled rows when the context is sealed), then each policy's answer, its memory per tier,
// and its fidelity to `full` (agreement of greedy tokens, top-1 agreement and KL of the
// next-token distribution at the answer positions, with `full`'s answer teacher-forced).
#pragma once

#include "engine/session/session.h"
#include "engine/text/chunking.h"
#include "lab/evaluation/eval_tasks.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
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

/// The layers the compressed policies serve: those the shared prefill keeps in a recording
/// (eviction) memory, i.e. the global attention layers of base.sekv.layers. Ascending.
std::vector<int> served_layers(const SharedPrefill& p);

/// The memory of `layers` of `memory`, summed (bytes per tier, rows, spans).
MemoryStats memory_of_layers(const ModelMemory& memory, const std::vector<int>& layers);

/// Prefill `units` in order (unit_prefill.h), with the surprisal when `surprisal`.
/// base: threads, n_ctx and the layers the policies serve (base.sekv.layers).
SharedPrefill prefill_shared(const Model& model, const SessionOptions& base,
                             const std::vector<DocumentUnit>& units, bool surprisal);

/// The session options of `c` on top of `base` (budget set for SEKV and the eviction rules).
SessionOptions config_options(const SessionOptions& base, const EvalConfig& c);

/// A session holding the prefilled context under `options.global_policy`, sealed (SEKV and
/// chunk_summary segment it with the shared surprisal; the eviction rules select from the
/// shared statistics). Throws std::invalid_argument when a segmenting policy has no surprisal.
/// seal: when given, how the context was sealed (Session::seal_context; positions from 0, the
/// session's), left as it is when no layer seals.
std::unique_ptr<Session> session_for(const Model& model, const SessionOptions& options,
                                     const SharedPrefill& p, SealInfo* seal = nullptr);

/// log-softmax of the next-token distribution at each answer position when `tokens` are
/// teacher-forced after `question` from `before` (n_past rows): [max(1, tokens.size())][n_vocab].
std::vector<std::vector<float>> teacher_forced(Session& session, const ModelMemory& before,
                                               int64_t n_past, const std::vector<int32_t>& question,
                                               const std::vector<int32_t>& tokens);

/// The tokens asked after the context: the question in the model's chat format, then the
/// sample's answer prefix (eval_tasks.h) when it has one.
std::vector<int32_t> sample_question(const Tokenizer& tok, ChatFormat format,
                                     const eval::EvalSample& s);

/// The log-probabilities [positions][n_vocab] that fidelity() compares with the reference's:
/// the answer's own steps while its tokens follow the reference's (then they are the
/// teacher-forced ones), else computed again with the reference teacher-forced from `before`.
std::vector<std::vector<float>> fidelity_steps(Session& session, const ModelMemory& before,
                                               int64_t n_past, const std::vector<int32_t>& question,
                                               const std::vector<int32_t>& tokens,
                                               std::vector<std::vector<float>> steps,
                                               const std::vector<int32_t>& ref_tokens);

/// A JSON-lines result file that an evaluation appends to and resumes from. Each run first
/// appends a line {"command", "started", "machine", "threads", "version"}; each result is one
/// line. Results already in the file are found by their key (key(line)).
class ResultLog {
public:
    /// path empty: nothing is read or written. Reads the lines with a "policy" or "selector"
    /// field. The run's line (command, start, machine, threads, commit) is written before its
    /// first result, so a run that fails before any result leaves the file as it was. Throws
    /// std::runtime_error naming the file and line for a line that is not JSON (it must be
    /// fixed or removed to resume) or a file that cannot be written.
    ResultLog(const std::string& path, const std::string& command_line, int threads,
              std::function<std::string(const nlohmann::json&)> key);
    /// The result recorded for `probe`'s key, or nullptr.
    const nlohmann::json* find(const nlohmann::json& probe) const;
    /// Append one result line (flushed), after the run's line for the first one. Throws
    /// std::runtime_error when the file cannot be written.
    void append(const nlohmann::json& line);

private:
    std::string path_;
    std::function<std::string(const nlohmann::json&)> key_;
    std::map<std::string, nlohmann::json> done_;
    nlohmann::json run_line_;
    std::ofstream out_;
};

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" when absent).
std::string cpu_name();

} // namespace spanscope::cli
