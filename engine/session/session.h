// A conversation with a loaded model: its memory, prefill in ubatches (cancellable), decode,
// and question answering with reuse of a prefilled document prefix.
#pragma once

#include "engine/kernels/cancel.h"
#include "engine/kernels/thread_pool.h"
#include "engine/memory/memory.h"
#include "engine/memory/memory_eviction.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/text/prompt.h"
#include "engine/text/sampler.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// Thrown when a prompt does not fit the context window; the message gives both lengths.
class ContextOverflow : public std::length_error {
public:
    using std::length_error::length_error;
};

struct SessionOptions {
    int threads = 0;      ///< <= 0: all cores
    int64_t n_ctx = 0;    ///< tokens; 0 = the model's context window
    int64_t ubatch = 512; ///< tokens per forward call during prefill
    /// Memory policy of the global layers, one of global_policies() (model.h).
    std::string global_policy = "full";
    /// "sekv" and "chunk_summary": segmentation, ranks, router, budget, and the layers every
    /// compressing policy serves (sekv.layers).
    SekvOptions sekv;
    EvictionOptions eviction; ///< "snapkv", "h2o", "streaming": budget and selection
};

/// How a context was sealed (SEKV): its segmentation, and whether it met the fast-tier budget.
struct SealInfo {
    Segmentation segmentation;          ///< positions relative to the sealed context's start
    std::vector<float> token_surprisal; ///< [n] nats, each token's own (NaN for the first)
    double alpha = 0;                   ///< the threshold's α actually used
    bool budget_met = true; ///< SEKV's segmentation fits the budget (the eviction baselines report
                            ///< theirs through the memory held: within_budget)
};

struct GenerationStats {
    int64_t prompt_tokens = 0;
    int64_t tokens_computed = 0; ///< prompt tokens run through the model by this answer
                                 ///< (counted by the session at each forward call)
    int64_t tokens_reused = 0;   ///< prompt tokens whose K/V came from a cached prefix
    int64_t generated_tokens = 0;
    double ttft_ms = 0; ///< from ask() to the first answer token
    double prefill_ms = 0;
    double decode_ms = 0;
    double prefill_tokens_per_s = 0;
    double decode_tokens_per_s = 0;
    MemoryStats memory; ///< all layers, after the answer
    std::string policy; ///< the global layers' memory policy (SessionOptions::global_policy)
    /// sekv: the router, "trained" (W, rank gates and learned τ from a parameter file,
    /// sekv.router_params; τ calibrated unless sekv.router.learned_tau), "training-free" or
    /// "oracle" (sekv.router.oracle); empty for the other policies.
    std::string router;
    /// sekv: candidates per expanded span of two-stage routing (SekvRouterOptions::rerank) as
    /// the answer used; 0: one stage, and for the other policies.
    int rerank = 0;
    /// The layers the compressing policy serves (SEKV or a baseline: the sealing layers), after
    /// the answer; zero for `full`.
    MemoryStats sekv;
    std::vector<std::pair<int, MemoryStats>> sekv_layers; ///< (layer, its memory) per such layer
    double sekv_budget = 0; ///< the fast-tier budget (fraction of full) those layers had
    double expansions = 0;  ///< spans expanded per generated token, mean over SEKV layers and
                            ///< query heads (ZoomTrace::mean_expansions)
};

/// The whole cache after an answer — every layer, both tiers — as a fraction of what it would
/// hold with `full` on the layers the compressing policy serves (the other layers as they are):
/// (memory.fast + memory.host) / (memory.fast − sekv.fast + sekv.full), bytes over bytes. 1
/// for `full`; 0 when nothing is held. On a stack where SEKV serves half the layers this, not
/// the served layers' fraction, is what the cache costs.
double whole_cache_fraction(const GenerationStats& s);

struct Answer {
    std::string text;            ///< cleaned answer text
    std::vector<int32_t> tokens; ///< generated ids (without the stop token)
    /// "eog" (the format's end-of-turn or end-of-sequence token), "max_tokens",
    /// "end_of_paragraph" / "next_question" (a base model's stop rule, prompt.h), "context_full",
    /// "stopped"
    std::string stop_reason;
    GenerationStats stats;
    ZoomTrace zoom; ///< one step per generated token when SEKV layers serve the session
    /// With source ranges (Session::set_source_ranges): for each generated token, the
    /// attention mass over each range of the forward pass that produced it, summed over the
    /// global layers and their query heads [tokens][ranges]; empty otherwise.
    std::vector<std::vector<float>> source_mass;
    /// What one token's mass sums to over every position it saw: global layers × query heads
    /// (each head's attention probabilities sum to 1).
    int source_heads = 0;
};

