#include "engine/linearkv/memory_assembled.h"

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
    std::vector<float> kr(static_cast<size_t>(n * width_)), vr(kr.size());
    std::copy_n(k, n * width_, kr.begin());
    std::copy_n(v, n * width_, vr.begin());
    round_through_f16(kr.data(), n * width_);
    round_through_f16(vr.data(), n * width_);
    // Which rows are new, and whether they fit, before anything changes (a refused store
    // leaves the memory as it was).
    std::vector<int64_t> fresh; // rows of this call at positions not held
    std::vector<int64_t> held(static_cast<size_t>(std::max<int64_t>(n, 0)), -1);
    for (int64_t i = 0; i < n; ++i) {
        const auto it = std::lower_bound(pos_.begin(), pos_.end(), pos[i]);
        if (it == pos_.end() || *it != pos[i])
            fresh.push_back(i);
        else
            held[static_cast<size_t>(i)] = it - pos_.begin();
    }
    const auto m = static_cast<int64_t>(fresh.size());
    if (n_tokens() + m > capacity_)
        throw std::length_error("context full: " + std::to_string(n_tokens() + m) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t r = held[static_cast<size_t>(i)];
        if (r < 0)
            continue;
        const float* nv = vr.data() + i * width_;
        float* ov = v_.data() + r * width_;
        double diff = 0, norm = 0;
        for (int64_t j = 0; j < width_; ++j) {
            diff += (static_cast<double>(nv[j]) - ov[j]) * (static_cast<double>(nv[j]) - ov[j]);
            norm += static_cast<double>(ov[j]) * ov[j];
        }
        deviation_[static_cast<size_t>(i)] =
            static_cast<float>(std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6));
        std::copy_n(kr.data() + i * width_, width_, k_.data() + r * width_);
        std::copy_n(nv, width_, ov);
        ++recomputed_;
    }
    if (fresh.empty())
        return;
    if (pos_.empty() || pos[fresh.front()] > pos_.back()) {
        // Every new row comes after those held (a prefill, the question, a decoded token):
        // append in place.
        if (k_.capacity() < static_cast<size_t>((n_tokens() + m) * width_)) {
            const auto want = static_cast<size_t>(
                std::min(capacity_, std::max(n_tokens() + m, 2 * n_tokens())) * width_);
            k_.reserve(want);
            v_.reserve(want);
        }
        for (const int64_t i : fresh) {
            k_.insert(k_.end(), kr.begin() + i * width_, kr.begin() + (i + 1) * width_);
            v_.insert(v_.end(), vr.begin() + i * width_, vr.begin() + (i + 1) * width_);
            pos_.push_back(pos[i]);
        }
        return;
    }
    // Merge the new rows into the held ones in one pass (both in position order).
    const int64_t old = n_tokens();
    std::vector<float> k2(static_cast<size_t>((old + m) * width_)), v2(k2.size());
    std::vector<int32_t> p2(static_cast<size_t>(old + m));
    int64_t a = 0, b = 0;
    for (int64_t out = 0; out < old + m; ++out) {
        const bool take_new = b < m && (a >= old || pos[fresh[static_cast<size_t>(b)]] <
                                                        pos_[static_cast<size_t>(a)]);
        const float* ks =
            take_new ? kr.data() + fresh[static_cast<size_t>(b)] * width_ : k_.data() + a * width_;
        const float* vs =
            take_new ? vr.data() + fresh[static_cast<size_t>(b)] * width_ : v_.data() + a * width_;
        std::copy_n(ks, width_, k2.data() + out * width_);
        std::copy_n(vs, width_, v2.data() + out * width_);
        p2[static_cast<size_t>(out)] =
            take_new ? pos[fresh[static_cast<size_t>(b++)]] : pos_[static_cast<size_t>(a++)];
    }
    k_ = std::move(k2);
    v_ = std::move(v2);
    pos_ = std::move(p2);
}

void AssembledMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                             ThreadPool& pool) {
    attention_with_mass(shape_, q, qpos, n_q, k_.data(), v_.data(), pos_.data(), n_tokens(), out,
                        pool, mass_sink());
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

bool AssembledMemory::holds(int32_t begin, int32_t end) const {
    if (end <= begin)
        return true;
    const auto b = std::lower_bound(pos_.begin(), pos_.end(), begin);
    const auto e = std::lower_bound(pos_.begin(), pos_.end(), end);
    return e - b == end - begin; // positions are distinct and increasing
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
