#include "engine/memory/memory_full.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope {

FullMemory::FullMemory(const AttentionShape& shape, int64_t capacity)
    : shape_(shape), capacity_(capacity),
      rows_(static_cast<int64_t>(shape.n_kv_head) * shape.head_dim) {}

void FullMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    if (n_tokens() + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_tokens() + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    rows_.append(k, v, pos, n);
}

int64_t FullMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                              std::vector<float>& v, std::vector<int32_t>& pos) const {
    return rows_.read(pos_begin, pos_end, k, v, pos);
}

void FullMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                        ThreadPool& pool) {
    // Positions are stored in increasing order (store() requires it), so attention may skip
    // the keys a query block cannot see.
    attention_with_mass(shape_, q, qpos, n_q, rows_.k(), rows_.v(), rows_.positions().data(),
                        n_tokens(), out, pool, mass_sink());
}

MemoryStats FullMemory::stats() const {
    MemoryStats s;
    s.rows_resident = n_tokens();
    s.fast_tier_bytes = rows_.bytes();
    s.full_kv_bytes = s.fast_tier_bytes;
    return s;
}

std::unique_ptr<LayerMemory> FullMemory::clone() const {
    return std::make_unique<FullMemory>(*this);
}

void FullMemory::clear() {
    rows_.clear();
}

} // namespace spanscope