class Session {
public:
    /// The routing of the last forward pass in the SEKV layers (one LayerZoom per layer that
    /// seals, ascending), and the memory those layers hold now (bytes per tier); no layers
    /// under a policy that does not route.
    ZoomStep zoom_step() const;
    /// Throws std::invalid_argument for bad options (ubatch < 1, n_ctx beyond the model's).
    Session(const Model& model, const SessionOptions& options);

    const Model& model() const { return model_; }
    const SessionOptions& options() const { return options_; }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_past() const { return n_past_; }
    int64_t ubatch() const { return options_.ubatch; }
    /// Tokens run through the model by this session so far (prefill and decode), counted where
    /// the forward pass is called: the statistics of ask() are differences of this counter.
    int64_t tokens_processed() const { return tokens_processed_; }
    ModelMemory& memory() { return memory_; }
    const ModelMemory& memory() const { return memory_; }
    ThreadPool& pool() { return pool_; }
    /// Forget everything (memory and cached prefix).
    void reset();
    /// The caller has filled memory() with the rows of positions [0, n_past) from elsewhere (a
    /// stored chunk state): continue after them. Drops the cached prefix. Throws
    /// std::invalid_argument when n_past is outside [0, n_ctx].
    void adopt_memory(int64_t n_past);

    /// Run tokens after what the memory holds, in ubatches of options.ubatch; returns the
    /// next-token logits after the last token [n_vocab]. progress(done, total) after each
    /// ubatch; cancel checked before each ubatch (throws Cancelled, memory then holds the
    /// ubatches done) and within a forward pass (before each layer's attention and feed-forward
    /// and each vocabulary slice of the surprisal: throws Cancelled and, as for any failure
    /// inside a forward pass, resets the session), so a long ubatch stops within half a
    /// layer's time. Throws ContextOverflow if n_past + tokens > n_ctx. Any other exception
    /// from the forward pass resets the session (memory and cached prefix), so that it never
    /// holds half a ubatch.
    /// surprisal: optional [tokens.size()], computed in the same forward passes: each row's
    /// surprisal of the token that follows it, in nats: surprisal[i] = -log p(tokens[i+1] |
    /// tokens up to i) for i < n-1, and surprisal[n-1] = -log p(next_token | all tokens), NaN
    /// when next_token < 0.
    std::vector<float> prefill(const std::vector<int32_t>& tokens,
                               const std::atomic<bool>* cancel = nullptr,
                               const std::function<void(int64_t, int64_t)>& progress = {},
                               float* surprisal = nullptr, int32_t next_token = -1);
    /// The context [pos_begin, pos_begin + n) is complete: every sealing layer holds it at
    /// lower resolution from now on (SEKV: two resolutions; the baselines: what their budget
    /// keeps). row_surprisal: [n] as prefill() computes it (row i: the surprisal of token i + 1),
    /// needed by the policies that segment (ModelMemory::needs_segmentation; may be null
    /// otherwise); the segmentation is taken within options.sekv.budget
    /// (segment_within_budget). Without sealing layers nothing changes. Throws
    /// std::invalid_argument for n < 1, a range outside what the memory holds, or a missing
    /// surprisal that is needed.
    SealInfo seal_context(const float* row_surprisal, int32_t pos_begin, int64_t n);
    /// Hold the same segmentation (from seal_context or storage) in every sealing layer.
    void seal_context(const Segmentation& segmentation, const std::vector<float>& token_surprisal,
                      int32_t pos_begin);

    /// The next answers (ask, answer_after_context) measure where each generated token looked:
    /// Answer::source_mass over these ranges of positions ([begin, end), any order; empty:
    /// not measured). Only the global attention layers (no window) count. Throws
    /// std::logic_error for ranges when some global layer's memory cannot report attention
    /// mass (reports_sources()).
    void set_source_ranges(std::vector<std::pair<int32_t, int32_t>> ranges);
    /// True when every global attention layer's memory reports attention mass (the CPU
    /// policies; not the CUDA backend's memories), and there is at least one such layer.
    bool reports_sources() const;

