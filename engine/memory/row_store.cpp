#include "engine/memory/row_store.h"

#include "engine/memory/memory.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope {

void RowStore::append(const float* k, const float* v, const int32_t* pos, int64_t n,
                      int32_t after) {
    const bool bounded = !pos_.empty() || after != INT32_MIN;
    const int32_t last = std::max(pos_.empty() ? INT32_MIN : pos_.back(), after);
    for (int64_t i = 0; i < n; ++i)
        if ((i == 0 && bounded && pos[0] <= last) || (i > 0 && pos[i] <= pos[i - 1]))
            throw std::invalid_argument("positions must increase");
    const size_t old = k_.size();
    k_.insert(k_.end(), k, k + n * width_);
    v_.insert(v_.end(), v, v + n * width_);
    round_through_f16(k_.data() + old, n * width_);
    round_through_f16(v_.data() + old, n * width_);
    pos_.insert(pos_.end(), pos, pos + n);
}

int64_t RowStore::lower_bound(int32_t p) const {
    return std::lower_bound(pos_.begin(), pos_.end(), p) - pos_.begin();
}

int64_t RowStore::read(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                       std::vector<float>& v, std::vector<int32_t>& pos) const {
    const int64_t b = lower_bound(pos_begin);
    const int64_t n = std::max<int64_t>(0, lower_bound(pos_end) - b);
    k.assign(k_.begin() + b * width_, k_.begin() + (b + n) * width_);
    v.assign(v_.begin() + b * width_, v_.begin() + (b + n) * width_);
    pos.assign(pos_.begin() + b, pos_.begin() + b + n);
    return n;
}

void RowStore::compact(const std::vector<char>& keep) {
    if (keep.size() != pos_.size())
        throw std::invalid_argument("RowStore::compact: one flag per row is needed");
    size_t w = 0;
    for (size_t i = 0; i < pos_.size(); ++i) {
        if (!keep[i])
            continue;
        if (w != i) {
            std::copy_n(k_.begin() + static_cast<int64_t>(i) * width_, width_,
                        k_.begin() + static_cast<int64_t>(w) * width_);
            std::copy_n(v_.begin() + static_cast<int64_t>(i) * width_, width_,
                        v_.begin() + static_cast<int64_t>(w) * width_);
            pos_[w] = pos_[i];
        }
        ++w;
    }
    pos_.resize(w);
    k_.resize(w * static_cast<size_t>(width_));
    v_.resize(w * static_cast<size_t>(width_));
    k_.shrink_to_fit();
    v_.shrink_to_fit();
}

void RowStore::clear() {
    k_.clear();
    v_.clear();
    pos_.clear();
}

} // namespace spanscope
