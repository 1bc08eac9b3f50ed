#include "engine/model/model_summary.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/model/model.h"
#include "engine/model/model_file.h"
#include "engine/text/chat_format.h"

#include <filesystem>
#include <system_error>

namespace spanscope {

namespace {

/// The key/value geometry of the layers Model::load would build (info.layers) into `s`.
void count_layers(const ModelInfo& info, ModelSummary& s) {
    s.context_length = info.n_ctx_train;
    s.n_layer = info.n_layer;
    for (const LayerInfo& l : info.layers) {
        if (l.recurrent()) {
            ++s.n_recurrent_layers;
            continue;
        }
        // A key and a value row of n_kv_head × head_dim f16 elements (every loader reads
        // value_length equal to key_length).
        const int64_t bytes = int64_t{2} * l.attn.n_kv_head * l.attn.head_dim * 2;
        ++s.n_attention_layers;
        s.kv_bytes_per_token += bytes;
        if (l.sliding()) {
            ++s.n_sliding_layers;
            s.sliding_window = l.attn.window;
        } else {
            s.kv_bytes_per_token_global += bytes;
        }
    }
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
    const auto& meta = g->metadata();
    auto string_key = [&](const char* key) {
        const auto it = meta.find(key);
        return it != meta.end() && it->second.type == GgufValueType::String ? g->get_string(key)
                                                                            : std::string();
    };
    s.architecture = string_key("general.architecture");
    if (const std::string name = string_key("general.name"); !name.empty())
        s.name = name;
    // What the file declares is shown even when a check below refuses it (an unknown
    // architecture may name its keys otherwise: then nothing is shown).
    if (!s.architecture.empty()) {
        const ModelFile f(*g, s.architecture);
        try {
            s.context_length = f.need_int("context_length", 1, INT32_MAX);
            s.n_layer = static_cast<int>(f.need_int("block_count", 1, 4096));
        } catch (const ModelError&) {
        }
    }
    // Model::load's own readers and checks, in its order: the architecture's hyper-parameters,
    // the tokenizer (its vocabulary's metadata), then the chat format the program decides as
    // the model loads (engine/text/chat_format.h).
    const ModelInfo info = read_model_info(*g);
    count_layers(info, s);
    s.instruction_tuned = info.instruction_tuned;
    const auto tok = load_model_tokenizer(*g, info.n_vocab, TokenizerBuild::VocabularyOnly);
    s.chat_format = chat_format_name(chat_format_of(info, *tok));
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
        s.problem = e.what();
    }
    return s;
}

ModelSummary summarise_layers(const ModelInfo& info) {
    ModelSummary s;
    count_layers(info, s);
    return s;
}

} // namespace spanscope
