#include "engine/cuda/cuda_context.h"

namespace spanscope::cuda {

Context::Context() {
    cuda_check(cudaSetDevice(0), "cudaSetDevice(0)");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
        cuda_check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking),
                   "cudaStreamCreate (copies)");
        std::string why;
        api_ = cublas_api(&why);
        if (!api_)
            throw CudaError(why);
        cublas_check(api_->create(&cublas_), "cublasCreate");
        cublas_check(api_->set_stream(cublas_, stream_), "cublasSetStream");
        // fp32 results of f16 products, no TF32 shortcut for fp32 data.
        cublas_check(api_->set_math_mode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    } catch (...) {
        if (cublas_)
            api_->destroy(cublas_);
        if (copy_stream_)
            cudaStreamDestroy(copy_stream_);
        cudaStreamDestroy(stream_);
        throw;
    }
}

Context::~Context() {
    cudaStreamSynchronize(copy_stream_);
    cudaStreamSynchronize(stream_);
    api_->destroy(cublas_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
}

} // namespace spanscope::cuda
