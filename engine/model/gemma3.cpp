// Gemma 3 forward pass. Per layer (Gemma 3 report §2; Gemma 2 report §2 for the sandwich norms):
//   h = RMSNorm(x);  q,k,v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ;  q,k = RMSNorm per head;  RoPE(q,k)
//   a = attention over the layer's memory (sliding window on local layers), scale 1/sqrt(head_dim)
//   x = x + RMSNorm(a·Woᵀ)                                     (post-attention norm)
//   x = x + RMSNorm((gelu_tanh(h'·Wgateᵀ) ⊙ h'·Wupᵀ)·Wdownᵀ),  h' = RMSNorm(x)   (post-FFN norm)
// Embeddings are scaled by sqrt(n_embd); logits come from the tied embedding, no softcapping.
#include "engine/model/gemma3.h"

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/rope.h"
#include "engine/model/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace spanscope {
namespace {

struct Gemma3Layer {
    const float* attn_norm = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    const float* post_attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    const float* post_ffn_norm = nullptr;
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

class Gemma3Model final : public GgufModel {
public:
    Gemma3Model(std::unique_ptr<GgufFile> gguf, const std::string& path);
    void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                 const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                 const SurprisalRequest* surprisal = nullptr,
                 const std::atomic<bool>* cancel = nullptr,
                 const TokenFilter* filter = nullptr) const override;

private:
    void load_layer(int il);
    /// Gemma 3's norm weights [n], f32 as llama.cpp writes them (the CUDA backend reads them so
    /// too). Throws ModelError for another type or shape.
    const float* norm_weight(const std::string& name, int64_t n);

