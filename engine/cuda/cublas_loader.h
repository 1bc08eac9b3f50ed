// cuBLAS, loaded when the CUDA backend first needs it (dlopen of libcublas.so.<major>) rather
// than linked: the programs then start, and the Debian package installs, on machines without
// the CUDA toolkit; only the functions the backend calls are looked up.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace spanscope::cuda {

struct CublasApi {
    decltype(&cublasCreate_v2) create = nullptr;
    decltype(&cublasDestroy_v2) destroy = nullptr;
    decltype(&cublasSetStream_v2) set_stream = nullptr;
    decltype(&cublasSetMathMode) set_math_mode = nullptr;
    // cublasGemmEx is overloaded in C++ (a legacy cudaDataType compute type): the C one.
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                              const void*, const void*, cudaDataType, int, const void*,
                              cudaDataType, int, const void*, void*, cudaDataType, int,
                              cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
    decltype(&cublasGetStatusName) status_name = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;
};

/// The loaded library's functions, or nullptr with `why` set when libcublas.so.<CUDA major>
/// (then libcublas.so) cannot be loaded or lacks one of them. Loaded once per process.
const CublasApi* cublas_api(std::string* why = nullptr);

} // namespace spanscope::cuda
