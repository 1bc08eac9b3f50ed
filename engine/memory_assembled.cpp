#include "memory_assembled.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope {

AssembledMemory::AssembledMemory(const AttentionShape& shape, int64_t capacity)
    : shape_(shape), capacity_(capacity),
      width_(static_cast<int64_t>(shape.n_kv_head) * shape.head_dim) {}

void AssembledMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    for (int64_t i = 1; i < n; ++i)
        if (pos[i] <= pos[i - 1])
            throw std::invalid_argument("assembled memory: positions must increase");
    deviation_.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), -1.0f);
    std::vector<float> kr(static_cast<size_t>(width_)), vr(kr.size());
    for (int64_t i = 0; i < n; ++i) {
        std::copy_n(k + i * width_, width_, kr.begin());
        std::copy_n(v + i * width_, width_, vr.begin());
        round_through_f16(kr.data(), width_);
        round_through_f16(vr.data(), width_);
        const auto it = std::lower_bound(pos_.begin(), pos_.end(), pos[i]);
        if (it != pos_.end() && *it == pos[i]) {
            const auto r = it - pos_.begin();
            double diff = 0, norm = 0;
            for (int64_t j = 0; j < width_; ++j) {
                const double old = v_[static_cast<size_t>(r * width_ + j)];
                diff += (vr[static_cast<size_t>(j)] - old) * (vr[static_cast<size_t>(j)] - old);
                norm += old * old;
            }
            deviation_[static_cast<size_t>(i)] =
                static_cast<float>(std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6));
            std::copy(kr.begin(), kr.end(), k_.begin() + r * width_);
            std::copy(vr.begin(), vr.end(), v_.begin() + r * width_);
            ++recomputed_;
            continue;
        }
        if (it != pos_.end())
            throw std::invalid_argument("assembled memory: position " + std::to_string(pos[i]) +
                                        " is neither held nor after the last row held (" +
                                        std::to_string(pos_.back()) + ")");
        if (n_tokens() + 1 > capacity_)
            throw std::length_error("context full: more than " + std::to_string(capacity_) +
                                    " tokens");
        k_.insert(k_.end(), kr.begin(), kr.end());
        v_.insert(v_.end(), vr.begin(), vr.end());
        pos_.push_back(pos[i]);
    }
}

void AssembledMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                             ThreadPool& pool) {
    attention(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), n_tokens(), out, pool,
              /*keys_sorted=*/true);
}

int64_t AssembledMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                   std::vector<float>& v, std::vector<int32_t>& pos) const {
    const auto b = std::lower_bound(pos_.begin(), pos_.end(), pos_begin) - pos_.begin();
    const auto e = std::lower_bound(pos_.begin(), pos_.end(), pos_end) - pos_.begin();
    const int64_t n = std::max<int64_t>(0, e - b);
    k.assign(k_.begin() + b * width_, k_.begin() + (b + n) * width_);
    v.assign(v_.begin() + b * width_, v_.begin() + (b + n) * width_);
    pos.assign(pos_.begin() + b, pos_.begin() + b + n);
    return n;
}

MemoryStats AssembledMemory::stats() const {
    MemoryStats s;
    s.rows_resident = n_tokens();
    s.fast_tier_bytes = n_tokens() * (2 * width_ * static_cast<int64_t>(sizeof(float)) +
                                      static_cast<int64_t>(sizeof(int32_t)));
    s.full_kv_bytes = s.fast_tier_bytes;
    return s;
}

std::unique_ptr<LayerMemory> AssembledMemory::clone() const {
    return std::make_unique<AssembledMemory>(*this);
}

void AssembledMemory::clear() {
    k_.clear();
    v_.clear();
    pos_.clear();
    deviation_.clear();
    recomputed_ = 0;
}

} // namespace spanscope
