// Errors of the CUDA runtime and cuBLAS as C++ exceptions: every call the CUDA backend makes
// goes through cuda_check / cublas_check, so that a failure names the call and never goes on
// silently with a half-written buffer.
#pragma once

#include "engine/cuda/cublas_loader.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace spanscope::cuda {

/// A CUDA runtime or cuBLAS call failed; the message names the call and the library's error.
class CudaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Throws CudaError("<what>: <cudaGetErrorString>") unless status is cudaSuccess.
inline void cuda_check(cudaError_t status, const char* what) {
    if (status != cudaSuccess)
        throw CudaError(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                        cudaGetErrorString(status) + ")");
}

/// Throws CudaError("<what>: cuBLAS <status name> (<description>)") unless status is
/// CUBLAS_STATUS_SUCCESS.
inline void cublas_check(cublasStatus_t status, const char* what) {
    if (status == CUBLAS_STATUS_SUCCESS)
        return;
    const CublasApi* api = cublas_api();
    throw CudaError(
        std::string(what) + ": cuBLAS " +
        (api ? std::string(api->status_name(status)) + " (" + api->status_string(status) + ")"
             : "status " + std::to_string(static_cast<int>(status))));
}

/// After a kernel launch: the launch error, if any (bad configuration, no device).
inline void cuda_check_launch(const char* kernel) {
    cuda_check(cudaGetLastError(), kernel);
}

} // namespace spanscope::cuda
