#include "engine/model/model_summary.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/model/model_file.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace spanscope {

namespace {

/// Each layer's key/value heads (0: a recurrent layer) and whether it is a sliding-window layer,
/// by the rules of the architecture's loader (gemma3.cpp, llama_family.cpp, granite_hybrid.cpp,
/// qwen3next.cpp), from metadata only. Throws ModelError naming the key that is missing or out
/// of range.
struct LayerPlan {
    std::vector<int64_t> kv_heads;
    std::vector<bool> sliding;
    int64_t window = 0;
    int64_t key_length = 0, value_length = 0;
};

LayerPlan plan_layers(const ModelFile& f, int n_layer, int64_t n_ctx) {
    const std::string& arch = f.arch();
    const int64_t n_embd = f.need_int("embedding_length", 1, 1 << 20);
    LayerPlan p;
    p.sliding.assign(static_cast<size_t>(n_layer), false);
    int64_t first_heads = 0;
    if (arch == "gemma3") {
        p.kv_heads.assign(static_cast<size_t>(n_layer), f.need_int("attention.head_count_kv"));
        p.key_length = f.need_int("attention.key_length");
        p.value_length = f.need_int("attention.value_length");
        // Gemma 3 report §2: every pattern-th layer is global, the others slide.
        p.window = f.need_int("attention.sliding_window", 1, n_ctx);
        const int64_t pattern = f.opt_int("attention.sliding_window_pattern", 6);
        for (int il = 0; il < n_layer; ++il)
            p.sliding[static_cast<size_t>(il)] = (il + 1) % pattern != 0;
        return p;
    }
    if (arch == "qwen3next") {
        first_heads = f.need_int("attention.head_count", 1, 4096);
        const int64_t kv = f.need_int("attention.head_count_kv", 1, 4096);
        std::vector<bool> recurrent;
        if (f.has("attention.recurrent_layers")) {
            recurrent = f.bool_per_layer("attention.recurrent_layers", n_layer);
        } else {
            const int64_t interval = f.opt_int("full_attention_interval", 4, 1, 4096);
            for (int il = 0; il < n_layer; ++il)
                recurrent.push_back((il + 1) % interval != 0);
        }
        for (const bool r : recurrent)
            p.kv_heads.push_back(r ? 0 : kv);
    } else {
        // llama, qwen2, qwen3 and granitehybrid: head counts per layer or one for all; a
        // granitehybrid layer with 0 key/value heads is a Mamba-2 layer (llama.cpp's rule).
        const bool hybrid = arch == "granitehybrid";
        const auto heads = f.int_per_layer("attention.head_count", n_layer, hybrid ? 0 : 1, 4096);
        first_heads = heads.front();
        p.kv_heads = f.has("attention.head_count_kv") || hybrid
                         ? f.int_per_layer("attention.head_count_kv", n_layer, hybrid ? 0 : 1, 4096)
                         : heads;
        // Mistral 7B v0.1 declares a window for every layer; one as long as the context hides
        // nothing (llama_family.cpp).
        if (!hybrid) {
            p.window = f.opt_int("attention.sliding_window", 0, 0, INT32_MAX);
            if (p.window >= n_ctx)
                p.window = 0;
            p.sliding.assign(static_cast<size_t>(n_layer), p.window > 0);
        }
    }
    if (first_heads <= 0)
        throw ModelError(f.key("attention.head_count") + " must be > 0");
    // llama.cpp's loader: the head size defaults to n_embd / n_head.
    p.key_length = f.opt_int("attention.key_length", n_embd / first_heads, 1, 4096);
    p.value_length = f.opt_int("attention.value_length", p.key_length, 1, 4096);
    return p;
}

void read_summary(const std::string& path, ModelSummary& s) {
    std::unique_ptr<GgufFile> g;
    try {
        g = GgufFile::open(path);
    } catch (const GgufError& e) {
        throw ModelError(std::string("not a valid GGUF file: ") + e.what());
    } catch (const std::system_error& e) {
        throw ModelError("cannot open " + path + ": " + e.what());
    }
    if (!g->has("general.architecture"))
        throw ModelError("not a model file: general.architecture is missing");
    s.architecture = g->get_string("general.architecture");
    if (g->has("general.name") && g->metadata().at("general.name").type == GgufValueType::String)
        s.name = g->get_string("general.name");
    ModelFile f(*g, s.architecture);
    // What Model::load would say stops here, after what any file declares has been read.
    auto read_common = [&] {
        s.context_length = f.need_int("context_length", 1, INT32_MAX);
        s.n_layer = static_cast<int>(f.need_int("block_count", 1, 4096));
    };
    if (!is_supported_architecture(s.architecture)) {
        try {
            read_common();
        } catch (const std::exception&) {
            // Shown when present; an unknown architecture may name its keys otherwise.
        }
        throw ModelError(unsupported_architecture_message(s.architecture));
    }
    read_common();
    const LayerPlan p = plan_layers(f, s.n_layer, s.context_length);
    const int64_t row_bytes = (p.key_length + p.value_length) * 2; // f16: 2 bytes per element
    for (int il = 0; il < s.n_layer; ++il) {
        const int64_t kv = p.kv_heads[static_cast<size_t>(il)];
        if (kv == 0) {
            ++s.n_recurrent_layers;
            continue;
        }
        ++s.n_attention_layers;
        s.kv_bytes_per_token += kv * row_bytes;
        if (p.sliding[static_cast<size_t>(il)])
            ++s.n_sliding_layers;
        else
            s.kv_bytes_per_token_global += kv * row_bytes;
    }
    if (s.n_sliding_layers > 0)
        s.sliding_window = p.window;
    s.supported = true;
}

} // namespace

ModelSummary describe_model_file(const std::string& path) {
    ModelSummary s;
    s.path = path;
    s.name = std::filesystem::path(path).filename().string();
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) {
        s.problem = "cannot open " + path + ": " + ec.message();
        return s;
    }
    s.file_bytes = size;
    try {
        read_summary(path, s);
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& e) {
        s.supported = false;
        s.kv_bytes_per_token = s.kv_bytes_per_token_global = 0;
        s.problem = e.what();
    }
    return s;
}

} // namespace spanscope