    /// Run one token; returns its next-token logits [n_vocab]. Throws ContextOverflow when the
    /// context is full.
    std::vector<float> decode(int32_t token);

    /// Answer a question prompt: reuse the cached prefix when the prompt starts with it,
    /// otherwise prefill from scratch (and cache prompt.prefix_len tokens for next time; with
    /// sealing layers the prefix is prefilled with its surprisal and sealed, seal_context);
    /// then generate up to max_tokens (the bound of every format's answer), calling on_text
    /// with the answer's text as it becomes sure (complete UTF-8; in prompt.format Completion
    /// a line that may still end the answer waits, answer_shown_length in prompt.h), so that
    /// the pieces join to the answer before its clean-up. Generation ends at the tokenizer's
    /// end of generation (Tokenizer::is_end_of_generation: EOS and the format's end of turn,
    /// <end_of_turn>, <|eot_id|>, <|im_end|>, </s>) or the Completion stop rule.
    /// cancel set during the prompt's prefill throws Cancelled; set during generation, it ends
    /// the answer before the next token with stop_reason "stopped" (what was generated is kept).
    /// Throws ContextOverflow (prompt longer than the context: message gives both lengths),
    /// Cancelled, std::invalid_argument for an empty prompt.
    Answer ask(const Prompt& prompt, int max_tokens, const SamplingParams& sampling,
               const std::function<void(const std::string&)>& on_text = {},
               const std::atomic<bool>* cancel = nullptr);

    /// Answer after what the memory already holds (documents prefilled or restored): prefill
    /// `question` (the prompt's remaining tokens; at least one, in `format`) and generate as
    /// ask() does.
    /// stats.tokens_reused is the n_past found on entry; stats.tokens_computed counts the
    /// forward passes of the question. Throws as ask().
    /// on_logits: called before each token is sampled with the next-token logits [n_vocab]
    /// (the evaluation's fidelity measures compare them across policies).
    Answer
    answer_after_context(const std::vector<int32_t>& question, ChatFormat format, int max_tokens,
                         const SamplingParams& sampling,
                         const std::function<void(const std::string&)>& on_text = {},
                         const std::atomic<bool>* cancel = nullptr,
                         const std::function<void(const std::vector<float>&)>& on_logits = {});

private:
    /// Generate from `logits` (the next-token logits after the prompt) into `ans`.
    void generate(std::vector<float> logits, ChatFormat format, int max_tokens,
                  const SamplingParams& sampling,
                  const std::function<void(const std::string&)>& on_text,
                  const std::atomic<bool>* cancel, std::chrono::steady_clock::time_point t0,
                  Answer& ans,
                  const std::function<void(const std::vector<float>&)>& on_logits = {});

    const Model& model_;
    SessionOptions options_;
    int64_t n_ctx_;
    ThreadPool pool_;
    ModelMemory memory_;
    int64_t n_past_ = 0;
    int64_t tokens_processed_ = 0;
    struct PrefixCache {
        std::vector<int32_t> tokens;
        ModelMemory memory;
        std::vector<float> last_logits;
    };
    std::optional<PrefixCache> prefix_;
    std::vector<std::pair<int32_t, int32_t>> source_ranges_;
    AttentionMass source_mass_;
    /// Point the global layers' memories at source_mass_ (on) or at nothing; returns the
    /// number of layers × heads that report.
    int arm_sources(bool on);
    /// Start measuring the query at `pos` (the forward pass that produces the next token).
    void expect_source_query(int64_t pos);
    /// The sinks disarmed when an answer ends, however it ends.
    struct SourcesArmed {
        SourcesArmed(Session& s, bool on_) : session(s), on(on_) {}
        ~SourcesArmed() {
            if (on)
                session.arm_sources(false);
        }
        SourcesArmed(const SourcesArmed&) = delete;
        SourcesArmed& operator=(const SourcesArmed&) = delete;
        Session& session;
        bool on;
    };
};

/// Peak resident set size of this process in bytes (getrusage).
int64_t peak_rss_bytes();

} // namespace spanscope
