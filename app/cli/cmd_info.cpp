#include "app/cli/commands.h"

#include "engine/model/backend.h"

#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/text/chat_format.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>

namespace spanscope::cli {

int run_info(const InfoOptions& o) {
    auto model = open_model(o.model);
    const auto& I = model->info();
    struct TypeCount {
        int tensors = 0;
        uint64_t bytes = 0;
    };
    std::map<std::string, TypeCount> by_type;
    uint64_t total_bytes = 0;
    for (const auto& t : model->gguf().tensors()) {
        auto& c = by_type[std::string(traits(t.type).name)];
        ++c.tensors;
        c.bytes += t.nbytes;
        total_bytes += t.nbytes;
    }
    int n_global = 0;
    for (const auto& l : I.layers)
        n_global += l.global() ? 1 : 0;

    nlohmann::json j;
    j["path"] = model->path();
    j["architecture"] = I.architecture;
    j["name"] = I.name;
    j["kind"] = I.instruction_tuned ? "instruction-tuned" : "base";
    // The prompt format, or why the model's template is refused (info still describes the file).
    std::string chat_format;
    try {
        chat_format = chat_format_name(chat_format_of(I, model->tokenizer()));
    } catch (const ModelError& e) {
        chat_format = std::string("refused: ") + e.what();
    }
    j["chat_format"] = chat_format;
    j["n_layer"] = I.n_layer;
    j["n_embd"] = I.n_embd;
    j["n_ff"] = I.n_ff;
    j["n_head"] = I.n_head;
    j["n_head_kv"] = I.n_head_kv;
    j["head_dim"] = I.head_dim;
    j["n_vocab"] = I.n_vocab;
    j["context_length"] = I.n_ctx_train;
    j["sliding_window"] = I.sliding_window;
    j["global_layers"] = n_global;
    const auto sekv = sekv_layers(I, SekvOptions{});
    j["sekv_layers"] = sekv; // the layers `--policy sekv` serves by default
    int n_sliding = 0;
    std::vector<std::string> kinds;
    for (const auto& l : I.layers) {
        n_sliding += l.sliding();
        kinds.emplace_back(layer_kind_name(l.kind));
    }
    const int n_recurrent = I.n_layer - n_global - n_sliding;
    j["sliding_layers"] = n_sliding;
    j["recurrent_layers"] = n_recurrent;
    j["layer_kinds"] = kinds; // attention, mamba2, gated_deltanet per layer
    j["rope_base_global"] = I.rope_base_global;
    j["rope_base_local"] = I.rope_base_local;
    // Linear position scaling and Llama 3 frequency factors of the global layers (rope.h).
    const RopeFrequencies* global_rope = nullptr;
    for (const auto& l : I.layers)
        if (l.global() && !global_rope)
            global_rope = &l.rope;
    j["rope_scale"] = global_rope ? global_rope->scale : 1.0;
    j["rope_frequency_factors"] = global_rope ? !global_rope->factors.empty() : false;
    j["rms_eps"] = I.rms_eps;
    j["defaults_used"] = I.defaults_used;
    j["tensors"] = model->gguf().tensors().size();
    j["tensor_bytes"] = total_bytes;
    for (const auto& [name, c] : by_type)
        j["tensor_types"][name] = {{"tensors", c.tensors}, {"bytes", c.bytes}};
    if (o.json) {
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::cout << "model:          " << model->path() << "\n"
              << "name:           " << I.name << " (" << I.architecture << ", "
              << (I.instruction_tuned ? "instruction-tuned" : "base model") << ")\n"
              << "chat format:    " << chat_format << "\n"
              << "layers:         " << I.n_layer << " (" << n_sliding << " sliding-window, "
              << n_global << " global"
              << (n_recurrent > 0 ? ", " + std::to_string(n_recurrent) + " recurrent" : "") << ")\n"
              << "SEKV layers:    " <<
        [&] {
            std::string l;
            for (const int il : sekv)
                l += (l.empty() ? "" : ", ") + std::to_string(il);
            return l;
        }() << " (global; sliding-window layers keep their exact ring buffer)\n"
              << "hidden:         " << I.n_embd << ", feed-forward " << I.n_ff << "\n"
              << "heads:          " << I.n_head << " query, " << I.n_head_kv << " key/value, dim "
              << I.head_dim << "\n"
              << "vocabulary:     " << I.n_vocab << " tokens\n"
              << "context:        " << I.n_ctx_train << " tokens, sliding window "
              << I.sliding_window << "\n"
              << "RoPE base:      " << I.rope_base_global << " global, " << I.rope_base_local
              << " local";
    if (global_rope && global_rope->scale != 1.0)
        std::cout << "; linear scaling, positions × " << global_rope->scale;
    if (global_rope && !global_rope->factors.empty())
        std::cout << "; Llama 3 frequency factors";
    std::cout << "\n";
    for (const auto& d : I.defaults_used)
        std::cout << "default used:   " << d << "\n";
    std::cout << "tensors:        " << model->gguf().tensors().size() << " ("
              << total_bytes / (1024.0 * 1024.0) << " MiB)\n";
    for (const auto& [name, c] : by_type)
        std::cout << "  " << name << ": " << c.tensors << " tensors, " << c.bytes << " bytes\n";
    return 0;
}

} // namespace spanscope::cli
