// `sliding` memory: a ring buffer of the last W keys/values, exact for sliding-window
// attention layers (Gemma 3 local layers, window 512; Beltagy et al. 2020, Longformer §3).
#pragma once

#include "engine/memory/memory.h"

namespace spanscope {

class SlidingMemory final : public LayerMemory {
public:
    /// shape.window = W > 0. max_ubatch: the most tokens one store() brings; the ring holds
    /// W - 1 + max_ubatch rows so that the first query of a ubatch still sees its W - 1
    /// predecessors (W rows between ubatches, as decode needs).
    SlidingMemory(const AttentionShape& shape, int64_t max_ubatch);
    std::string_view policy() const override { return "sliding"; }
    const AttentionShape& shape() const override { return shape_; }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    MemoryStats stats() const override;
    int64_t n_tokens() const override { return n_stored_; }
    int64_t capacity() const { return capacity_; }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;

private:
    AttentionShape shape_;
    int64_t capacity_;
    int64_t n_stored_ = 0;     ///< tokens ever stored
    std::vector<float> k_, v_; ///< ring: [capacity][n_kv_head * head_dim]
    std::vector<int32_t> pos_; ///< ring positions; INT32_MIN marks an empty slot
    // Scratch: the ring unrolled into position order for attend() (not part of the state).
    std::vector<float> lin_k_, lin_v_;
    std::vector<int32_t> lin_pos_;
};

} // namespace spanscope
