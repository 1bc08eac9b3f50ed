// Where the forward pass runs: the CPU (always built) or a CUDA device (built when the CUDA
// toolkit is found, SPANSCOPE_CUDA; engine/cuda/).
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

enum class Backend { Cpu, Cuda };

/// "cpu", "cuda".
const char* backend_name(Backend backend);
/// The backend called `name` ("cpu" or "cuda"). Throws std::invalid_argument otherwise.
Backend backend_from_name(const std::string& name);
/// Every backend name, built or not.
const std::vector<std::string>& backend_names();

/// A backend that cannot run here (not built, no device); the message says why.
class BackendUnavailable : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Whether `backend` can run on this machine, and what it runs on ("NVIDIA H200, 139.8 GiB,
/// compute capability 9.0") or why not ("built without CUDA (SPANSCOPE_CUDA=OFF)", "no CUDA
/// driver is installed").
struct BackendStatus {
    bool usable = false;
    std::string detail;
};
BackendStatus backend_status(Backend backend);

/// Load the model at `path` (Model::load) and put it on `backend`. Throws as Model::load, and
/// BackendUnavailable when the backend cannot run here, ModelError when it does not run this
/// architecture.
std::unique_ptr<Model> load_model(const std::string& path, Backend backend);

} // namespace spanscope
