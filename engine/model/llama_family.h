// The Llama family (GGUF architectures `llama`, `qwen2`, `qwen3`): Llama 3.x and SmolLM2 (written
// as `llama`, byte-level BPE vocabularies), Qwen 2 / 2.5 (`qwen2`, q/k/v biases) and Qwen 3
// (`qwen3`, per-head q/k RMSNorm). Llama 2 and Mistral 7B are read too, their SentencePiece
// vocabularies tokenised with the space prefix they declare (engine/text/tokenizer.h, TextStart).
// llama.cpp is the reference for tensor names, metadata keys and the forward pass
// (tests/reference/README.md).
#pragma once

#include "engine/model/model.h"

#include <array>
#include <memory>
#include <string>

namespace spanscope {

/// The GGUF architectures (general.architecture) load_llama_family reads, in the order
/// Model::load lists them (its table of architectures takes them from here).
inline constexpr std::array<const char*, 3> kLlamaFamilyArchitectures{"llama", "qwen2", "qwen3"};

/// Whether `architecture` is one of kLlamaFamilyArchitectures.
bool is_llama_family(const std::string& architecture);

class ModelFile;

/// A Llama-family file's hyper-parameters, read from its metadata and tensor table.
struct LlamaFamilyHparams {
    /// Sizes, identity, n_vocab (token_embd.weight's rows) and one LayerInfo per layer (the same
    /// heads, window, RoPE frequencies and 1/sqrt(head_dim) scale in every layer).
    ModelInfo info;
    RopeFrequencies rope;   ///< every layer's: base, linear scale, Llama 3 frequency factors
    bool pair_rope = false; ///< `llama`: the weights' adjacent-pair RoPE layout
    bool qk_norm = false;   ///< `qwen3`: per-head q/k RMSNorm
};

/// Read and check a Llama-family file's hyper-parameters (f.arch() one of is_llama_family's):
/// every key, the RoPE scaling, the tensors that decide the variant (LongRoPE factors, fused
/// QKV, feed-forward and output biases, q/k norms outside qwen3 are refused by their presence).
/// Of the weights it reads one tensor only: a `llama` file's rope_freqs.weight when present
/// (Llama 3's frequency factors, head_dim / 2 values, checked positive and finite, kept in
/// LlamaFamilyHparams::rope).
/// Model::load and describe_model_file (model_summary.h) both read these files through it.
/// Throws ModelError as load_llama_family does for these; GgufError for a key of the wrong type.
LlamaFamilyHparams read_llama_family_hparams(ModelFile& f);

/// Build a Llama-family model from an opened GGUF. Every hyper-parameter is read from the file
/// and checked; RoPE takes the file's base, linear scaling (rope.scaling.type "linear" with
/// rope.scaling.factor) and Llama 3 frequency factors (the rope_freqs.weight tensor, `llama`
/// only); a declared attention.sliding_window makes every layer of a `llama` file a
/// sliding-window layer (Mistral 7B v0.1).
/// Throws ModelError naming the first missing or out-of-range key, missing or mis-shaped tensor,
/// or unsupported variant (YaRN or LongRoPE scaling, partial rotation, experts, fused QKV,
/// feed-forward biases, per-layer head counts).
std::unique_ptr<Model> load_llama_family(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
