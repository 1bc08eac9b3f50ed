#include "memory_sliding.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {
// Marks a slot never written; attend() reads only the filled prefix of the ring, so such a
// slot never reaches the attention mask.
constexpr int32_t kEmpty = std::numeric_limits<int32_t>::min();
} // namespace

SlidingMemory::SlidingMemory(const AttentionShape& shape, int64_t max_ubatch)
    : shape_(shape), capacity_(shape.window - 1 + max_ubatch) {
    if (shape.window <= 0 || max_ubatch <= 0)
        throw std::invalid_argument("sliding memory needs a window and a ubatch size > 0");
    const size_t row = static_cast<size_t>(shape_.n_kv_head) * shape_.head_dim;
    k_.assign(capacity_ * row, 0.0f);
    v_.assign(capacity_ * row, 0.0f);
    pos_.assign(capacity_, kEmpty);
}

void SlidingMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    if (n > capacity_ - (shape_.window - 1))
        throw std::length_error("ubatch of " + std::to_string(n) +
                                " tokens is larger than the sliding memory was built for");
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t slot = (n_stored_ + i) % capacity_;
        std::copy(k + i * row, k + (i + 1) * row, k_.begin() + slot * row);
        std::copy(v + i * row, v + (i + 1) * row, v_.begin() + slot * row);
        pos_[slot] = pos[i];
    }
    n_stored_ += n;
}

void SlidingMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                           ThreadPool& pool) {
    // Slots fill in order until the first wrap, so the filled ones are a prefix of the ring.
    // Rows older than the window stay in the ring until overwritten; the mask hides them.
    const int64_t filled = std::min(n_stored_, capacity_);
    attention(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), filled, out, pool);
}

MemoryStats SlidingMemory::stats() const {
    MemoryStats s;
    s.rows_resident = std::min(n_stored_, capacity_);
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    s.fast_tier_bytes = s.rows_resident * (2 * row * static_cast<int64_t>(sizeof(float)) +
                                           static_cast<int64_t>(sizeof(int32_t)));
    return s;
}

std::unique_ptr<LayerMemory> SlidingMemory::clone() const {
    return std::make_unique<SlidingMemory>(*this);
}

void SlidingMemory::clear() {
    n_stored_ = 0;
    std::fill(pos_.begin(), pos_.end(), kEmpty);
}

} // namespace spanscope
