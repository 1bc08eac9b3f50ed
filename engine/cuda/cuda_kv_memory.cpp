#include "engine/cuda/cuda_kv_memory.h"

#include "engine/cuda/cuda_attention.h"
#include "engine/cuda/cuda_kernels.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope::cuda {

DeviceKvMemory::DeviceKvMemory(const AttentionShape& shape, int64_t capacity, int64_t max_ubatch,
                               std::shared_ptr<Context> context)
    : shape_(shape), capacity_(shape.window > 0 ? shape.window - 1 + max_ubatch : capacity),
      width_(static_cast<int64_t>(shape.n_kv_head) * shape.head_dim), ctx_(std::move(context)) {
    if (capacity <= 0 || max_ubatch <= 0)
        throw std::invalid_argument("device memory needs a capacity and a ubatch size > 0");
    k_.resize(static_cast<size_t>(capacity_ * width_));
    v_.resize(static_cast<size_t>(capacity_ * width_));
    pos_.resize(static_cast<size_t>(capacity_));
    host_pos_.assign(static_cast<size_t>(capacity_), INT32_MIN);
}

void DeviceKvMemory::check_positions(const int32_t* pos, int64_t n) const {
    int32_t prev =
        n_stored_ > 0 ? host_pos_[static_cast<size_t>((n_stored_ - 1) % capacity_)] : INT32_MIN;
    for (int64_t i = 0; i < n; ++i) {
        if (pos[i] <= prev)
            throw std::invalid_argument("positions must increase");
        prev = pos[i];
    }
    if (ring() && n > capacity_ - (shape_.window - 1))
        throw std::length_error("ubatch of " + std::to_string(n) +
                                " tokens is larger than the sliding memory was built for");
    if (!ring() && n_stored_ + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_stored_ + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
}

void DeviceKvMemory::store_device(const float* dk, const float* dv, const int32_t* dpos,
                                  const int32_t* pos, int64_t n) {
    check_positions(pos, n);
    const int64_t first = n_stored_ % capacity_;
    store_rows(dk, dv, dpos, n, width_, k_.data(), v_.data(), pos_.data(), first, capacity_,
               ctx_->stream());
    for (int64_t i = 0; i < n; ++i)
        host_pos_[static_cast<size_t>((first + i) % capacity_)] = pos[i];
    n_stored_ += n;
}

void DeviceKvMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    // store_device checks the positions before anything is stored.
    const auto cs = ctx_->stream();
    stage_a_.resize(static_cast<size_t>(n * width_));
    stage_b_.resize(static_cast<size_t>(n * width_));
    stage_pos_.resize(static_cast<size_t>(n));
    const size_t bytes = static_cast<size_t>(n * width_) * sizeof(float);
    cuda_check(cudaMemcpyAsync(stage_a_.data(), k, bytes, cudaMemcpyHostToDevice, cs), "store k");
    cuda_check(cudaMemcpyAsync(stage_b_.data(), v, bytes, cudaMemcpyHostToDevice, cs), "store v");
    cuda_check(cudaMemcpyAsync(stage_pos_.data(), pos, static_cast<size_t>(n) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, cs),
               "store pos");
    store_device(stage_a_.data(), stage_b_.data(), stage_pos_.data(), pos, n);
    ctx_->sync(); // the host arrays may go once store() returns
}

void DeviceKvMemory::attend_device(const float* dq, const int32_t* dqpos, const int32_t* /*qpos*/,
                                   int64_t n_q, float* dout, ThreadPool& /*pool*/) {
    // `full` rows are in position order; the ring is too until it wraps.
    const bool sorted = n_stored_ <= capacity_;
    attention(shape_, dq, dqpos, n_q, k_.data(), v_.data(), pos_.data(), filled(), dout, sorted,
              ctx_->stream());
}

void DeviceKvMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                            ThreadPool& pool) {
    const auto cs = ctx_->stream();
    const int64_t qw = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
    stage_a_.resize(static_cast<size_t>(n_q * qw));
    stage_b_.resize(static_cast<size_t>(n_q * qw));
    stage_pos_.resize(static_cast<size_t>(n_q));
    cuda_check(cudaMemcpyAsync(stage_a_.data(), q, static_cast<size_t>(n_q * qw) * sizeof(float),
                               cudaMemcpyHostToDevice, cs),
               "attend q");
    cuda_check(cudaMemcpyAsync(stage_pos_.data(), qpos, static_cast<size_t>(n_q) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, cs),
               "attend qpos");
    attend_device(stage_a_.data(), stage_pos_.data(), qpos, n_q, stage_b_.data(), pool);
    cuda_check(cudaMemcpyAsync(out, stage_b_.data(), static_cast<size_t>(n_q * qw) * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "attend out");
    ctx_->sync();
}

int64_t DeviceKvMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                  std::vector<float>& v, std::vector<int32_t>& pos) const {
    k.clear();
    v.clear();
    pos.clear();
    const int64_t count = filled();
    if (count == 0)
        return 0;
    const auto cs = ctx_->stream();
    stage_a_.resize(static_cast<size_t>(count * width_));
    stage_b_.resize(static_cast<size_t>(count * width_));
    load_rows(k_.data(), v_.data(), count, width_, stage_a_.data(), stage_b_.data(), cs);
    std::vector<float> all_k(static_cast<size_t>(count * width_)), all_v(all_k.size());
    const size_t bytes = all_k.size() * sizeof(float);
    cuda_check(cudaMemcpyAsync(all_k.data(), stage_a_.data(), bytes, cudaMemcpyDeviceToHost, cs),
               "read k");
    cuda_check(cudaMemcpyAsync(all_v.data(), stage_b_.data(), bytes, cudaMemcpyDeviceToHost, cs),
               "read v");
    ctx_->sync();
    // Slots in storage order, oldest first: positions increase along it.
    for (int64_t i = n_stored_ - count; i < n_stored_; ++i) {
        const int64_t slot = i % capacity_;
        const int32_t p = host_pos_[static_cast<size_t>(slot)];
        if (p < pos_begin || p >= pos_end)
            continue;
        k.insert(k.end(), all_k.begin() + slot * width_, all_k.begin() + (slot + 1) * width_);
        v.insert(v.end(), all_v.begin() + slot * width_, all_v.begin() + (slot + 1) * width_);
        pos.push_back(p);
    }
    return static_cast<int64_t>(pos.size());
}

MemoryStats DeviceKvMemory::stats() const {
    const int64_t row =
        2 * width_ * static_cast<int64_t>(sizeof(__half)) + static_cast<int64_t>(sizeof(int32_t));
    MemoryStats s;
    s.rows_resident = filled();
    s.fast_tier_bytes = s.rows_resident * row;
    s.full_kv_bytes = n_stored_ * row;
    return s;
}

std::unique_ptr<LayerMemory> DeviceKvMemory::clone() const {
    auto c = std::make_unique<DeviceKvMemory>(shape_, capacity_,
                                              ring() ? capacity_ - (shape_.window - 1) : 1, ctx_);
    const auto cs = ctx_->stream();
    cuda_check(cudaMemcpyAsync(c->k_.data(), k_.data(), k_.bytes(), cudaMemcpyDeviceToDevice, cs),
               "clone k");
    cuda_check(cudaMemcpyAsync(c->v_.data(), v_.data(), v_.bytes(), cudaMemcpyDeviceToDevice, cs),
               "clone v");
    cuda_check(
        cudaMemcpyAsync(c->pos_.data(), pos_.data(), pos_.bytes(), cudaMemcpyDeviceToDevice, cs),
        "clone pos");
    c->host_pos_ = host_pos_;
    c->n_stored_ = n_stored_;
    return c;
}

void DeviceKvMemory::clear() {
    n_stored_ = 0;
    std::fill(host_pos_.begin(), host_pos_.end(), INT32_MIN);
}

} // namespace spanscope::cuda
