// A loaded language model: hyper-parameters read (and checked) from GGUF metadata, weights
// memory-mapped, the tokenizer, and the forward pass of its architecture.
#pragma once

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/attention.h"
#include "engine/kernels/cancel.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/thread_pool.h"
#include "engine/memory/memory.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/model/recurrent_gated_deltanet.h"
#include "engine/model/recurrent_mamba2.h"
#include "engine/model/surprisal.h"
#include "engine/text/tokenizer.h"

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// A model file that cannot be used: wrong architecture, missing or mis-shaped tensor,
/// inconsistent hyper-parameter. The message names the key or tensor.
class ModelError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// What a layer mixes tokens with: attention over a memory of K/V rows, or a recurrent state
/// (Mamba-2: Dao & Gu 2024; Gated DeltaNet: Yang et al. 2025).
enum class LayerKind { Attention, Mamba2, GatedDeltaNet };

/// "attention", "mamba2", "gated_deltanet".
const char* layer_kind_name(LayerKind kind);

/// One layer's geometry and position encoding. `attn` and `rope_*` describe attention layers;
/// `mamba2` / `gated_deltanet` the recurrent layer of that kind (the other fields keep their
/// defaults).
struct LayerInfo {
    LayerKind kind = LayerKind::Attention;
    AttentionShape attn;  ///< attn.window > 0 for sliding-window layers
    RopeFrequencies rope; ///< the rotary frequencies (base, scaling, factors)
    /// Elements of each head that RoPE rotates (NeoX layout, the first rope_dims): -1 = all
    /// of head_dim, 0 = no position encoding (NoPE), else a partial rotation.
    int rope_dims = -1;
    Mamba2Shape mamba2;                ///< kind == Mamba2
    GatedDeltaNetShape gated_deltanet; ///< kind == GatedDeltaNet
    bool recurrent() const { return kind != LayerKind::Attention; }
    bool sliding() const { return kind == LayerKind::Attention && attn.window > 0; }
    /// An attention layer without a window (the layers SEKV and the baselines may serve).
    bool global() const { return kind == LayerKind::Attention && attn.window == 0; }
    /// True when keys are rotated over the whole head (what rope_shift_neox can move).
    bool full_rope() const { return rope_dims < 0 || rope_dims == attn.head_dim; }
};

/// Hyper-parameters, each read from the file ("source" says where a default was used).
struct ModelInfo {
    std::string architecture;
    std::string name;
    int n_layer = 0;
    int n_embd = 0;
    int n_ff = 0;
    int n_head = 0;
    int n_head_kv = 0;
    int head_dim = 0;
    int n_vocab = 0;
    int n_ctx_train = 0; ///< context window (tokens)
    int sliding_window = 0;
    int sliding_pattern = 0; ///< every sliding_pattern-th layer is global
    float rms_eps = 0.0f;
    double rope_base_global = 0.0;
    double rope_base_local = 0.0;
    bool instruction_tuned = false;
    std::string chat_template;              ///< tokenizer.chat_template, may be empty
    std::vector<std::string> defaults_used; ///< hyper-parameters absent from the file
    std::vector<LayerInfo> layers;
    /// True when some layer is recurrent (a hybrid model).
    bool hybrid() const;
};

/// Tokens that leave a forward pass between layers (CacheBlend's selective recompute, Yao et
/// al. 2025, "CacheBlend", §4.3: every token runs the layers up to a check layer, then only the
/// selected ones go on). After layer `after_layer` (not the last) the model calls keep(), continues
/// with the ubatch rows it returns (indices into the ubatch, increasing, possibly none); the other
/// rows neither store nor attend in later layers.
struct TokenFilter {
    int after_layer = 0;
    std::function<std::vector<int64_t>()> keep;
};

/// The GGUF architectures (general.architecture) Model::load reads, in the order its message
/// lists them: gemma3, llama, qwen2, qwen3, granitehybrid, qwen3next.
const std::vector<std::string>& supported_architectures();
bool is_supported_architecture(const std::string& architecture);
/// The one line Model::load throws for any other architecture: "unsupported model architecture
/// 'phi3' (supported: gemma3, llama, …)".
std::string unsupported_architecture_message(const std::string& architecture);

/// The hyper-parameters of the model in `g`, read and checked as Model::load reads them, from
/// the file's metadata and tensor table (no weight is read, except a `llama` file's
/// rope_freqs.weight: Llama 3's head_dim / 2 frequency factors, checked): the
/// architecture named by general.architecture chooses its reader (read_gemma3_hparams,
/// read_llama_family_hparams, read_granite_hybrid_hparams, read_qwen3next_hparams), the one its
/// loader's constructor calls. The result is the ModelInfo the loaded model would have,
/// layers (LayerInfo) and n_vocab included. Throws what Model::load throws for these checks,
/// with the same message: ModelError ("not a model file: …", unsupported_architecture_message,
/// a key missing or out of range, an unsupported variant), GgufError for a key of the wrong type.
/// The weights' shapes and the tokenizer are not checked here.
ModelInfo read_model_info(const GgufFile& g);

