#include "engine/memory/memory_sliding.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {
// Below this many queries attend() reads the ring as it is instead of unrolling it.
constexpr int64_t kUnrollMinQueries = 32;
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
    for (int64_t i = 0; i < n; ++i) {
        const int32_t prev =
            i > 0 ? pos[i - 1] : (n_stored_ > 0 ? pos_[(n_stored_ - 1) % capacity_] : INT32_MIN);
        if (pos[i] <= prev)
            throw std::invalid_argument("positions must increase");
    }
    if (n > capacity_ - (shape_.window - 1))
        throw std::length_error("ubatch of " + std::to_string(n) +
                                " tokens is larger than the sliding memory was built for");
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    for (int64_t i = 0; i < n; ++i) {
        const int64_t slot = (n_stored_ + i) % capacity_;
        std::copy(k + i * row, k + (i + 1) * row, k_.begin() + slot * row);
        std::copy(v + i * row, v + (i + 1) * row, v_.begin() + slot * row);
        round_through_f16(k_.data() + slot * row, row);
        round_through_f16(v_.data() + slot * row, row);
        pos_[slot] = pos[i];
    }
    n_stored_ += n;
}

int64_t SlidingMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                 std::vector<float>& v, std::vector<int32_t>& pos) const {
    const int64_t filled = std::min(n_stored_, capacity_);
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    k.clear();
    v.clear();
    pos.clear();
    // Slots in storage order, oldest first: positions increase along it.
    for (int64_t i = n_stored_ - filled; i < n_stored_; ++i) {
        const int64_t slot = i % capacity_;
        if (pos_[slot] < pos_begin || pos_[slot] >= pos_end)
            continue;
        k.insert(k.end(), k_.begin() + slot * row, k_.begin() + (slot + 1) * row);
        v.insert(v.end(), v_.begin() + slot * row, v_.begin() + (slot + 1) * row);
        pos.push_back(pos_[slot]);
    }
    return static_cast<int64_t>(pos.size());
}

void SlidingMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                           ThreadPool& pool) {
    // Unroll the ring into position order (oldest slot first) so that attention can skip, per
    // query block, the rows outside its window; rows older than the window are masked anyway.
    const int64_t filled = std::min(n_stored_, capacity_);
    const int64_t oldest = n_stored_ <= capacity_ ? 0 : n_stored_ % capacity_;
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    if (oldest == 0 || n_q < kUnrollMinQueries) {
        // Few queries (decode): reading the whole ring is cheaper than unrolling it.
        if (oldest != 0) {
            attention(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), filled, out, pool);
            return;
        }
        attention(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), filled, out, pool,
                  /*keys_sorted=*/true);
        return;
    }
    lin_k_.resize(k_.size());
    lin_v_.resize(v_.size());
    lin_pos_.resize(pos_.size());
    const int64_t tail = capacity_ - oldest; // slots [oldest, capacity) come first
    std::copy(k_.begin() + oldest * row, k_.end(), lin_k_.begin());
    std::copy(k_.begin(), k_.begin() + oldest * row, lin_k_.begin() + tail * row);
    std::copy(v_.begin() + oldest * row, v_.end(), lin_v_.begin());
    std::copy(v_.begin(), v_.begin() + oldest * row, lin_v_.begin() + tail * row);
    std::copy(pos_.begin() + oldest, pos_.end(), lin_pos_.begin());
    std::copy(pos_.begin(), pos_.begin() + oldest, lin_pos_.begin() + tail);
    attention(shape_, q, qpos, n_q, lin_k_.data(), lin_v_.data(), lin_pos_.data(), filled, out,
              pool, /*keys_sorted=*/true);
}

MemoryStats SlidingMemory::stats() const {
    MemoryStats s;
    s.rows_resident = std::min(n_stored_, capacity_);
    const int64_t row = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    s.fast_tier_bytes = s.rows_resident * (2 * row * static_cast<int64_t>(sizeof(float)) +
                                           static_cast<int64_t>(sizeof(int32_t)));
    s.full_kv_bytes = n_stored_ * (2 * row * static_cast<int64_t>(sizeof(float)) +
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
