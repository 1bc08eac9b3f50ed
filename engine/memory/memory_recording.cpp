#include "engine/memory/memory_recording.h"

#include <stdexcept>

namespace spanscope {

RecordingMemory::RecordingMemory(std::unique_ptr<LayerMemory> inner,
                                 std::function<bool(int32_t)> keep)
    : inner_(std::move(inner)), keep_(std::move(keep)) {
    if (!inner_)
        throw std::invalid_argument("a recording memory needs a memory to wrap");
}

RecordingMemory::RecordingMemory(const RecordingMemory& other)
    : LayerMemory(other), inner_(other.inner_->clone()), keep_(other.keep_),
      positions_(other.positions_), q_(other.q_), out_(other.out_) {}

void RecordingMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    inner_->store(k, v, pos, n);
}

int64_t RecordingMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                   std::vector<float>& v, std::vector<int32_t>& pos) const {
    return inner_->read_rows(pos_begin, pos_end, k, v, pos);
}

void RecordingMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                             ThreadPool& pool) {
    inner_->attend(q, qpos, n_q, out, pool);
    const auto& s = inner_->shape();
    const size_t row = static_cast<size_t>(s.n_head) * static_cast<size_t>(s.head_dim);
    for (int64_t i = 0; i < n_q; ++i) {
        if (keep_ && !keep_(qpos[i]))
            continue;
        positions_.push_back(qpos[i]);
        q_.insert(q_.end(), q + static_cast<size_t>(i) * row, q + static_cast<size_t>(i + 1) * row);
        out_.insert(out_.end(), out + static_cast<size_t>(i) * row,
                    out + static_cast<size_t>(i + 1) * row);
    }
}

std::unique_ptr<LayerMemory> RecordingMemory::clone() const {
    return std::make_unique<RecordingMemory>(*this);
}

void RecordingMemory::clear() {
    inner_->clear();
    clear_recording();
}

int64_t RecordingMemory::find_recorded(int32_t p) const {
    for (size_t i = positions_.size(); i-- > 0;)
        if (positions_[i] == p)
            return static_cast<int64_t>(i);
    return -1;
}

void RecordingMemory::clear_recording() {
    positions_.clear();
    q_.clear();
    out_.clear();
}

} // namespace spanscope