struct SekvOptions;
struct EvictionOptions;

class Model {
public:
    /// Open and check `path`. Throws GgufError (invalid file), ModelError (unsupported or
    /// inconsistent model), std::system_error (cannot open).
    static std::unique_ptr<Model> load(const std::string& path);
    virtual ~Model() = default;

    const ModelInfo& info() const { return info_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const GgufFile& gguf() const { return *gguf_; }
    const std::string& path() const { return path_; }

    /// Run one ubatch through the model.
    /// tokens, pos: [n] (positions absolute, increasing, continuing what `memory` holds);
    /// memory: one memory per layer (make_memory): attention layers store this ubatch's K/V,
    /// recurrent layers advance their state over the ubatch's tokens in order (their positions
    /// must continue what the state has absorbed);
    /// logit_rows: indices (< n) of the tokens whose next-token logits are wanted;
    /// logits: [logit_rows.size()][n_vocab] raw logits (nats before log-softmax);
    /// surprisal: optional, every row's surprisal of a given next token (surprisal.h);
    /// cancel: optional flag checked before each layer's attention and feed-forward and before
    /// each vocabulary slice of the surprisal (throws Cancelled; the layers before have stored
    /// this ubatch's rows, so the caller must discard `memory`).
    /// filter: optional, drops rows after a layer (TokenFilter); then logit_rows must be empty
    /// and surprisal null.
    /// Throws std::invalid_argument on an out-of-range token id, a bad filter (indices not
    /// increasing or outside the ubatch, a layer that does not exist, logits or surprisal
    /// asked with it), std::length_error when the memory is full.
    virtual void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                         const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                         const SurprisalRequest* surprisal = nullptr,
                         const std::atomic<bool>* cancel = nullptr,
                         const TokenFilter* filter = nullptr) const = 0;

    /// The memory a session of this model uses: make_memory (below) for the CPU; a backend
    /// that keeps key/value rows on its device puts its own memories in the exact layers
    /// (`full` and `sliding`). Arguments and errors as make_memory.
    virtual ModelMemory new_memory(int64_t n_ctx, int64_t max_ubatch,
                                   const std::string& global_policy = "full",
                                   const SekvOptions* sekv = nullptr,
                                   const EvictionOptions* eviction = nullptr) const;
    /// "cpu" or "cuda": where forward() runs.
    virtual const char* backend() const { return "cpu"; }

protected:
    Model() = default;
    /// Take `other`'s file, tokenizer, hyper-parameters and path (a backend that wraps a
    /// loaded CPU model); `other` is left empty and must only be destroyed.
    void adopt(Model& other);
    std::unique_ptr<GgufFile> gguf_;
    std::unique_ptr<Tokenizer> tokenizer_;
    ModelInfo info_;
    std::string path_;
};

/// The memory policies of the global-attention layers: "full", "sekv", and the baselines it is
/// measured against, "chunk_summary", "snapkv", "h2o", "streaming" (issue 6).
const std::vector<std::string>& global_policies();

/// Memory for every layer of a model: `global_policy` (one of global_policies()) for global
/// layers, the exact `sliding` ring buffer for sliding-window layers, a zero RecurrentMemory
/// (memory_recurrent.h) for recurrent layers. A compressing policy
/// serves the layers in sekv->layers (sekv_layers()' default when empty; the same layers for every
/// policy, so that they are compared on the same bytes) and the other global layers are `full`:
/// "sekv" and "chunk_summary" (SekvMemory, the latter with summaries_only) take `sekv`,
/// "snapkv", "h2o" and "streaming" (EvictionMemory) take `eviction` (defaults when null).
/// n_ctx: most tokens a session will hold; max_ubatch: most tokens per forward call.
/// Throws std::invalid_argument for an unknown policy, a layer that does not exist, uses a
/// sliding window or is recurrent, or a compressing policy with no layer to serve.
ModelMemory make_memory(const ModelInfo& info, int64_t n_ctx, int64_t max_ubatch,
                        const std::string& global_policy = "full",
                        const SekvOptions* sekv = nullptr,
                        const EvictionOptions* eviction = nullptr);

/// The layers SEKV serves under `options`, ascending: its layers, else every global-attention
/// layer with full-head RoPE — in the later half of the stack (il >= n_layer / 2) when every
/// layer is global (no sliding-window or recurrent layer: the Llama family). Throws
/// std::invalid_argument as make_memory, and for a named layer that rotates part of each head or
/// none (SEKV's summary keys assume full-head RoPE).
std::vector<int> sekv_layers(const ModelInfo& info, const SekvOptions& options);

} // namespace spanscope
