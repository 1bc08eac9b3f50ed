#include "engine/cuda/cuda_device.h"

#include "engine/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

namespace spanscope::cuda {

DeviceInfo device_info() {
    DeviceInfo info;
    cudaRuntimeGetVersion(&info.runtime_version);
    if (cudaDriverGetVersion(&info.driver_version) != cudaSuccess || info.driver_version == 0) {
        info.reason = "no CUDA driver is installed (libcuda.so not found)";
        return info;
    }
    int count = 0;
    const cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0) {
        info.reason = st != cudaSuccess
                          ? std::string("no usable CUDA device: ") + cudaGetErrorString(st)
                          : std::string("no CUDA device");
        cudaGetLastError(); // clear the sticky error of the failed query
        return info;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        info.reason = "cannot read the properties of CUDA device 0";
        cudaGetLastError();
        return info;
    }
    info.name = prop.name;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    if (prop.major * 10 + prop.minor < 75) {
        info.reason = info.name + " has compute capability " + std::to_string(prop.major) + "." +
                      std::to_string(prop.minor) + "; the backend needs 7.5 or later";
        return info;
    }
    if (const cudaError_t st = probe_kernels(); st != cudaSuccess) {
        info.reason = info.name + " (compute capability " + std::to_string(prop.major) + "." +
                      std::to_string(prop.minor) + ") has no code in this build (" +
                      cudaGetErrorName(st) +
                      "): configure with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(prop.major) +
                      std::to_string(prop.minor);
        return info;
    }
    info.available = true;
    return info;
}

} // namespace spanscope::cuda
