#include "app/cli/commands.h"

#include "engine/model/backend.h"

#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/model/model_summary.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/text/chat_format.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <system_error>

namespace spanscope::cli {

namespace {

/// What describe_model_file read, as JSON fields.
void summary_json(const ModelSummary& s, nlohmann::json& j) {
    j["path"] = s.path;
    j["architecture"] = s.architecture;
    j["name"] = s.name;
    j["file_bytes"] = s.file_bytes;
    j["context_length"] = s.context_length;
    j["n_layer"] = s.n_layer;
    j["attention_layers"] = s.n_attention_layers;
    j["sliding_layers"] = s.n_sliding_layers;
    j["recurrent_layers"] = s.n_recurrent_layers;
    j["sliding_window"] = s.sliding_window;
    j["kv_bytes_per_token"] = s.kv_bytes_per_token;
    j["kv_bytes_per_token_global"] = s.kv_bytes_per_token_global;
}

/// "N (f16, every attention layer; M past the W-token window)", or "" when unknown.
std::string kv_line(const ModelSummary& s) {
    if (s.kv_bytes_per_token <= 0)
        return "";
    std::string l = std::to_string(s.kv_bytes_per_token) + " (f16, every attention layer";
    if (s.n_sliding_layers > 0)
        l += "; " + std::to_string(s.kv_bytes_per_token_global) + " past the " +
             std::to_string(s.sliding_window) + "-token window";
    return l + ")";
}

/// A model file that cannot be used: what its header says (stdout), the reason (one line on
/// stderr, as open_model words it), exit status 1.
int report_unusable(const ModelSummary& s, const std::string& line, const std::string& why,
                    bool json) {
    if (json) {
        nlohmann::json j;
        summary_json(s, j);
        j["supported"] = false;
        j["problem"] = why;
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << "model:          " << s.path << "\n"
                  << "name:           " << s.name << " (" << s.architecture << ")\n"
                  << "file size:      " << s.file_bytes << " bytes\n";
        if (s.context_length > 0)
            std::cout << "context:        " << s.context_length << " tokens\n";
        if (s.n_layer > 0) {
            std::cout << "layers:         " << s.n_layer;
            if (s.n_attention_layers + s.n_recurrent_layers > 0)
                std::cout << " (" << s.n_sliding_layers << " sliding-window, "
                          << s.n_attention_layers - s.n_sliding_layers << " global, "
                          << s.n_recurrent_layers << " recurrent)";
            std::cout << "\n";
        }
        if (const std::string kv = kv_line(s); !kv.empty())
            std::cout << "KV bytes/token: " << kv << "\n";
        std::cout << "usable:         no: " << why << "\n";
    }
    std::cerr << "spanscope-cli: " << line << "\n";
    return 1;
}

} // namespace

int run_info(const InfoOptions& o) {
    // The file described from its header first: a file that cannot be used still shows what it
    // declares, with the one line loading it would give. Nothing is shown for a file whose
    // header could not be read (missing, not GGUF): then the error alone, as for every command.
    const auto where = locate_model(o.model);
    std::error_code ec;
    const bool described = !where.path.empty() && !std::filesystem::is_directory(where.path, ec);
    const ModelSummary s = described ? describe_model_file(where.path) : ModelSummary{};
    if (!s.architecture.empty() && !s.supported)
        return report_unusable(s, unusable_model_message(where, s.problem), s.problem, o.json);
    std::unique_ptr<Model> model;
    try {
        model = open_model(o.model);
    } catch (const std::runtime_error& e) {
        if (s.architecture.empty())
            throw;
        // Refused by a check the header does not show (a tensor missing or mis-shaped): the
        // reason alone where open_model's line names the file before it.
        const std::string line = e.what();
        const std::string named = unusable_model_message(where, "");
        const std::string why = line.rfind(named, 0) == 0 ? line.substr(named.size()) : line;
        return report_unusable(s, line, why, o.json);
    }
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
    // The prompt format (a template none of ours was refused above, with the file's summary).
    const std::string chat_format = chat_format_name(chat_format_of(I, model->tokenizer()));
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
    j["file_bytes"] = s.file_bytes;
    j["kv_bytes_per_token"] = s.kv_bytes_per_token;
    j["kv_bytes_per_token_global"] = s.kv_bytes_per_token_global;
    j["supported"] = true;
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
        }()
              << [&]() -> std::string {
        // The rule of sekv_layers (model.h): every global layer with full-head RoPE, in the
        // later half where every layer is global.
        if (sekv.empty())
            return "none (no global layer rotates its whole head: SEKV's summary keys need it)";
        if (n_global == I.n_layer)
            return " (the later half: every layer is global; the others hold every row, as full)";
        return n_sliding > 0 ? " (global; sliding-window layers keep their exact ring buffer)"
                             : " (global, with full-head RoPE)";
    }() << "\n"
        << "hidden:         " << I.n_embd << ", feed-forward " << I.n_ff << "\n"
        << "heads:          " << I.n_head << " query, " << I.n_head_kv << " key/value, dim "
        << I.head_dim << "\n"
        << "vocabulary:     " << I.n_vocab << " tokens\n"
        << "context:        " << I.n_ctx_train << " tokens"
        << (n_sliding > 0 ? ", sliding window " + std::to_string(I.sliding_window) : "") << "\n"
        << "RoPE base:      " << I.rope_base_global;
    if (n_sliding > 0)
        std::cout << " global, " << I.rope_base_local << " local";
    if (global_rope && global_rope->scale != 1.0)
        std::cout << "; linear scaling, positions × " << global_rope->scale;
    if (global_rope && !global_rope->factors.empty())
        std::cout << "; Llama 3 frequency factors";
    std::cout << "\n";
    if (const std::string kv = kv_line(s); !kv.empty())
        std::cout << "KV bytes/token: " << kv << "\n";
    for (const auto& d : I.defaults_used)
        std::cout << "default used:   " << d << "\n";
    std::cout << "tensors:        " << model->gguf().tensors().size() << " ("
              << total_bytes / (1024.0 * 1024.0) << " MiB)\n";
    for (const auto& [name, c] : by_type)
        std::cout << "  " << name << ": " << c.tensors << " tensors, " << c.bytes << " bytes\n";
    return 0;
}

} // namespace spanscope::cli