    std::vector<Gemma3Layer> layers_;
};

Gemma3Model::Gemma3Model(std::unique_ptr<GgufFile> gguf, const std::string& path)
    : GgufModel(std::move(gguf), path, "gemma3") {
    info_ = read_gemma3_hparams(*file_);
    tok_embd_ = token_embedding(*file_, info_);
    tokenizer_ = load_model_tokenizer(*gguf_, info_.n_vocab);
    output_norm_ = norm_weight("output_norm.weight", info_.n_embd);
    layers_.resize(static_cast<size_t>(info_.n_layer));
    for (int il = 0; il < info_.n_layer; ++il)
        load_layer(il);
}

const float* Gemma3Model::norm_weight(const std::string& name, int64_t n) {
    if (file_->tensor(name, {n}).type != TensorType::F32)
        throw ModelError("norm weight " + name + " must be f32");
    return file_->floats(name, {n});
}

void Gemma3Model::load_layer(int il) {
    const auto& I = info_;
    ModelFile& f = *file_;
    const int64_t q_dim = static_cast<int64_t>(I.n_head) * I.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(I.n_head_kv) * I.head_dim;
    const std::string p = "blk." + std::to_string(il) + ".";
    auto& L = layers_[static_cast<size_t>(il)];
    L.attn_norm = norm_weight(p + "attn_norm.weight", I.n_embd);
    L.q_norm = norm_weight(p + "attn_q_norm.weight", I.head_dim);
    L.k_norm = norm_weight(p + "attn_k_norm.weight", I.head_dim);
    L.post_attn_norm = norm_weight(p + "post_attention_norm.weight", I.n_embd);
    L.ffn_norm = norm_weight(p + "ffn_norm.weight", I.n_embd);
    L.post_ffn_norm = norm_weight(p + "post_ffw_norm.weight", I.n_embd);
    L.wq = f.matrix(p + "attn_q.weight", I.n_embd, q_dim);
    L.wk = f.matrix(p + "attn_k.weight", I.n_embd, kv_dim);
    L.wv = f.matrix(p + "attn_v.weight", I.n_embd, kv_dim);
    L.wo = f.matrix(p + "attn_output.weight", q_dim, I.n_embd);
    L.w_gate = f.matrix(p + "ffn_gate.weight", I.n_embd, I.n_ff);
    L.w_up = f.matrix(p + "ffn_up.weight", I.n_embd, I.n_ff);
    L.w_down = f.matrix(p + "ffn_down.weight", I.n_ff, I.n_embd);
}

void Gemma3Model::forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                          const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                          const SurprisalRequest* surprisal, const std::atomic<bool>* cancel,
                          const TokenFilter* filter) const {
    const auto& I = info_;
    const int64_t E = I.n_embd, F = I.n_ff;
    const int64_t q_dim = static_cast<int64_t>(I.n_head) * I.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(I.n_head_kv) * I.head_dim;
    if (memory.n_layers() != I.n_layer)
        throw std::invalid_argument("memory has " + std::to_string(memory.n_layers()) +
                                    " layers, the model " + std::to_string(I.n_layer));
    if (filter && (filter->after_layer < 0 || filter->after_layer + 1 >= I.n_layer ||
                   !logit_rows.empty() || surprisal || !filter->keep))
        throw std::invalid_argument("a token filter needs a layer before the model's last, a "
                                    "keep function, and no logits or surprisal");
    // The rows still running (a filter drops some after its layer).
    std::vector<int32_t> kept_pos(pos, pos + n);

    std::vector<float> x(static_cast<size_t>(n * E)), h(x.size()), o(x.size());
    std::vector<float> q(static_cast<size_t>(n * q_dim)), att(q.size());
    std::vector<float> k(static_cast<size_t>(n * kv_dim)), v(k.size());
    std::vector<float> gate(static_cast<size_t>(n * F)), up(gate.size());

    const float embd_scale = std::sqrt(static_cast<float>(E));
    for (int64_t t = 0; t < n; ++t) {
        if (tokens[t] < 0 || tokens[t] >= I.n_vocab)
            throw std::invalid_argument("token id " + std::to_string(tokens[t]) +
                                        " outside the vocabulary");
        dequantize_row(tok_embd_.type, tok_embd_.row(tokens[t]), x.data() + t * E, E);
        for (int64_t i = 0; i < E; ++i)
            x[t * E + i] *= embd_scale;
    }
    RopeTable rope_global(pos, n, I.head_dim, I.rope_base_global);
    RopeTable rope_local(pos, n, I.head_dim, I.rope_base_local);

    for (int il = 0; il < I.n_layer; ++il) {
        if (cancel && cancel->load())
            throw Cancelled();
        const auto& L = layers_[static_cast<size_t>(il)];
        const auto& LI = I.layers[static_cast<size_t>(il)];
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.attn_norm, n, E, I.rms_eps, pool);
        matmul_shared_input({{&L.wq, q.data()}, {&L.wk, k.data()}, {&L.wv, v.data()}}, h.data(), n,
                            pool);
        rms_norm(q.data(), L.q_norm, n * I.n_head, I.head_dim, I.rms_eps, pool);
        rms_norm(k.data(), L.k_norm, n * I.n_head_kv, I.head_dim, I.rms_eps, pool);
        const RopeTable& rope = LI.sliding() ? rope_local : rope_global;
        rope_neox(q.data(), rope, n, I.n_head);
        rope_neox(k.data(), rope, n, I.n_head_kv);

        LayerMemory& mem = memory.layer(il);
        mem.store(k.data(), v.data(), kept_pos.data(), n);
        mem.attend(q.data(), kept_pos.data(), n, att.data(), pool);

        matmul(L.wo, att.data(), n, o.data(), pool);
        rms_norm(o.data(), L.post_attn_norm, n, E, I.rms_eps, pool);
        add_inplace(x.data(), o.data(), n * E);

        if (cancel && cancel->load()) // half a layer is ~60 ms of a 512-token ubatch on 2 cores
            throw Cancelled();
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.ffn_norm, n, E, I.rms_eps, pool);
        matmul_shared_input({{&L.w_gate, gate.data()}, {&L.w_up, up.data()}}, h.data(), n, pool);
        geglu_tanh(gate.data(), up.data(), n * F);
        matmul(L.w_down, gate.data(), n, o.data(), pool);
        rms_norm(o.data(), L.post_ffn_norm, n, E, I.rms_eps, pool);
        add_inplace(x.data(), o.data(), n * E);

        if (filter && il == filter->after_layer) {
            n = apply_token_filter(*filter, x.data(), n, E, kept_pos);
            if (n == 0)
                return;
            rope_global = RopeTable(kept_pos.data(), n, I.head_dim, I.rope_base_global);
            rope_local = RopeTable(kept_pos.data(), n, I.head_dim, I.rope_base_local);
        }
    }

    if (surprisal) {
        rms_norm(x.data(), output_norm_, n, E, I.rms_eps, pool); // x is not needed unnormed below
        token_surprisal(tok_embd_, x.data(), n, surprisal->targets, surprisal->surprisal, pool,
                        8192, cancel);
        if (logit_rows.empty())
            return;
        for (size_t r = 0; r < logit_rows.size(); ++r) {
            const int64_t t = logit_rows[r];
            if (t < 0 || t >= n)
                throw std::invalid_argument("logit row outside the ubatch");
            matmul(tok_embd_, x.data() + t * E, 1, logits + r * I.n_vocab, pool);
        }
        return;
    }
    if (logit_rows.empty())
        return;
    std::vector<float> sel(logit_rows.size() * static_cast<size_t>(E));
    for (size_t r = 0; r < logit_rows.size(); ++r) {
        const int64_t t = logit_rows[r];
        if (t < 0 || t >= n)
            throw std::invalid_argument("logit row outside the ubatch");
        std::copy(x.begin() + t * E, x.begin() + (t + 1) * E, sel.begin() + r * E);
    }
    rms_norm(sel.data(), output_norm_, static_cast<int64_t>(logit_rows.size()), E, I.rms_eps);
    matmul(tok_embd_, sel.data(), static_cast<int64_t>(logit_rows.size()), logits, pool);
}

} // namespace

