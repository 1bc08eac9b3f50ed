// Gemma 3's forward pass on a CUDA device (the same computation as models/gemma3.cpp).
#pragma once

#include "engine/model/model.h"

#include <memory>

namespace spanscope::cuda {

/// Upload a loaded CPU Gemma 3 model's weights to device 0 (dequantised to f16, once) and
/// return a model whose forward() runs there; `cpu` is emptied (its file, tokenizer and
/// hyper-parameters move to the result). Exact layers (`full`, `sliding`) keep their rows in
/// device memory (DeviceKvMemory); the layers of a host policy (SEKV, the baselines) exchange
/// queries, keys and values with the host once per layer.
/// Throws ModelError for another architecture, CudaError when there is no device or no room,
/// std::range_error for a weight f16 cannot hold.
std::unique_ptr<Model> load_gemma3(std::unique_ptr<Model> cpu);

} // namespace spanscope::cuda
