// What every piece of the CUDA backend shares: the stream the forward pass runs on, the cuBLAS
// handle bound to it, and a second stream for copies that overlap the computation (SEKV's
// fetches of span factors). Held by shared_ptr, so that a memory outlives no stream it uses.
#pragma once

#include "engine/cuda/cuda_check.h"

#include <memory>

namespace spanscope::cuda {

class Context {
public:
    /// Select device 0, create two non-blocking streams and a cuBLAS handle on the first. Throws
    /// CudaError when there is no device.
    Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context();
    cudaStream_t stream() const { return stream_; }
    /// The copy stream: host-to-device copies ordered against stream() by events only.
    cudaStream_t copy_stream() const { return copy_stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    /// The cuBLAS functions (loaded at the first Context).
    const CublasApi& blas() const { return *api_; }
    /// Wait for everything queued on the stream; throws CudaError for a failure of it.
    void sync() const { cuda_check(cudaStreamSynchronize(stream_), "stream synchronize"); }

private:
    cudaStream_t stream_ = nullptr;
    cudaStream_t copy_stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    const CublasApi* api_ = nullptr;
};

} // namespace spanscope::cuda
