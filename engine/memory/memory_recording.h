// A recording decorator of a layer's memory: it forwards everything to the memory it wraps
// (any policy) and keeps a copy of the queries each attend() receives and of the outputs the
// wrapped memory returns, at the query positions asked for. The model never learns of it: it
// asks "the memory" for attention as always (memory.h). SEKV's zoom recordings (zoom_recorder.h)
// take full attention's queries and outputs this way.
#pragma once

#include "engine/memory/memory.h"

#include <functional>
#include <memory>

namespace spanscope {

class RecordingMemory final : public LayerMemory {
public:
    /// inner: the memory that answers (non-null, else std::invalid_argument); keep: the query
    /// positions to record (empty: every query).
    explicit RecordingMemory(std::unique_ptr<LayerMemory> inner,
                             std::function<bool(int32_t)> keep = {});
    RecordingMemory(const RecordingMemory& other);

    /// The wrapped memory's name: the decorator is invisible to statistics by policy.
    std::string_view policy() const override { return inner_->policy(); }
    const AttentionShape& shape() const override { return inner_->shape(); }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    /// The wrapped memory's attention; then, for each query i whose qpos[i] is kept, appends
    /// qpos[i], q[i] and out[i] to the recording.
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    MemoryStats stats() const override { return inner_->stats(); }
    bool seals() const override { return inner_->seals(); }
    bool needs_segmentation() const override { return inner_->needs_segmentation(); }
    void seal(const SealRequest& request) override { inner_->seal(request); }
    const std::vector<ZoomHead>* last_zoom() const override { return inner_->last_zoom(); }
    bool reports_mass() const override { return inner_->reports_mass(); }
    /// The wrapped memory's sink.
    void set_mass_sink(AttentionMass* sink) override { inner_->set_mass_sink(sink); }
    int64_t n_tokens() const override { return inner_->n_tokens(); }
    /// A copy of the wrapped memory and of the recording.
    std::unique_ptr<LayerMemory> clone() const override;
    /// Clears the wrapped memory and the recording.
    void clear() override;

    const LayerMemory& inner() const { return *inner_; }
    /// Recorded queries in the order attended: positions [n], q and out [n][n_head][head_dim].
    const std::vector<int32_t>& recorded_positions() const { return positions_; }
    const std::vector<float>& recorded_q() const { return q_; }
    const std::vector<float>& recorded_out() const { return out_; }
    /// Index of the last recorded query at position p, or -1.
    int64_t find_recorded(int32_t p) const;
    void clear_recording();

private:
    std::unique_ptr<LayerMemory> inner_;
    std::function<bool(int32_t)> keep_;
    std::vector<int32_t> positions_;
    std::vector<float> q_, out_;
};

} // namespace spanscope
