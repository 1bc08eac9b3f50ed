// `full` memory: every token's keys and values (the exact reference policy).
#pragma once

#include "engine/memory/memory.h"
#include "engine/memory/row_store.h"

namespace spanscope {

class FullMemory final : public LayerMemory {
public:
    /// capacity: the most tokens it will hold (the context size); store() past it throws.
    FullMemory(const AttentionShape& shape, int64_t capacity);
    std::string_view policy() const override { return "full"; }
    const AttentionShape& shape() const override { return shape_; }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    MemoryStats stats() const override;
    bool reports_mass() const override { return true; }
    int64_t n_tokens() const override { return rows_.size(); }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;

private:
    AttentionShape shape_;
    int64_t capacity_;
    RowStore rows_;
};

} // namespace spanscope
