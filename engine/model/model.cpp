#include "engine/model/model.h"

#include "engine/kernels/matmul.h"
#include "engine/memory/memory_eviction.h"
#include "engine/memory/memory_full.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/memory/memory_sliding.h"
#include "engine/model/gemma3.h"
#include "engine/model/granite_hybrid.h"
#include "engine/model/llama_family.h"
#include "engine/model/model_file.h"
#include "engine/model/qwen3next.h"
#include "engine/sekv/memory_sekv.h"

#include <algorithm>
#include <mutex>

namespace spanscope {

namespace {

/// One architecture Model::load reads: its hyper-parameter reader (the file's metadata alone,
/// shared with describe_model_file) and its loader, whose constructor calls the same reader.
struct Architecture {
    const char* name;
    ModelInfo (*read_info)(ModelFile& f);
    std::unique_ptr<Model> (*load)(std::unique_ptr<GgufFile> gguf, const std::string& path);
};

ModelInfo gemma3_info(ModelFile& f) {
    return read_gemma3_hparams(f);
}
ModelInfo llama_family_info(ModelFile& f) {
    return read_llama_family_hparams(f).info;
}
ModelInfo granite_hybrid_info(ModelFile& f) {
    return read_granite_hybrid_hparams(f).info;
}
ModelInfo qwen3next_info(ModelFile& f) {
    return read_qwen3next_hparams(f).info;
}

// Every architecture Model::load reads, in the order its message lists them: the one list,
// which architecture_of and supported_architectures() read. The Llama family's names come from
// kLlamaFamilyArchitectures (llama_family.h), which load_llama_family checks too.
const std::vector<Architecture>& architectures() {
    static const std::vector<Architecture> all = [] {
        std::vector<Architecture> a{{"gemma3", gemma3_info, load_gemma3}};
        for (const char* name : kLlamaFamilyArchitectures)
            a.push_back({name, llama_family_info, load_llama_family});
        a.push_back({"granitehybrid", granite_hybrid_info, load_granite_hybrid});
        a.push_back({"qwen3next", qwen3next_info, load_qwen3next});
        return a;
    }();
    return all;
}

/// general.architecture of `g` and its entry. Throws ModelError as Model::load does: "not a
/// model file: …" without the key, unsupported_architecture_message for another architecture.
const Architecture& architecture_of(const GgufFile& g) {
    if (!g.has("general.architecture"))
        throw ModelError("not a model file: general.architecture is missing");
    const std::string arch = g.get_string("general.architecture");
    for (const auto& a : architectures())
        if (arch == a.name)
            return a;
    throw ModelError(unsupported_architecture_message(arch));
}

} // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
    // The engine parallelises around OpenBLAS with its own pool; OpenBLAS's own threads would
    // oversubscribe the cores whoever calls forward().
    static std::once_flag blas_once;
    std::call_once(blas_once, [] { set_blas_threads(1); });
    auto gguf = GgufFile::open(path);
    const Architecture& a = architecture_of(*gguf);
    return a.load(std::move(gguf), path);
}

ModelInfo read_model_info(const GgufFile& g) {
    const Architecture& a = architecture_of(g);
    ModelFile f(g, a.name);
    return a.read_info(f);
}

const std::vector<std::string>& supported_architectures() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const auto& a : architectures())
            out.emplace_back(a.name);
        return out;
    }();
    return names;
}

bool is_supported_architecture(const std::string& architecture) {
    const auto& names = supported_architectures();
    return std::find(names.begin(), names.end(), architecture) != names.end();
}

std::string unsupported_architecture_message(const std::string& architecture) {
    std::string list;
    for (const auto& n : supported_architectures())
        list += (list.empty() ? "" : ", ") + n;
    return "unsupported model architecture '" + architecture + "' (supported: " + list + ")";
}

const char* layer_kind_name(LayerKind kind) {
    switch (kind) {
    case LayerKind::Attention:
        return "attention";
    case LayerKind::Mamba2:
        return "mamba2";
    case LayerKind::GatedDeltaNet:
        return "gated_deltanet";
    }
    return "?";
}

bool ModelInfo::hybrid() const {
    return std::any_of(layers.begin(), layers.end(),
                       [](const LayerInfo& l) { return l.recurrent(); });
}

