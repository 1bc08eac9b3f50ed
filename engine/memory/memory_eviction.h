// The eviction baselines that SEKV is measured against (issue 6): a global-attention layer's
// memory that, once a document is complete (seal()), keeps only a fast-tier budget of its
// rows and drops the rest for good — the opposite of SEKV, which keeps everything.
//   streaming: attention sinks + the most recent rows (Xiao et al. 2024, "Efficient Streaming
//              Language Models with Attention Sinks", §3.2: 4 sink tokens + a rolling window);
//   h2o:       heavy hitters by accumulated attention + a recent window (Zhang et al. 2023,
//              "H2O: Heavy-Hitter Oracle", §3.2 and Algorithm 1, half heavy, half recent);
//   snapkv:    votes of an observation window at the end of the document, max-pooled over
//              neighbouring keys, + that window (Li et al. 2024, "SnapKV", §4.2). The window is
//              the end of the document, not the question, so the selection is query-agnostic
//              and could be cached before the question.
// Every rule keeps the sinks and a recent window. The selection is made once per sealed
// context; the rows that follow it (question and answer: the tail) are kept at full resolution,
// within the reserve_rows the budget leaves for them, as SEKV does (memory_sekv.h), so that
// every policy is compared at the same fast-tier bytes.
// Deviation: the kept positions are shared by the KV heads (scores summed over every head);
// the papers select per head. For Gemma 3 270M (one KV head) the two are the same.
#pragma once

#include "engine/memory/memory.h"
#include "engine/memory/row_store.h"

#include <memory>
#include <string_view>
#include <vector>

namespace spanscope {

enum class EvictionRule { Streaming, HeavyHitters, SnapKV };

/// "streaming", "h2o", "snapkv".
std::string_view eviction_rule_name(EvictionRule rule);
/// The rule of a policy name; false when `name` is not one of them.
bool eviction_rule_from_name(std::string_view name, EvictionRule& rule);

struct EvictionOptions {
    /// Fast-tier rows of a sealed context as a fraction of its tokens (rows cost the same bytes
    /// in every policy here): keep floor(budget · n) - reserve_rows rows. <= 0 or >= 1: keep
    /// everything (an exact no-op); a context too short to keep more than the sinks is kept
    /// whole as well (it cannot meet the budget; the caller measures and reports that).
    double budget = 0.35;
    int64_t reserve_rows = 128;      ///< rows the budget keeps free for the tail
    int64_t sinks = 4;               ///< first tokens of each sealed context, never evicted
    double recent_share = 0.5;       ///< h2o: share of the non-sink rows that are the most recent
    int64_t recent_rows = 32;        ///< streaming excepted: at least this recent window is kept
    int64_t observation_window = 32; ///< snapkv: the last queries of the context that vote
    int pool_kernel = 7;             ///< snapkv: width of the max-pooling over the votes (odd)
};

/// Rows a sealed context of n tokens keeps under `o` (n when nothing is evicted).
int64_t eviction_rows_to_keep(const EvictionOptions& o, int64_t n);

/// The rows of a sealed context of n tokens that `rule` keeps, as indices in [0, n), ascending:
/// the first min(sinks, keep) rows, a recent window at the end, and the rest by descending
/// `score` ([n]: h2o's accumulated attention or snapkv's pooled votes; unused for streaming),
/// ties to the earlier row. keep >= n returns every row. Throws std::invalid_argument for
/// keep < 1 or a missing score.
std::vector<int64_t> select_rows(EvictionRule rule, const EvictionOptions& o, int64_t n,
                                 int64_t keep, const float* score);

/// y[j] = max(x[j - w/2 .. j + w/2]) within [0, n) (SnapKV's pooling, kernel w, odd).
std::vector<float> max_pool(const float* x, int64_t n, int w);

class EvictionMemory final : public LayerMemory {
public:
    /// capacity: most tokens (the context size). Throws std::invalid_argument for a sliding
    /// layer (the baselines serve the global layers, as SEKV does) or options out of range.
    EvictionMemory(const AttentionShape& shape, int64_t capacity, EvictionRule rule,
                   const EvictionOptions& options);
    std::string_view policy() const override { return eviction_rule_name(rule_); }
    const AttentionShape& shape() const override { return shape_; }
    /// Full rows, appended (positions increasing; f16-rounded as `full`).
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    /// The resident rows in [pos_begin, pos_end) (evicted rows are gone).
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    /// Exact attention over the resident rows; keeps the last observation_window queries and
    /// (rule h2o only) adds each key's attention probability to its accumulated attention, both
    /// for seal().
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    MemoryStats stats() const override;
    bool reports_mass() const override { return true; }
    int64_t n_tokens() const override { return n_stored_; }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;
    bool seals() const override { return true; }
    /// Keep eviction_rows_to_keep() rows of [pos_begin, pos_begin + n) chosen by the rule and
    /// drop the others. Throws std::logic_error when rows of the range were evicted before.
    void seal(const SealRequest& request) override;

    /// The same rows, accumulated attention and observation queries under another rule and
    /// options: one prefill then serves every baseline (the selection happens at seal()).
    /// Throws std::logic_error for h2o from a memory of another rule that holds rows: only an
    /// h2o memory accumulates the attention it ranks by.
    std::unique_ptr<EvictionMemory> with_rule(EvictionRule rule,
                                              const EvictionOptions& options) const;
    EvictionRule rule() const { return rule_; }
    /// Positions of the resident rows, ascending.
    const std::vector<int32_t>& positions() const { return rows_.positions(); }
    /// Accumulated attention of each resident row, summed over the KV heads [rows].
    const std::vector<float>& accumulated_attention() const { return mass_; }

private:
    AttentionShape shape_;
    int64_t capacity_;
    EvictionRule rule_;
    EvictionOptions options_;
    int64_t n_stored_ = 0;
    RowStore rows_;            ///< the resident rows
    std::vector<float> mass_;  ///< accumulated attention [rows], summed over the KV heads
    std::vector<float> obs_q_; ///< the last observation_window queries [m][n_head * head_dim]
    std::vector<int32_t> obs_pos_;
};

} // namespace spanscope
