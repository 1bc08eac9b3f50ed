// What a model file is, read from its GGUF metadata alone (no weight is read, no tokenizer
// built): its architecture, name, size, context length, layers and the key/value bytes each
// token of context costs; and whether Model::load supports it, or the one line why not. The
// desktop application's model list shows these before a model is chosen.
#pragma once

#include <cstdint>
#include <string>

namespace spanscope {

struct ModelSummary {
    std::string path;
    /// general.architecture ("gemma3", "llama", …); empty when the file could not be read or
    /// does not name one.
    std::string architecture;
    /// general.name, else the file's name without its directory.
    std::string name;
    uint64_t file_bytes = 0;    ///< the file's size in bytes (0 when it cannot be opened)
    int64_t context_length = 0; ///< {arch}.context_length, tokens; 0 when unknown
    int n_layer = 0;            ///< {arch}.block_count; 0 when unknown
    int n_attention_layers = 0; ///< layers that keep keys and values (global and sliding)
    int n_sliding_layers = 0;   ///< of those, the sliding-window layers
    int n_recurrent_layers = 0; ///< Mamba-2 or Gated DeltaNet layers (no key/value rows)
    int64_t sliding_window = 0; ///< tokens a sliding-window layer keeps; 0 without such layers
    /// Bytes one token of context adds to an f16 key/value cache (a key and a value row of
    /// head_count_kv × key_length f16 elements, 2 bytes each, per attention layer) counting
    /// every attention layer, the sliding-window ones included: what the cache costs per token
    /// while the context is no longer than the window. Recurrent layers count 0 (their state
    /// has a fixed size). The CPU engine keeps its rows in f32 and a position each, about twice
    /// this (engine/memory/row_store.h); this is the model's figure, as llama.cpp's f16 cache
    /// holds it. 0 when unknown (unsupported or unreadable file).
    int64_t kv_bytes_per_token = 0;
    /// The same over the global attention layers only: what each token past the sliding
    /// window adds (a sliding-window layer keeps at most sliding_window rows). Equal to
    /// kv_bytes_per_token for a model without sliding-window layers.
    int64_t kv_bytes_per_token_global = 0;
    /// True when Model::load accepts the architecture and the hyper-parameters above could be
    /// read. Loading still checks every tensor and may refuse the file then.
    bool supported = false;
    /// Why the file cannot be used, in one line (empty when supported): "cannot open …",
    /// "not a valid GGUF file: …", "unsupported model architecture 'phi3' (supported: …)"
    /// (the message Model::load gives), or the hyper-parameter that is missing or out of range.
    std::string problem;
};

/// Describe the model file at `path` from its header and metadata (the file is mapped, its
/// tensors are not read: milliseconds, most of it the vocabulary's strings). Never throws for a
/// bad file (except std::bad_alloc): problems are reported in `problem` with supported false,
/// and what could be read before them stays filled in.
ModelSummary describe_model_file(const std::string& path);

} // namespace spanscope
