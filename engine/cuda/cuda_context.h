// What every piece of the CUDA backend shares: the stream the forward pass runs on and the
// cuBLAS handle bound to it. Held by shared_ptr, so that a memory outlives no stream it uses.
#pragma once

#include "cuda/cuda_check.h"

#include <memory>

namespace spanscope::cuda {

class Context {
public:
    /// Select device 0, create a non-blocking stream and a cuBLAS handle on it. Throws
    /// CudaError when there is no device.
    Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;
    ~Context();
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t cublas() const { return cublas_; }
    /// The cuBLAS functions (loaded at the first Context).
    const CublasApi& blas() const { return *api_; }
    /// Wait for everything queued on the stream; throws CudaError for a failure of it.
    void sync() const { cuda_check(cudaStreamSynchronize(stream_), "stream synchronize"); }

private:
    cudaStream_t stream_ = nullptr;
    cublasHandle_t cublas_ = nullptr;
    const CublasApi* api_ = nullptr;
};

} // namespace spanscope::cuda
