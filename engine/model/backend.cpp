#include "engine/model/backend.h"

#include <thread>

#ifdef SPANSCOPE_HAVE_CUDA
#include "engine/cuda/cublas_loader.h"
#include "engine/cuda/cuda_device.h"
#include "engine/cuda/cuda_gemma3.h"

#include <cstdio>
#endif

namespace spanscope {

const char* backend_name(Backend backend) {
    return backend == Backend::Cuda ? "cuda" : "cpu";
}

const std::vector<std::string>& backend_names() {
    static const std::vector<std::string> names{"cpu", "cuda"};
    return names;
}

Backend backend_from_name(const std::string& name) {
    if (name == "cpu")
        return Backend::Cpu;
    if (name == "cuda")
        return Backend::Cuda;
    throw std::invalid_argument("unknown backend '" + name + "' (expected cpu or cuda)");
}

BackendStatus backend_status(Backend backend) {
    if (backend == Backend::Cpu)
        return {true, std::to_string(std::thread::hardware_concurrency()) + " CPU threads"};
#ifdef SPANSCOPE_HAVE_CUDA
    const auto d = cuda::device_info();
    if (!d.available)
        return {false, d.reason};
    std::string why;
    if (!cuda::cublas_api(&why))
        return {false, why};
    char detail[256];
    std::snprintf(detail, sizeof detail, "%s, %.1f GiB, compute capability %d.%d", d.name.c_str(),
                  static_cast<double>(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0), d.compute_major,
                  d.compute_minor);
    return {true, detail};
#else
    return {false, "built without CUDA (SPANSCOPE_CUDA=OFF or no nvcc at configure time)"};
#endif
}

std::unique_ptr<Model> load_model(const std::string& path, Backend backend) {
    if (backend == Backend::Cpu)
        return Model::load(path);
    const BackendStatus status = backend_status(backend);
    if (!status.usable)
        throw BackendUnavailable(std::string("the ") + backend_name(backend) +
                                 " backend cannot run here: " + status.detail);
#ifdef SPANSCOPE_HAVE_CUDA
    return cuda::load_gemma3(Model::load(path));
#else
    return nullptr; // unreachable: backend_status said not usable
#endif
}

} // namespace spanscope
