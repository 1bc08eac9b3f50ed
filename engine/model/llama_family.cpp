// Llama-family forward pass (Touvron et al. 2023, "LLaMA", §2.2: pre-normalisation with
// RMSNorm, SwiGLU, rotary embeddings; Ainslie et al. 2023 for grouped-query attention). Per
// layer:
//   h = RMSNorm(x);  q, k, v = h·Wqᵀ + bq, h·Wkᵀ + bk, h·Wvᵀ + bv      (biases: Qwen 2)
//   q, k = RMSNorm per head                                             (Qwen 3)
//   RoPE(q, k)      `llama`: adjacent pairs (llama.cpp's "normal" RoPE, the converter's
//                   permutation of Wq, Wk); `qwen2`, `qwen3`: rotate-half ("NeoX")
//   a = attention over the layer's memory, n_head queries sharing n_head_kv keys and values,
//       scale 1/sqrt(head_dim)
//   x = x + a·Woᵀ (+ bo)
//   x = x + (silu(h'·Wgateᵀ) ⊙ h'·Wupᵀ)·Wdownᵀ,  h' = RMSNorm(x)
// logits = RMSNorm(x)·Wᵀ, W = output.weight, else the tied token embedding.
//
// Every memory (docs/architecture.md, Memory) holds keys in the rotate-half layout: the
// adjacent-pair layout of `llama` files is reordered before the rotation (rope_pairs_to_halves),
// which leaves every attention score unchanged, so SEKV and LinearKV move keys the same way for
// every architecture.
#include "engine/model/llama_family.h"

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/rope.h"
#include "engine/model/model_file.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace spanscope {
namespace {

struct LlamaLayer {
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* q_norm = nullptr; ///< Qwen 3: [head_dim]
    const float* k_norm = nullptr;
    const float* bq = nullptr; ///< optional biases: [q_dim], [kv_dim], [kv_dim], [n_embd]
    const float* bk = nullptr;
    const float* bv = nullptr;
    const float* bo = nullptr;
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

/// y[t][:] += b for t < n; y: [n][m].
void add_bias(float* y, const float* b, int64_t n, int64_t m) {
    if (!b)
        return;
    for (int64_t t = 0; t < n; ++t)
        add_inplace(y + t * m, b, m);
}

class LlamaFamilyModel final : public GgufModel {
public:
    LlamaFamilyModel(std::unique_ptr<GgufFile> gguf, const std::string& path,
                     const std::string& arch);
    void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                 const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                 const SurprisalRequest* surprisal = nullptr,
                 const std::atomic<bool>* cancel = nullptr,
                 const TokenFilter* filter = nullptr) const override;

private:
    void load_layer(int il);
    const float* optional_vector(const std::string& name, int64_t n);

