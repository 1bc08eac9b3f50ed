// Owning buffers of device memory (cudaMalloc) and pinned host memory (cudaHostAlloc), and
// events, moved never copied, freed on destruction. Sizes are in elements of T.
#pragma once

#include "engine/cuda/cuda_check.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace spanscope::cuda {

template <typename T> class DeviceBuffer {
public:
    DeviceBuffer() = default;
    /// n elements, uninitialised. Throws CudaError when the device has no room.
    explicit DeviceBuffer(size_t n) { resize(n); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)),
          cap_(std::exchange(o.cap_, 0)) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
            cap_ = std::exchange(o.cap_, 0);
        }
        return *this;
    }
    ~DeviceBuffer() { release(); }

    /// Hold n elements: the contents stay when n fits what is held (no reallocation), else
    /// they are dropped (the buffer is reallocated once the device is idle).
    void resize(size_t n) {
        if (n <= cap_ && p_) {
            n_ = n;
            return;
        }
        release();
        if (n == 0)
            return;
        void* p = nullptr;
        cuda_check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
        p_ = static_cast<T*>(p);
        n_ = cap_ = n;
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    size_t size() const { return n_; }
    size_t bytes() const { return n_ * sizeof(T); }

    /// Copy n host elements to the start of the buffer, complete on return: cudaMemcpy from
    /// pageable memory may return before its DMA lands, and kernels on a non-blocking stream
    /// are not ordered after it, so the device is synchronised.
    void upload(const T* host, size_t n) {
        cuda_check(cudaMemcpy(p_, host, n * sizeof(T), cudaMemcpyHostToDevice), "upload");
        cuda_check(cudaDeviceSynchronize(), "upload: synchronize");
    }

private:
    void release() noexcept {
        // Work queued on any stream may still read the buffer: wait for it before freeing
        // (a reallocation is rare: buffers grow to the largest ubatch once).
        if (p_) {
            cudaDeviceSynchronize();
            cudaFree(p_);
        }
        p_ = nullptr;
        n_ = cap_ = 0;
    }
    T* p_ = nullptr;
    size_t n_ = 0;
    size_t cap_ = 0;
};

/// Page-locked host memory: the source of asynchronous copies to the device (cudaMemcpyAsync
/// from pageable memory is synchronous).
template <typename T> class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(size_t n) {
        if (n == 0)
            return;
        void* p = nullptr;
        cuda_check(cudaHostAlloc(&p, n * sizeof(T), cudaHostAllocDefault), "cudaHostAlloc");
        p_ = static_cast<T*>(p);
        n_ = n;
    }
    PinnedBuffer(const PinnedBuffer&) = delete;
    PinnedBuffer& operator=(const PinnedBuffer&) = delete;
    PinnedBuffer(PinnedBuffer&& o) noexcept
        : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
        if (this != &o) {
            if (p_)
                cudaFreeHost(p_);
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    ~PinnedBuffer() {
        if (p_)
            cudaFreeHost(p_);
    }
    T* data() { return p_; }
    const T* data() const { return p_; }
    size_t size() const { return n_; }
    /// Hold at least n elements, keeping the first size() (a host copy into a larger
    /// allocation). No asynchronous copy may still read the buffer. Throws CudaError.
    void grow(size_t n) {
        if (n <= n_)
            return;
        PinnedBuffer bigger(n);
        if (n_)
            std::memcpy(bigger.p_, p_, n_ * sizeof(T));
        *this = std::move(bigger);
    }

private:
    T* p_ = nullptr;
    size_t n_ = 0;
};

/// A CUDA event without timing (ordering between streams), destroyed with its owner.
class Event {
public:
    Event() {
        cuda_check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreate");
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
        if (this != &o) {
            if (e_)
                cudaEventDestroy(e_);
            e_ = std::exchange(o.e_, nullptr);
        }
        return *this;
    }
    ~Event() {
        if (e_)
            cudaEventDestroy(e_);
    }
    /// Mark the point `stream` has reached. Throws CudaError.
    void record(cudaStream_t stream) { cuda_check(cudaEventRecord(e_, stream), "cudaEventRecord"); }
    /// Make `stream` wait for the last record (no wait if never recorded). Throws CudaError.
    void wait_in(cudaStream_t stream) const {
        cuda_check(cudaStreamWaitEvent(stream, e_, 0), "cudaStreamWaitEvent");
    }

private:
    cudaEvent_t e_ = nullptr;
};

} // namespace spanscope::cuda