ModelInfo read_gemma3_hparams(const ModelFile& f) {
    ModelInfo I;
    const GgufFile& g = f.gguf();
    I.architecture = "gemma3";
    read_model_identity(g, I);
    I.n_layer = static_cast<int>(f.need_int("block_count"));
    I.n_embd = static_cast<int>(f.need_int("embedding_length"));
    I.n_ff = static_cast<int>(f.need_int("feed_forward_length"));
    I.n_head = static_cast<int>(f.need_int("attention.head_count"));
    I.n_head_kv = static_cast<int>(f.need_int("attention.head_count_kv"));
    I.n_ctx_train = static_cast<int>(f.need_int("context_length"));
    I.head_dim = static_cast<int>(f.need_int("attention.key_length"));
    if (f.need_int("attention.value_length") != I.head_dim)
        throw ModelError("attention.value_length differs from attention.key_length");
    if (I.n_head % I.n_head_kv != 0)
        throw ModelError("head_count " + std::to_string(I.n_head) +
                         " is not a multiple of head_count_kv " + std::to_string(I.n_head_kv));
    if (I.head_dim % 2 != 0)
        throw ModelError("key_length must be even for RoPE");
    I.sliding_window = static_cast<int>(f.need_int("attention.sliding_window"));
    if (I.sliding_window > I.n_ctx_train)
        throw ModelError("attention.sliding_window " + std::to_string(I.sliding_window) +
                         " is larger than the context length " + std::to_string(I.n_ctx_train));
    // The float hyper-parameters as Gemma 3's loader always read them: each value checked below.
    auto need_float = [&](const std::string& suffix) {
        if (!f.has(suffix))
            throw ModelError("missing hyper-parameter " + f.key(suffix));
        return g.get_float(f.key(suffix));
    };
    I.rms_eps = static_cast<float>(need_float("attention.layer_norm_rms_epsilon"));
    if (!(I.rms_eps > 0.0f && I.rms_eps < 1e-2f))
        throw ModelError("layer_norm_rms_epsilon out of range");
    I.rope_base_global = need_float("rope.freq_base");
    // Gemma 3 report §2: local layers use RoPE base 10k; llama.cpp's converter does not write it
    // for gemma3, so the architecture's value is used.
    I.rope_base_local = 10000.0;
    if (f.has("rope.freq_base_swa"))
        I.rope_base_local = need_float("rope.freq_base_swa");
    else
        I.defaults_used.push_back("rope.freq_base_swa = 10000 (Gemma 3 local layers)");
    if (!(I.rope_base_global > 1.0 && I.rope_base_local > 1.0))
        throw ModelError("RoPE bases must be > 1");
    if (f.opt_int("rope.dimension_count", I.head_dim, INT64_MIN, INT64_MAX) != I.head_dim)
        throw ModelError("partial rotary dimensions are not supported for gemma3");
    if (f.has("rope.scaling.type") && g.get_string(f.key("rope.scaling.type")) != "none")
        throw ModelError("RoPE scaling '" + g.get_string(f.key("rope.scaling.type")) +
                         "' is not supported yet");
    if (f.has("final_logit_softcapping") || f.has("attn_logit_softcapping"))
        throw ModelError("logit softcapping is not part of Gemma 3 and is not supported");
    // Gemma 3 report §2: 5 local layers for every global layer.
    I.sliding_pattern = static_cast<int>(f.opt_int("attention.sliding_window_pattern", 6));
    if (!f.has("attention.sliding_window_pattern"))
        I.defaults_used.push_back("attention.sliding_window_pattern = 6 (5 local : 1 global)");
    // Besides a chat template, the name or fine-tune says an instruction-tuned Gemma ("-it").
    std::string lname = I.name;
    std::transform(lname.begin(), lname.end(), lname.begin(), ::tolower);
    const std::string finetune = g.has("general.finetune") ? g.get_string("general.finetune") : "";
    I.instruction_tuned = I.instruction_tuned || lname.find("-it") != std::string::npos ||
                          lname.find("instruct") != std::string::npos || finetune == "it" ||
                          finetune.find("instruct") != std::string::npos;
    token_embedding(f, I); // n_vocab: its rows
    // The output head is the token embedding (Gemma 3 report §2).
    if (f.has_tensor("output.weight"))
        throw ModelError("output.weight present: untied output embeddings are not supported");

    I.layers.resize(static_cast<size_t>(I.n_layer));
    for (int il = 0; il < I.n_layer; ++il) {
        auto& L = I.layers[static_cast<size_t>(il)];
        const bool global = (il + 1) % I.sliding_pattern == 0;
        L.attn.n_head = I.n_head;
        L.attn.n_kv_head = I.n_head_kv;
        L.attn.head_dim = I.head_dim;
        // Gemma 3 uses query_pre_attn_scalar = head_dim for the 270M..12B models.
        L.attn.scale = 1.0f / std::sqrt(static_cast<float>(I.head_dim));
        L.attn.window = global ? 0 : I.sliding_window;
        L.rope = global ? I.rope_base_global : I.rope_base_local;
    }
    return I;
}

std::unique_ptr<Model> load_gemma3(std::unique_ptr<GgufFile> gguf, const std::string& path) {
    return std::make_unique<Gemma3Model>(std::move(gguf), path);
}

} // namespace spanscope
