#include "engine/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <mutex>

namespace spanscope::cuda {
namespace {

template <typename F> bool load(void* lib, const char* name, F& fn, std::string& why) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!fn)
        why = std::string("libcublas has no ") + name;
    return fn != nullptr;
}

} // namespace

const CublasApi* cublas_api(std::string* why) {
    static CublasApi api;
    static std::string error;
    static bool ok = false;
    static std::once_flag once;
    std::call_once(once, [] {
        const std::string versioned = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
        void* lib = dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
        if (!lib) {
            const char* e = dlerror();
            error = "cuBLAS cannot be loaded (" + versioned + "): " + (e ? e : "not found");
            return;
        }
        ok = load(lib, "cublasCreate_v2", api.create, error) &&
             load(lib, "cublasDestroy_v2", api.destroy, error) &&
             load(lib, "cublasSetStream_v2", api.set_stream, error) &&
             load(lib, "cublasSetMathMode", api.set_math_mode, error) &&
             load(lib, "cublasGemmEx", api.gemm_ex, error) &&
             load(lib, "cublasGetStatusName", api.status_name, error) &&
             load(lib, "cublasGetStatusString", api.status_string, error);
    });
    if (!ok && why)
        *why = error;
    return ok ? &api : nullptr;
}

} // namespace spanscope::cuda
