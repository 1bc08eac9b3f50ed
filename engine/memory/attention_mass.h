// The attention mass of one query over the context's positions: where an answer token looked,
// summed over the global layers and their query heads (the sources of an answer,
// docs/architecture.md, Sources). A memory that reports mass (LayerMemory::reports_mass) adds
// what its attention gave each position; a row that stands for several positions (a SEKV
// summary, an expanded span's rebuilt rows) adds its mass to the range it stands for, spread
// evenly over it.
#pragma once

#include "engine/kernels/attention.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace spanscope {

class AttentionMass {
public:
    /// Forget what was added; positions [0, n_positions) may be added to from now on, and only
    /// the query at `query_pos` counts (wants()).
    void reset(int64_t n_positions, int32_t query_pos);
    /// The query whose attention counts (-1 after construction: none).
    int32_t query_pos() const { return query_pos_; }
    /// True for the query at query_pos().
    bool wants(int32_t qpos) const { return qpos == query_pos_ && query_pos_ >= 0; }
    /// Add `mass` (attention probability, summed over the heads that gave it) to position
    /// `pos`. Positions outside [0, n_positions) are ignored (they are not context).
    void add(int32_t pos, double mass);
    /// Add `mass` spread evenly over the positions [begin, end) (a row standing for them);
    /// clipped to [0, n_positions); nothing for an empty range.
    void add_range(int32_t begin, int32_t end, double mass);
    /// Mass per range of positions: ranges [n] of [begin, end), any order, may overlap;
    /// returns [n], each the sum over its positions. O(n_positions + n).
    std::vector<double> over_ranges(const std::vector<std::pair<int32_t, int32_t>>& ranges) const;
    /// Everything added (over every position).
    double total() const { return total_; }

private:
    int32_t query_pos_ = -1;
    std::vector<double> point_;  ///< [n_positions] mass added to single positions
    std::vector<double> spread_; ///< [n_positions + 1] difference array of the per-position
                                 ///< density of the ranges' mass
    double total_ = 0;
};

/// attention() (kernels/attention.h) over rows whose positions kpos are non-decreasing; when
/// `mass` is set and one of the queries is mass->query_pos(), that query's attention
/// probabilities, summed over its query heads, are added to `mass` at the rows' positions.
/// With one query the probabilities come from the same pass; with several, that query is
/// attended once more alone (its output discarded), so the others are computed as without.
/// Shapes as attention().
void attention_with_mass(const AttentionShape& shape, const float* q, const int32_t* qpos,
                         int64_t n_q, const float* k, const float* v, const int32_t* kpos,
                         int64_t n_kv, float* out, ThreadPool& pool, AttentionMass* mass);

} // namespace spanscope
