#include "model.h"

#include "matmul.h"
#include "memory_full.h"
#include "memory_sliding.h"
#include "models/gemma3.h"

#include <mutex>

namespace spanscope {

std::unique_ptr<Model> Model::load(const std::string& path) {
    // The engine parallelises around OpenBLAS with its own pool; OpenBLAS's own threads would
    // oversubscribe the cores whoever calls forward().
    static std::once_flag blas_once;
    std::call_once(blas_once, [] { set_blas_threads(1); });
    auto gguf = GgufFile::open(path);
    if (!gguf->has("general.architecture"))
        throw ModelError("not a model file: general.architecture is missing");
    const std::string arch = gguf->get_string("general.architecture");
    if (arch == "gemma3")
        return load_gemma3(std::move(gguf), path);
    throw ModelError("unsupported model architecture '" + arch + "' (supported: gemma3)");
}

ModelMemory make_memory(const ModelInfo& info, int64_t n_ctx, int64_t max_ubatch,
                        const std::string& global_policy) {
    if (global_policy != "full")
        throw std::invalid_argument("unknown memory policy '" + global_policy + "'");
    std::vector<std::unique_ptr<LayerMemory>> layers;
    for (const auto& l : info.layers) {
        if (l.sliding())
            layers.push_back(std::make_unique<SlidingMemory>(l.attn, max_ubatch));
        else
            layers.push_back(std::make_unique<FullMemory>(l.attn, n_ctx));
    }
    return ModelMemory(std::move(layers));
}

} // namespace spanscope
