// `assembled` memory: the rows of documents prefilled on their own, put side by side at new
// positions, in which a recompute pass may overwrite rows (position-independent caching,
// docs/linearkv.md). Every row of the layer is held, for global and sliding-window layers alike
// (a sliding layer masks by its window, so a token recomputed in the middle of a document sees
// exactly the rows its window covers). Overwriting a row records how far its value vector
// moved: CacheBlend's selection signal (Yao et al. 2025, "CacheBlend: Fast Large Language
// Model Serving for RAG with Cached Knowledge Fusion", §4.2, KV deviation).
#pragma once

#include "engine/memory/memory.h"

#include <cstdint>
#include <vector>

namespace spanscope {

class AssembledMemory final : public LayerMemory {
public:
    /// capacity: the most rows it will hold (the context size).
    AssembledMemory(const AttentionShape& shape, int64_t capacity);
    std::string_view policy() const override { return "assembled"; }
    const AttentionShape& shape() const override { return shape_; }
    /// Rows at positions already held replace those rows (counted as recomputed, their value
    /// deviation recorded); the others are inserted in position order (a section restored
    /// with only its last rows in a sliding layer gets the recomputed ones in between).
    /// k, v: [n][n_kv_head][head_dim], rounded through f16 as the exact memories round them;
    /// pos: [n] increasing. Throws std::invalid_argument for positions out of order,
    /// std::length_error past the capacity.
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    /// Causal attention by position, within shape.window for sliding layers.
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    MemoryStats stats() const override;
    bool reports_mass() const override { return true; }
    int64_t n_tokens() const override { return static_cast<int64_t>(pos_.size()); }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;

    /// For each row of the last store() call: the relative L2 change of its value vector over
    /// all kv heads, ‖v_new − v_old‖ / max(‖v_old‖, 1e-6) (dimensionless), or −1 for a row that
    /// was new. [n of that call]. (CacheBlend ranks by the absolute deviation; relative keeps
    /// rows with large values from dominating. Within one layer the two orders mostly agree.)
    const std::vector<float>& last_deviation() const { return deviation_; }
    /// Rows replaced by store() since construction or clear() (a row replaced twice counts
    /// twice; new rows are not counted).
    int64_t rows_recomputed() const { return recomputed_; }
    /// True when every position of [begin, end) is held.
    bool holds(int32_t begin, int32_t end) const;

private:
    AttentionShape shape_;
    int64_t capacity_;
    int64_t width_;
    std::vector<float> k_, v_; ///< [rows][width], positions increasing
    std::vector<int32_t> pos_;
    std::vector<float> deviation_;
    int64_t recomputed_ = 0;
};

} // namespace spanscope
