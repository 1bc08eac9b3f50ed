// The exact memories of attention layers with their rows in device memory: `full` (every row)
// and `sliding` (a ring of the last window − 1 + max_ubatch rows), the device counterparts of
// memory_full.h and memory_sliding.h. Keys and values are held as f16 (memory.h: the exact
// policies keep values at f16 precision), positions as int32.
//
// The host interface of LayerMemory works (copies through the host), so storage, PIC assembly
// and the tests use these memories as any other; the CUDA forward pass calls the device
// interface (store_device / attend_device) and no row leaves the device.
#pragma once

#include "engine/cuda/cuda_buffer.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/cuda_layer_memory.h"

#include <cuda_fp16.h>

#include <memory>
#include <vector>

namespace spanscope::cuda {

class DeviceKvMemory final : public DeviceLayerMemory {
public:
    /// shape.window == 0: `full`, capacity rows (the context size; store past it throws
    /// std::length_error). shape.window = W > 0: `sliding`, a ring of W − 1 + max_ubatch rows
    /// (max_ubatch: the most rows one store brings). Throws CudaError when the device has no
    /// room, std::invalid_argument for a non-positive capacity or ubatch.
    DeviceKvMemory(const AttentionShape& shape, int64_t capacity, int64_t max_ubatch,
                   std::shared_ptr<Context> context);
    std::string_view policy() const override { return ring() ? "sliding" : "full"; }
    const AttentionShape& shape() const override { return shape_; }
    /// k, v: [n][n_kv_head][head_dim] host fp32; pos: [n] increasing, after every row held.
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    /// Bytes as held on the device: f16 keys and values and an int32 position per row.
    MemoryStats stats() const override;
    int64_t n_tokens() const override { return n_stored_; }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;

    void store_device(const float* dk, const float* dv, const int32_t* dpos, const int32_t* pos,
                      int64_t n) override;
    void attend_device(const float* dq, const int32_t* dqpos, const int32_t* qpos, int64_t n_q,
                       float* dout, ThreadPool& pool) override;

    /// The device rows for a kernel that reads them in place: slots [0, n_rows()) of k, v
    /// [capacity][n_kv_head][head_dim] f16 and positions [capacity]; in position order for
    /// `full` (and for `sliding` until the ring wraps).
    const __half* device_k() const { return k_.data(); }
    const __half* device_v() const { return v_.data(); }
    const int32_t* device_pos() const { return pos_.data(); }
    int64_t n_rows() const { return filled(); }

private:
    bool ring() const { return shape_.window > 0; }
    int64_t filled() const { return n_stored_ < capacity_ ? n_stored_ : capacity_; }
    void check_positions(const int32_t* pos, int64_t n) const;

    AttentionShape shape_;
    int64_t capacity_;
    int64_t width_; ///< n_kv_head * head_dim
    std::shared_ptr<Context> ctx_;
    DeviceBuffer<__half> k_, v_;    ///< [capacity][width]
    DeviceBuffer<int32_t> pos_;     ///< [capacity]
    std::vector<int32_t> host_pos_; ///< the same positions on the host, [capacity]
    int64_t n_stored_ = 0;          ///< rows ever stored
    // Staging of the host interface.
    mutable DeviceBuffer<float> stage_a_, stage_b_;
    mutable DeviceBuffer<int32_t> stage_pos_;
};

} // namespace spanscope::cuda
