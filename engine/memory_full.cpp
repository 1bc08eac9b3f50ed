#include "memory_full.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope {

FullMemory::FullMemory(const AttentionShape& shape, int64_t capacity)
    : shape_(shape), capacity_(capacity) {}

void FullMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    if (n_tokens() + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_tokens() + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    for (int64_t i = 0; i < n; ++i)
        if ((i == 0 && !pos_.empty() && pos[0] <= pos_.back()) || (i > 0 && pos[i] <= pos[i - 1]))
            throw std::invalid_argument("positions must increase");
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    const size_t old = k_.size();
    k_.insert(k_.end(), k, k + n * row);
    v_.insert(v_.end(), v, v + n * row);
    round_through_f16(k_.data() + old, n * row);
    round_through_f16(v_.data() + old, n * row);
    pos_.insert(pos_.end(), pos, pos + n);
}

int64_t FullMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                              std::vector<float>& v, std::vector<int32_t>& pos) const {
    const auto b = std::lower_bound(pos_.begin(), pos_.end(), pos_begin) - pos_.begin();
    const auto e = std::lower_bound(pos_.begin(), pos_.end(), pos_end) - pos_.begin();
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    const int64_t n = std::max<int64_t>(0, e - b);
    k.assign(k_.begin() + b * row, k_.begin() + (b + n) * row);
    v.assign(v_.begin() + b * row, v_.begin() + (b + n) * row);
    pos.assign(pos_.begin() + b, pos_.begin() + b + n);
    return n;
}

void FullMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                        ThreadPool& pool) {
    // Positions are stored in increasing order (store() requires it), so attention may skip
    // the keys a query block cannot see.
    attention(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), n_tokens(), out, pool,
              /*keys_sorted=*/true);
}

MemoryStats FullMemory::stats() const {
    MemoryStats s;
    s.rows_resident = n_tokens();
    s.fast_tier_bytes = static_cast<int64_t>((k_.size() + v_.size()) * sizeof(float) +
                                             pos_.size() * sizeof(int32_t));
    s.full_kv_bytes = s.fast_tier_bytes;
    return s;
}

std::unique_ptr<LayerMemory> FullMemory::clone() const {
    return std::make_unique<FullMemory>(*this);
}

void FullMemory::clear() {
    k_.clear();
    v_.clear();
    pos_.clear();
}

} // namespace spanscope
