// What a model file is, read from its GGUF header (no weight is read, except a `llama` file's
// rope_freqs.weight: Llama 3's head_dim / 2 frequency factors, which are checked; no tokenizer
// model built): its architecture, name, size, context length, layers and the key/value bytes each
// token of context costs; and whether the program can use it, or the one line why not: the
// line loading it would give. The desktop application's model list and `spanscope-cli info`
// show these before (or instead of) loading a model.
//
// The figures and the verdict come from the loader's own readers, not from a copy of their
// rules: read_model_info (model.h: the architecture's hyper-parameter reader, which the model's
// constructor calls too), load_model_tokenizer (model_file.h) over the vocabulary alone, and
// chat_format_of (engine/text/chat_format.h), which the programs call as a model loads.
#pragma once

#include <cstdint>
#include <string>

namespace spanscope {

struct ModelInfo;

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
    /// holds it. Computed from the layers Model::load would build (ModelInfo::layers); 0 when
    /// the hyper-parameters could not be read. A file refused later (its vocabulary, its chat
    /// template) keeps its figures.
    int64_t kv_bytes_per_token = 0;
    /// The same over the global attention layers only: what each token past the sliding
    /// window adds (a sliding-window layer keeps at most sliding_window rows). Equal to
    /// kv_bytes_per_token for a model without sliding-window layers.
    int64_t kv_bytes_per_token_global = 0;
    /// ModelInfo::instruction_tuned (a chat template, or a name that says so); false when
    /// unknown.
    bool instruction_tuned = false;
    /// chat_format_name of the format its prompts take ("completion", "chatml", …); empty when
    /// not decided (the file is refused before or by that check).
    std::string chat_format;
    /// True when every check that needs only the file's header passes: the architecture's
    /// hyper-parameters and variant (read_model_info), the tokenizer's vocabulary
    /// (load_model_tokenizer; a repeated piece included), the chat format (chat_format_of).
    /// Loading still reads every tensor and may refuse the file then (a tensor missing or
    /// mis-shaped, SentencePiece's refusals that only building its model makes: an empty
    /// piece, byte pieces that are not the 256 <0x00>..<0xFF>).
    bool supported = false;
    /// Why the file cannot be used, in one line (empty when supported): "cannot open …",
    /// "not a valid GGUF file: …", else exactly the message loading it gives (ModelError's or
    /// GgufError's what()): "unsupported model architecture 'phi3' (supported: …)", a key
    /// missing or out of range, a variant not supported, "tokenizer: …", a chat template none
    /// of the formats.
    std::string problem;
};

/// Describe the model file at `path` from its header (the file is mapped; of its tensors only a
/// `llama` file's rope_freqs.weight is read, head_dim / 2 floats; a SentencePiece
/// vocabulary's model is not built; a byte-level BPE vocabulary is, its merges checked).
/// Never throws for a bad file (except std::bad_alloc): problems are reported in `problem` with
/// supported false, and what could be read before them stays filled in. Thread-safe (call it
/// from a worker thread: a file on a slow disk takes what its header takes to read).
ModelSummary describe_model_file(const std::string& path);

/// The layer figures of a model already loaded, counted as describe_model_file counts them
/// from a file's header: context_length, n_layer, the attention, sliding and recurrent layer
/// counts, sliding_window and the key/value bytes per token (kv_bytes_per_token and
/// kv_bytes_per_token_global); the other fields stay empty. Reads no file.
ModelSummary summarise_layers(const ModelInfo& info);

} // namespace spanscope
