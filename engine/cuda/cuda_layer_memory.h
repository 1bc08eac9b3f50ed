// An attention layer's memory whose rows live on the device: the CUDA forward pass stores and
// attends through these calls with device pointers, so no row crosses to the host. Which policy
// answers (full, sliding, sekv) stays the memory's business.
#pragma once

#include "engine/memory/memory.h"

#include <cstdint>

namespace spanscope::cuda {

class DeviceLayerMemory : public LayerMemory {
public:
    /// store() with device pointers: dk, dv [n][n_kv_head][head_dim] fp32 and dpos [n] on the
    /// device, pos [n] the same positions on the host (checked there). Queued on the
    /// context's stream. Throws as store().
    virtual void store_device(const float* dk, const float* dv, const int32_t* dpos,
                              const int32_t* pos, int64_t n) = 0;
    /// attend() with device pointers: dq [n_q][n_head][head_dim], dqpos [n_q] (qpos: the same
    /// positions on the host), dout [n_q][n_head][head_dim]. Queued on the context's stream;
    /// pool serves host work (SEKV's router). Throws as attend().
    virtual void attend_device(const float* dq, const int32_t* dqpos, const int32_t* qpos,
                               int64_t n_q, float* dout, ThreadPool& pool) = 0;
};

} // namespace spanscope::cuda