std::vector<int> sekv_layers(const ModelInfo& info, const SekvOptions& options) {
    std::vector<int> out;
    if (options.layers.empty()) {
        // A stack of global layers only (the Llama family) keeps its first half full: there
        // SEKV on every layer lost 21 points of needles on SmolLM2 at 4K, on the later half 9
        // (docs/sekv.md, "Many-layer models"); lower layers spread their attention widely (Cai
        // et al. 2024, "PyramidKV"). Where sliding-window or recurrent layers carry the local
        // context (Gemma 3, the hybrids) every global layer is served.
        const int n_layer = static_cast<int>(info.layers.size());
        const bool all_global = std::all_of(info.layers.begin(), info.layers.end(),
                                            [](const LayerInfo& l) { return l.global(); });
        const int first = all_global ? n_layer / 2 : 0;
        for (int il = first; il < n_layer; ++il)
            if (info.layers[static_cast<size_t>(il)].global() &&
                info.layers[static_cast<size_t>(il)].full_rope())
                out.push_back(il);
        return out;
    }
    for (const int il : options.layers) {
        if (il < 0 || il >= static_cast<int>(info.layers.size()))
            throw std::invalid_argument("SEKV layer " + std::to_string(il) +
                                        " does not exist (the model has " +
                                        std::to_string(info.layers.size()) + " layers)");
        const auto& l = info.layers[static_cast<size_t>(il)];
        if (l.recurrent())
            throw std::invalid_argument("layer " + std::to_string(il) + " is a recurrent (" +
                                        layer_kind_name(l.kind) +
                                        ") layer; SEKV serves global attention layers");
        if (l.sliding())
            throw std::invalid_argument("layer " + std::to_string(il) +
                                        " uses a sliding window; SEKV serves global layers");
        if (!l.full_rope())
            throw std::invalid_argument("layer " + std::to_string(il) +
                                        " rotates part of each head (or none); SEKV's summary "
                                        "keys assume full-head RoPE");
        out.push_back(il);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

ModelMemory Model::new_memory(int64_t n_ctx, int64_t max_ubatch, const std::string& global_policy,
                              const SekvOptions* sekv, const EvictionOptions* eviction) const {
    return make_memory(info_, n_ctx, max_ubatch, global_policy, sekv, eviction);
}

void Model::adopt(Model& other) {
    gguf_ = std::move(other.gguf_);
    tokenizer_ = std::move(other.tokenizer_);
    info_ = std::move(other.info_);
    path_ = std::move(other.path_);
}

const std::vector<std::string>& global_policies() {
    static const std::vector<std::string> names{"full",   "sekv", "chunk_summary",
                                                "snapkv", "h2o",  "streaming"};
    return names;
}

ModelMemory make_memory(const ModelInfo& info, int64_t n_ctx, int64_t max_ubatch,
                        const std::string& global_policy, const SekvOptions* sekv,
                        const EvictionOptions* eviction) {
    const auto& names = global_policies();
    if (std::find(names.begin(), names.end(), global_policy) == names.end())
        throw std::invalid_argument("unknown memory policy '" + global_policy +
                                    "' (expected full, sekv, chunk_summary, snapkv, h2o or "
                                    "streaming)");
    SekvOptions so = sekv ? *sekv : SekvOptions{};
    so.summaries_only = global_policy == "chunk_summary";
    const EvictionOptions eo = eviction ? *eviction : EvictionOptions{};
    EvictionRule rule{};
    const bool evicts = eviction_rule_from_name(global_policy, rule);
    std::vector<int> compressed;
    if (global_policy != "full") {
        compressed = sekv_layers(info, so);
        // Never a compressing policy that silently holds everything (tests/README.md, failure mode
        // 12).
        if (compressed.empty())
            throw std::invalid_argument("'" + global_policy +
                                        "' has no layer to serve: the model has no global "
                                        "attention layer with full-head RoPE");
    }
    const size_t n_layer = info.layers.size();
    std::vector<std::unique_ptr<LayerMemory>> layers(n_layer);
    std::vector<std::unique_ptr<RecurrentMemory>> recurrent(n_layer);
    for (int il = 0; il < static_cast<int>(n_layer); ++il) {
        const auto& l = info.layers[static_cast<size_t>(il)];
        auto& slot = layers[static_cast<size_t>(il)];
        if (l.kind == LayerKind::Mamba2)
            recurrent[static_cast<size_t>(il)] = std::make_unique<RecurrentMemory>(l.mamba2);
        else if (l.kind == LayerKind::GatedDeltaNet)
            recurrent[static_cast<size_t>(il)] =
                std::make_unique<RecurrentMemory>(l.gated_deltanet);
        else if (l.sliding())
            slot = std::make_unique<SlidingMemory>(l.attn, max_ubatch);
        else if (!std::binary_search(compressed.begin(), compressed.end(), il))
            slot = std::make_unique<FullMemory>(l.attn, n_ctx);
        else if (evicts)
            slot = std::make_unique<EvictionMemory>(l.attn, n_ctx, rule, eo);
        else if (!l.full_rope())
            throw std::invalid_argument("layer " + std::to_string(il) +
                                        " rotates part of each head (or none); SEKV's summary "
                                        "keys assume full-head RoPE");
        else
            slot = std::make_unique<SekvMemory>(l.attn, n_ctx, l.rope,
                                                sekv_layer_options(so, il, l.attn));
    }
    return ModelMemory(std::move(layers), std::move(recurrent));
}

} // namespace spanscope
