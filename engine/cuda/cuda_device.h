// The CUDA device the backend runs on (device 0), and whether one is there at all.
#pragma once

#include <cstdint>
#include <string>

namespace spanscope::cuda {

struct DeviceInfo {
    bool available = false;
    std::string reason;    ///< why not, when !available (no driver, no device, ...)
    std::string name;      ///< e.g. "NVIDIA H200"
    int compute_major = 0; ///< compute capability
    int compute_minor = 0;
    int64_t memory_bytes = 0; ///< total device memory
    int runtime_version = 0;  ///< cudaRuntimeGetVersion, e.g. 13000
    int driver_version = 0;   ///< cudaDriverGetVersion (0 without a driver)
};

/// Probe device 0 without throwing: no driver, no device, a device below compute capability
/// 7.5, or one this build has no kernel code for give available = false with the reason.
DeviceInfo device_info();

} // namespace spanscope::cuda