    /// The file's hyper-parameters, read once by read_llama_family_hparams (their info is info_:
    /// moved there, left empty here).
    LlamaFamilyHparams hp_;
    std::vector<LlamaLayer> layers_;
};

LlamaFamilyModel::LlamaFamilyModel(std::unique_ptr<GgufFile> gguf, const std::string& path,
                                   const std::string& arch)
    : GgufModel(std::move(gguf), path, arch) {
    hp_ = read_llama_family_hparams(*file_);
    info_ = std::exchange(hp_.info, ModelInfo{});
    tok_embd_ = token_embedding(*file_, info_);
    load_tokenizer_and_output();
    layers_.resize(static_cast<size_t>(info_.n_layer));
    for (int il = 0; il < info_.n_layer; ++il)
        load_layer(il);
}

/// The one value of a per-layer key (an integer or an array), refused when layers differ.
int64_t uniform(const ModelFile& f, const std::string& suffix, const std::vector<int64_t>& v) {
    for (const int64_t x : v)
        if (x != v.front())
            throw ModelError(f.key(suffix) +
                             " differs between layers: per-layer sizes are not supported");
    return v.front();
}

/// The layers' rotary frequencies (every layer has the same), with the defaults used noted in I.
RopeFrequencies read_rope(ModelFile& f, ModelInfo& I) {
    const GgufFile& g = f.gguf();
    RopeFrequencies r;
    r.base = f.opt_float("rope.freq_base", 10000.0, 1.0 + 1e-9, 1e12);
    if (!f.has("rope.freq_base"))
        I.defaults_used.push_back("rope.freq_base = 10000 (llama.cpp's default)");
    const int64_t dims = f.opt_int("rope.dimension_count", I.head_dim, 0, 1 << 16);
    if (dims != I.head_dim)
        throw ModelError(f.key("rope.dimension_count") + " " + std::to_string(dims) +
                         " differs from the head size " + std::to_string(I.head_dim) +
                         ": partial rotation is not supported for " + f.arch());
    // llama.cpp reads rope.scaling.factor (or the older rope.scale_linear) as 1 / freq_scale
    // and applies it as linear interpolation unless the type says another method.
    std::string type = "linear";
    if (f.has("rope.scaling.type")) {
        try {
            type = g.get_string(f.key("rope.scaling.type"));
        } catch (const std::exception&) {
            throw ModelError(f.key("rope.scaling.type") + " is not a string");
        }
    }
    // A factor of 0 means "absent" to llama.cpp; others outside [1/100, 10 000] would turn
    // every angle into noise.
    double factor = f.opt_float("rope.scaling.factor", 0.0, 0.0, 1e4);
    if (factor == 0.0)
        factor = f.opt_float("rope.scale_linear", 0.0, 0.0, 1e4);
    if (factor != 0.0 && factor < 1e-2)
        throw ModelError(f.key("rope.scaling.factor") + " " + std::to_string(factor) +
                         " is below 0.01");
    if (type != "none" && type != "linear")
        throw ModelError("RoPE scaling '" + type + "' (" + f.key("rope.scaling.type") +
                         ") is not supported; supported: none, linear, and Llama 3 frequency "
                         "factors");
    if (type == "linear" && factor != 0.0 && factor != 1.0)
        r.scale = 1.0 / factor;
    if (f.arch() != "llama") // llama.cpp reads Llama 3's factors for `llama` files only
        f.refuse_tensor("rope_freqs.weight", "frequency factors are not part of " + f.arch());
    if (f.has_tensor("rope_freqs.weight")) {
        const float* ff = f.floats("rope_freqs.weight", {I.head_dim / 2});
        r.factors.assign(ff, ff + I.head_dim / 2);
        for (const float v : r.factors)
            if (!(std::isfinite(v) && v > 0.0f))
                throw ModelError("rope_freqs.weight holds a factor that is not a positive "
                                 "finite number");
    }
    for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"})
        f.refuse_tensor(t, "LongRoPE scaling is not supported");
    return r;
}

/// Tensors of variants this implementation does not read: their presence refuses the file.
void refuse_variant_tensors(const ModelFile& f, int n_layer) {
    for (int il = 0; il < n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        f.refuse_tensor(p + "attn_qkv.weight", "fused QKV is not supported");
        for (const char* b : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
            f.refuse_tensor(p + b, "feed-forward biases are not supported");
        if (f.arch() != "llama") // llama.cpp: an optional output bias in `llama` files only
            f.refuse_tensor(p + "attn_output.bias", "an output bias is not part of " + f.arch());
        if (f.arch() != "qwen3")
            for (const char* t : {"attn_q_norm.weight", "attn_k_norm.weight"})
                f.refuse_tensor(p + t, "q/k normalisation belongs to qwen3, not " + f.arch());
    }
}

} // namespace

LlamaFamilyHparams read_llama_family_hparams(ModelFile& f) {
    if (!is_llama_family(f.arch()))
        throw ModelError("read_llama_family_hparams: '" + f.arch() +
                         "' is not a Llama-family architecture");
    LlamaFamilyHparams hp;
    hp.pair_rope = f.arch() == "llama";
    hp.qk_norm = f.arch() == "qwen3";
    auto& I = hp.info;
    I.architecture = f.arch();
    read_model_identity(f.gguf(), I);
    I.n_layer = static_cast<int>(f.need_int("block_count", 1, 4096));
    I.n_embd = static_cast<int>(f.need_int("embedding_length", 1, 1 << 20));
    I.n_ctx_train = static_cast<int>(f.need_int("context_length", 1, INT32_MAX));
    I.rms_eps = static_cast<float>(f.need_float("attention.layer_norm_rms_epsilon", 1e-12, 1e-2));
    I.n_ff = static_cast<int>(
        uniform(f, "feed_forward_length",
                f.int_per_layer("feed_forward_length", I.n_layer, 1, int64_t{1} << 30)));
    I.n_head = static_cast<int>(uniform(
        f, "attention.head_count", f.int_per_layer("attention.head_count", I.n_layer, 1, 4096)));
    I.n_head_kv = I.n_head;
    if (f.has("attention.head_count_kv"))
        I.n_head_kv = static_cast<int>(
            uniform(f, "attention.head_count_kv",
                    f.int_per_layer("attention.head_count_kv", I.n_layer, 1, 4096)));
    if (I.n_head % I.n_head_kv != 0)
        throw ModelError(f.key("attention.head_count") + " " + std::to_string(I.n_head) +
                         " is not a multiple of " + f.key("attention.head_count_kv") + " " +
                         std::to_string(I.n_head_kv));
    if (!f.has("attention.key_length") && (I.n_embd % I.n_head != 0 || I.n_embd / I.n_head < 2))
        throw ModelError(f.key("embedding_length") + " " + std::to_string(I.n_embd) +
                         " does not divide into " + std::to_string(I.n_head) +
                         " heads of at least 2 (and " + f.key("attention.key_length") +
                         " is absent)");
    I.head_dim = static_cast<int>(f.opt_int("attention.key_length", I.n_embd / I.n_head, 1, 4096));
    if (f.opt_int("attention.value_length", I.head_dim, 1, 4096) != I.head_dim)
        throw ModelError(f.key("attention.value_length") + " differs from key_length");
    if (I.head_dim % 2 != 0)
        throw ModelError(f.key("attention.key_length") + " must be even for RoPE");
    if (f.opt_int("expert_count", 0, 0, 4096) != 0)
        throw ModelError(f.key("expert_count") +
                         " > 0: mixture-of-experts Llama files (Mixtral) are not supported");
    // llama.cpp scales these architectures' scores by 1/sqrt(head_dim) whatever the file says.
    const float attn_scale = 1.0f / std::sqrt(static_cast<float>(I.head_dim));
    hp.rope = read_rope(f, I);
    I.rope_base_global = I.rope_base_local = hp.rope.base;
    // Mistral 7B v0.1 declares a window for every layer (a `llama` file); without the key,
    // attention is global. Qwen 2 configurations carry a window they do not use
    // (use_sliding_window false): qwen2 and qwen3 files are read without one, as llama.cpp does.
    I.sliding_window =
        f.arch() == "llama"
            ? static_cast<int>(f.opt_int("attention.sliding_window", 0, 0, INT32_MAX))
            : 0;
    if (I.sliding_window >= I.n_ctx_train)
        I.sliding_window = 0; // a window as long as the context hides nothing
    token_embedding(f, I);    // n_vocab: its rows
    refuse_variant_tensors(f, I.n_layer);

    I.layers.resize(static_cast<size_t>(I.n_layer));
    for (auto& L : I.layers) {
        L.attn.n_head = I.n_head;
        L.attn.n_kv_head = I.n_head_kv;
        L.attn.head_dim = I.head_dim;
        L.attn.scale = attn_scale;
        L.attn.window = I.sliding_window;
        L.rope = hp.rope;
    }
    return hp;
}

namespace {

const float* LlamaFamilyModel::optional_vector(const std::string& name, int64_t n) {
    return file_->has_tensor(name) ? file_->floats(name, {n}) : nullptr;
}

void LlamaFamilyModel::load_layer(int il) {
    const auto& I = info_;
    ModelFile& f = *file_;
    const int64_t E = I.n_embd;
    const int64_t q_dim = int64_t{I.n_head} * I.head_dim;
    const int64_t kv_dim = int64_t{I.n_head_kv} * I.head_dim;
    const std::string p = "blk." + std::to_string(il) + ".";
    auto& L = layers_[static_cast<size_t>(il)];
    L.attn_norm = f.floats(p + "attn_norm.weight", {E});
    L.ffn_norm = f.floats(p + "ffn_norm.weight", {E});
    L.wq = f.matrix(p + "attn_q.weight", E, q_dim);
    L.wk = f.matrix(p + "attn_k.weight", E, kv_dim);
    L.wv = f.matrix(p + "attn_v.weight", E, kv_dim);
    L.wo = f.matrix(p + "attn_output.weight", q_dim, E);
    L.bq = optional_vector(p + "attn_q.bias", q_dim);
    L.bk = optional_vector(p + "attn_k.bias", kv_dim);
    L.bv = optional_vector(p + "attn_v.bias", kv_dim);
    if (f.arch() == "llama") // the others are refused by read_llama_family_hparams
        L.bo = optional_vector(p + "attn_output.bias", E);
    if (f.arch() == "qwen2")
        for (const auto& [b, name] :
             {std::pair{L.bq, "attn_q.bias"}, std::pair{L.bk, "attn_k.bias"},
              std::pair{L.bv, "attn_v.bias"}})
            if (!b)
                throw ModelError("missing tensor " + p + name + " (qwen2 attention has biases)");
    if (hp_.qk_norm) {
        L.q_norm = f.floats(p + "attn_q_norm.weight", {I.head_dim});
        L.k_norm = f.floats(p + "attn_k_norm.weight", {I.head_dim});
    }
    L.w_gate = f.matrix(p + "ffn_gate.weight", E, I.n_ff);
    L.w_up = f.matrix(p + "ffn_up.weight", E, I.n_ff);
    L.w_down = f.matrix(p + "ffn_down.weight", I.n_ff, E);
}

void LlamaFamilyModel::forward(const int32_t* tokens, const int32_t* pos, int64_t n,
                               ModelMemory& memory, const std::vector<int64_t>& logit_rows,
                               float* logits, ThreadPool& pool, const SurprisalRequest* surprisal,
                               const std::atomic<bool>* cancel, const TokenFilter* filter) const {
    const auto& I = info_;
    check_forward_inputs(I, tokens, pos, n, memory);
    if (filter && (filter->after_layer < 0 || filter->after_layer + 1 >= I.n_layer ||
                   !logit_rows.empty() || surprisal || !filter->keep))
        throw std::invalid_argument("a token filter needs a layer before the model's last, a "
                                    "keep function, and no logits or surprisal");
    const int64_t E = I.n_embd, F = I.n_ff;
    const int64_t q_dim = int64_t{I.n_head} * I.head_dim;
    const int64_t kv_dim = int64_t{I.n_head_kv} * I.head_dim;
    std::vector<int32_t> kept_pos(pos, pos + n);

    std::vector<float> x(static_cast<size_t>(n * E)), h(x.size()), o(x.size());
    std::vector<float> q(static_cast<size_t>(n * q_dim)), att(q.size());
    std::vector<float> k(static_cast<size_t>(n * kv_dim)), v(k.size());
    std::vector<float> gate(static_cast<size_t>(n * F)), up(gate.size());
    for (int64_t t = 0; t < n; ++t)
        dequantize_row(tok_embd_.type, tok_embd_.row(tokens[t]), x.data() + t * E, E);
    RopeTable rope(pos, n, I.head_dim, hp_.rope);

    for (int il = 0; il < I.n_layer; ++il) {
        if (cancel && cancel->load())
            throw Cancelled();
        const auto& L = layers_[static_cast<size_t>(il)];
        std::copy(x.begin(), x.begin() + n * E, h.begin());
        rms_norm(h.data(), L.attn_norm, n, E, I.rms_eps, pool);
        matmul_shared_input({{&L.wq, q.data()}, {&L.wk, k.data()}, {&L.wv, v.data()}}, h.data(), n,
                            pool);
        add_bias(q.data(), L.bq, n, q_dim);
        add_bias(k.data(), L.bk, n, kv_dim);
        add_bias(v.data(), L.bv, n, kv_dim);
        if (hp_.qk_norm) {
            rms_norm(q.data(), L.q_norm, n * I.n_head, I.head_dim, I.rms_eps, pool);
            rms_norm(k.data(), L.k_norm, n * I.n_head_kv, I.head_dim, I.rms_eps, pool);
        }
        if (hp_.pair_rope) {
            rope_pairs_to_halves(q.data(), n * I.n_head, I.head_dim);
            rope_pairs_to_halves(k.data(), n * I.n_head_kv, I.head_dim);
        }
        rope_neox(q.data(), rope, n, I.n_head);
        rope_neox(k.data(), rope, n, I.n_head_kv);

        LayerMemory& mem = memory.layer(il);
        mem.store(k.data(), v.data(), kept_pos.data(), n);
        mem.attend(q.data(), kept_pos.data(), n, att.data(), pool);
        matmul(L.wo, att.data(), n, o.data(), pool);
        add_bias(o.data(), L.bo, n, E);
        add_inplace(x.data(), o.data(), n * E);

        if (cancel && cancel->load())
            throw Cancelled();
        std::copy(x.begin(), x.begin() + n * E, h.begin());
        rms_norm(h.data(), L.ffn_norm, n, E, I.rms_eps, pool);
        matmul_shared_input({{&L.w_gate, gate.data()}, {&L.w_up, up.data()}}, h.data(), n, pool);
        swiglu(gate.data(), up.data(), n * F);
        matmul(L.w_down, gate.data(), n, o.data(), pool);
        add_inplace(x.data(), o.data(), n * E);

        if (filter && il == filter->after_layer) {
            n = apply_token_filter(*filter, x.data(), n, E, kept_pos);
            if (n == 0)
                return;
            rope = RopeTable(kept_pos.data(), n, I.head_dim, hp_.rope);
        }
    }
    lm_head(x.data(), n, E, output_norm_, I.rms_eps, 1.0f, output_, logit_rows, logits, pool,
            surprisal, cancel);
}

} // namespace

bool is_llama_family(const std::string& architecture) {
    return std::find(kLlamaFamilyArchitectures.begin(), kLlamaFamilyArchitectures.end(),
                     architecture) != kLlamaFamilyArchitectures.end();
}

std::unique_ptr<Model> load_llama_family(std::unique_ptr<GgufFile> gguf, const std::string& path) {
    const std::string arch = gguf->get_string("general.architecture");
    if (!is_llama_family(arch))
        throw ModelError("load_llama_family: '" + arch + "' is not a Llama-family architecture");
    return std::make_unique<LlamaFamilyModel>(std::move(gguf), path, arch);
}

} // namespace spanscope
