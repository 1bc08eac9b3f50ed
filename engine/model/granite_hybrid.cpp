// Granite 4.0-H forward pass (llama.cpp src/models/granite-hybrid.cpp; HF transformers'
// GraniteMoeHybridForCausalLM). Per layer:
//   h = RMSNorm(x)
//   m = Mamba2(h)                      recurrent layers (recurrent_mamba2.h; mamba-base.cpp)
//     | Wo·attention(Wq·h, Wk·h, Wv·h) attention layers: no position encoding (Granite 4.0-H is
//                                      NoPE: the converter writes rope.scaling.finetuned = false),
//                                      scale = attention.scale (else 1/√head_dim)
//   x = x + residual_scale·m
//   x = x + residual_scale·Wdown·(silu(Wgate·h') ⊙ Wup·h'),  h' = RMSNorm(x)
//     (MoE files: x = x + residual_scale·(MoE(h') + shared(h')), moe_ffn.h, shared expert
//     ungated)
// Embeddings are multiplied by embedding_scale; logits are divided by logit_scale (each only
// when its key is present and non-zero, as llama.cpp does).
#include "engine/model/granite_hybrid.h"

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/model/model_file.h"
#include "engine/model/moe_ffn.h"
#include "engine/model/recurrent_mamba2.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

namespace spanscope {
namespace {

struct GraniteLayer {
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    WeightMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    std::optional<Mamba2Layer> mamba;
    std::optional<MoeWeights> moe; ///< set for MoE files instead of w_gate / w_up / w_down
};

class GraniteHybridModel final : public GgufModel {
public:
    GraniteHybridModel(std::unique_ptr<GgufFile> gguf, const std::string& path);
    void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                 const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                 const SurprisalRequest* surprisal = nullptr,
                 const std::atomic<bool>* cancel = nullptr,
                 const TokenFilter* filter = nullptr) const override;

private:
    void load_layer(int il);

    /// The file's hyper-parameters, read once by read_granite_hybrid_hparams (their info is info_:
    /// moved there, left empty here).
    GraniteHybridHparams hp_;
    std::vector<GraniteLayer> layers_;
};

GraniteHybridModel::GraniteHybridModel(std::unique_ptr<GgufFile> gguf, const std::string& path)
    : GgufModel(std::move(gguf), path, "granitehybrid") {
    hp_ = read_granite_hybrid_hparams(*file_);
    info_ = std::exchange(hp_.info, ModelInfo{});
    tok_embd_ = token_embedding(*file_, info_);
    load_tokenizer_and_output();
    layers_.resize(static_cast<size_t>(info_.n_layer));
    for (int il = 0; il < info_.n_layer; ++il)
        load_layer(il);
}

/// Tensors of variants this implementation does not read: their presence refuses the file.
void refuse_variant_tensors(const ModelFile& f, const std::vector<LayerInfo>& layers,
                            int64_t n_expert) {
    for (size_t il = 0; il < layers.size(); ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        if (!layers[il].recurrent()) {
            for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"})
                f.refuse_tensor(p + b, "attention biases are not implemented");
            f.refuse_tensor(p + "attn_qkv.weight", "fused QKV is not implemented");
        }
        if (n_expert == 0) {
            f.refuse_tensor(p + "ffn_gate_inp.weight", "router without granitehybrid.expert_count");
            for (const char* b : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"})
                f.refuse_tensor(p + b, "feed-forward biases are not implemented");
        }
    }
}

} // namespace

GraniteHybridHparams read_granite_hybrid_hparams(const ModelFile& f) {
    GraniteHybridHparams hp;
    auto& I = hp.info;
    const GgufFile& g = f.gguf();
    I.architecture = "granitehybrid";
    read_model_identity(g, I);
    I.n_layer = static_cast<int>(f.need_int("block_count", 1, 4096));
    I.n_embd = static_cast<int>(f.need_int("embedding_length"));
    I.n_ctx_train = static_cast<int>(f.need_int("context_length", 1, INT32_MAX));
    I.rms_eps = static_cast<float>(f.need_float("attention.layer_norm_rms_epsilon", 1e-12, 1e-2));
    // Granite 4.0-H Tiny / Small are MoE (expert_count > 0): softmax top-k with normalised
    // weights and an ungated shared expert (granite-hybrid.cpp build_layer_ffn).
    hp.n_expert = f.opt_int("expert_count", 0, 0, 4096);
    if (hp.n_expert > 0) {
        hp.n_expert_used = f.need_int("expert_used_count", 1, hp.n_expert);
        hp.n_ff_shexp = f.opt_int("expert_shared_feed_forward_length", 0, 0);
    }
    const auto n_ff = f.int_per_layer("feed_forward_length", I.n_layer, 1, int64_t{1} << 30);
    for (const int64_t v : n_ff)
        if (v != n_ff[0])
            throw ModelError("granitehybrid.feed_forward_length differs between layers");
    I.n_ff = static_cast<int>(n_ff[0]);
    const auto n_head = f.int_per_layer("attention.head_count", I.n_layer, 0, 4096);
    const auto n_head_kv = f.int_per_layer("attention.head_count_kv", I.n_layer, 0, 4096);
    // llama.cpp's loader: the head size defaults to n_embd / n_head (first layer's head count).
    if (n_head[0] <= 0)
        throw ModelError("granitehybrid.attention.head_count must be > 0");
    I.head_dim = static_cast<int>(f.opt_int("attention.key_length", I.n_embd / n_head[0]));
    if (f.opt_int("attention.value_length", I.head_dim) != I.head_dim)
        throw ModelError("granitehybrid.attention.value_length differs from key_length");
    // Granite uses rope.scaling.finetuned as its RoPE switch, default on (granite-hybrid.cpp);
    // the converter turns it off for Granite 4.0-H (hybrid, non-Bamba models).
    if (f.opt_bool("rope.scaling.finetuned", true))
        throw ModelError("granitehybrid.rope.scaling.finetuned is true (RoPE on attention "
                         "layers, as in Bamba): only NoPE Granite 4.0-H files are supported");
    I.rope_base_global = 0.0;
    const double attn_scale = f.opt_float("attention.scale", 0.0, -1e6, 1e6);
    hp.embedding_scale = static_cast<float>(f.opt_float("embedding_scale", 0.0, -1e6, 1e6));
    hp.residual_scale = static_cast<float>(f.opt_float("residual_scale", 0.0, -1e6, 1e6));
    hp.logit_scale = static_cast<float>(f.opt_float("logit_scale", 0.0, -1e6, 1e6));
    // A multiplier of 0 means "absent" to llama.cpp (if (hparams.f_..._scale)).
    if (hp.embedding_scale == 0.0f)
        hp.embedding_scale = 1.0f;
    if (hp.residual_scale == 0.0f)
        hp.residual_scale = 1.0f;
    hp.logit_scale = hp.logit_scale == 0.0f ? 1.0f : 1.0f / hp.logit_scale;

    Mamba2Shape ms;
    ms.d_model = I.n_embd;
    ms.d_conv = f.need_int("ssm.conv_kernel", 1, 64);
    ms.d_inner = f.need_int("ssm.inner_size");
    ms.d_state = f.need_int("ssm.state_size");
    ms.n_heads = f.need_int("ssm.time_step_rank"); // the head count (conversion/granite.py)
    ms.n_groups = f.need_int("ssm.group_count");
    if (ms.d_inner % ms.n_heads != 0 || ms.d_inner % ms.n_groups != 0)
        throw ModelError("granitehybrid.ssm.inner_size " + std::to_string(ms.d_inner) +
                         " is not a multiple of time_step_rank and group_count");
    ms.head_dim = ms.d_inner / ms.n_heads;
    ms.rms_eps = I.rms_eps;
    try {
        ms.validate();
    } catch (const std::invalid_argument& e) {
        throw ModelError(std::string("Mamba-2 shape: ") + e.what());
    }

    token_embedding(f, I); // n_vocab: its rows

    I.layers.resize(static_cast<size_t>(I.n_layer));
    for (int il = 0; il < I.n_layer; ++il) {
        auto& L = I.layers[static_cast<size_t>(il)];
        const auto i = static_cast<size_t>(il);
        if (n_head_kv[i] == 0) { // llama.cpp: a layer is recurrent iff its head_count_kv is 0
            L.kind = LayerKind::Mamba2;
            L.mamba2 = ms;
            continue;
        }
        if (n_head[i] <= 0 || n_head[i] % n_head_kv[i] != 0)
            throw ModelError("layer " + std::to_string(il) + ": head_count " +
                             std::to_string(n_head[i]) + " is not a multiple of head_count_kv " +
                             std::to_string(n_head_kv[i]));
        L.attn.n_head = static_cast<int>(n_head[i]);
        L.attn.n_kv_head = static_cast<int>(n_head_kv[i]);
        L.attn.head_dim = I.head_dim;
        L.attn.scale = attn_scale != 0.0 ? static_cast<float>(attn_scale)
                                         : 1.0f / std::sqrt(static_cast<float>(I.head_dim));
        L.attn.window = 0;
        L.rope_dims = 0; // NoPE
        if (I.n_head == 0) {
            I.n_head = L.attn.n_head;
            I.n_head_kv = L.attn.n_kv_head;
        }
    }
    refuse_variant_tensors(f, I.layers, hp.n_expert);
    return hp;
}

namespace {

void GraniteHybridModel::load_layer(int il) {
    const auto& I = info_;
    const auto& LI = I.layers[static_cast<size_t>(il)];
    auto& L = layers_[static_cast<size_t>(il)];
    ModelFile& f = *file_;
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t E = I.n_embd;
    L.attn_norm = f.floats(p + "attn_norm.weight", {E});
    L.ffn_norm = f.floats(p + "ffn_norm.weight", {E});
    if (LI.kind == LayerKind::Mamba2) {
        const auto& s = LI.mamba2;
        Mamba2Weights w;
        w.in_proj = f.matrix(p + "ssm_in.weight", E, s.in_proj_dim());
        w.conv_weight = f.floats(p + "ssm_conv1d.weight", {s.d_conv, s.conv_dim()});
        if (f.has_tensor(p + "ssm_conv1d.bias")) // optional to llama.cpp's loader
            w.conv_bias = f.floats(p + "ssm_conv1d.bias", {s.conv_dim()});
        w.dt_bias = f.floats(p + "ssm_dt.bias", {s.n_heads});
        w.A = f.floats(p + "ssm_a", {1, s.n_heads});
        w.D = f.floats(p + "ssm_d", {1, s.n_heads});
        w.norm_weight = f.floats(p + "ssm_norm.weight", {s.d_inner / s.n_groups, s.n_groups});
        w.out_proj = f.matrix(p + "ssm_out.weight", s.d_inner, E);
        try {
            L.mamba.emplace(s, w);
        } catch (const std::invalid_argument& e) {
            throw ModelError("layer " + std::to_string(il) + " (Mamba-2): " + e.what());
        }
    } else {
        const int64_t q_dim = int64_t{LI.attn.n_head} * LI.attn.head_dim;
        const int64_t kv_dim = int64_t{LI.attn.n_kv_head} * LI.attn.head_dim;
        L.wq = f.matrix(p + "attn_q.weight", E, q_dim);
        L.wk = f.matrix(p + "attn_k.weight", E, kv_dim);
        L.wv = f.matrix(p + "attn_v.weight", E, kv_dim);
        L.wo = f.matrix(p + "attn_output.weight", q_dim, E);
    }
    if (hp_.n_expert > 0) {
        // Experts are n_ff wide (feed_forward_length), as llama.cpp's loader reads them.
        auto& m = L.moe.emplace();
        m.n_embd = E;
        m.n_ff_expert = I.n_ff;
        m.n_expert = hp_.n_expert;
        m.n_used = hp_.n_expert_used;
        m.router = f.matrix(p + "ffn_gate_inp.weight", E, hp_.n_expert);
        if (!f.has_tensor(p + "ffn_gate_exps.weight"))
            throw ModelError("missing tensor " + p +
                             "ffn_gate_exps.weight (experts without a gate are not supported)");
        m.gate = f.experts(p + "ffn_gate_exps.weight", E, I.n_ff, hp_.n_expert);
        m.up = f.experts(p + "ffn_up_exps.weight", E, I.n_ff, hp_.n_expert);
        m.down = f.experts(p + "ffn_down_exps.weight", I.n_ff, E, hp_.n_expert);
        if (hp_.n_ff_shexp > 0) { // Granite MoE Shared: added without a gate
            m.n_ff_shared = hp_.n_ff_shexp;
            m.shared_gate = f.matrix(p + "ffn_gate_shexp.weight", E, hp_.n_ff_shexp);
            m.shared_up = f.matrix(p + "ffn_up_shexp.weight", E, hp_.n_ff_shexp);
            m.shared_down = f.matrix(p + "ffn_down_shexp.weight", hp_.n_ff_shexp, E);
        }
        return;
    }
    L.w_gate = f.matrix(p + "ffn_gate.weight", E, I.n_ff);
    L.w_up = f.matrix(p + "ffn_up.weight", E, I.n_ff);
    L.w_down = f.matrix(p + "ffn_down.weight", I.n_ff, E);
}

void GraniteHybridModel::forward(const int32_t* tokens, const int32_t* pos, int64_t n,
                                 ModelMemory& memory, const std::vector<int64_t>& logit_rows,
                                 float* logits, ThreadPool& pool, const SurprisalRequest* surprisal,
                                 const std::atomic<bool>* cancel, const TokenFilter* filter) const {
    const auto& I = info_;
    if (filter)
        throw std::invalid_argument("token filters are not supported by hybrid models: their "
                                    "recurrent layers need every token");
    check_forward_inputs(I, tokens, pos, n, memory);
    const int64_t E = I.n_embd, F = I.n_ff;
    std::vector<float> x(static_cast<size_t>(n * E)), h(x.size()), o(x.size());
    std::vector<float> q, k, v, att;
    std::vector<float> gate(static_cast<size_t>(n * F)), up(gate.size());
    for (int64_t t = 0; t < n; ++t) {
        dequantize_row(tok_embd_.type, tok_embd_.row(tokens[t]), x.data() + t * E, E);
        for (int64_t i = 0; i < E; ++i)
            x[t * E + i] *= hp_.embedding_scale;
    }
    for (int il = 0; il < I.n_layer; ++il) {
        if (cancel && cancel->load())
            throw Cancelled();
        const auto& L = layers_[static_cast<size_t>(il)];
        const auto& LI = I.layers[static_cast<size_t>(il)];
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.attn_norm, n, E, I.rms_eps);
        if (L.mamba) {
            RecurrentMemory& rm = memory.recurrent(il);
            // One token: the recurrence itself (ggml_ssm_scan); more: the chunked SSD prefill.
            if (n == 1)
                L.mamba->decode(h.data(), o.data(), rm.mamba2(), pool);
            else
                L.mamba->prefill(h.data(), n, o.data(), rm.mamba2(), pool);
            rm.advance(n);
        } else {
            const int64_t q_dim = int64_t{LI.attn.n_head} * LI.attn.head_dim;
            const int64_t kv_dim = int64_t{LI.attn.n_kv_head} * LI.attn.head_dim;
            q.resize(static_cast<size_t>(n * q_dim));
            att.resize(q.size());
            k.resize(static_cast<size_t>(n * kv_dim));
            v.resize(k.size());
            matmul(L.wq, h.data(), n, q.data(), pool);
            matmul(L.wk, h.data(), n, k.data(), pool);
            matmul(L.wv, h.data(), n, v.data(), pool);
            LayerMemory& mem = memory.layer(il);
            mem.store(k.data(), v.data(), pos, n);
            mem.attend(q.data(), pos, n, att.data(), pool);
            matmul(L.wo, att.data(), n, o.data(), pool);
        }
        for (int64_t i = 0; i < n * E; ++i)
            x[i] += hp_.residual_scale * o[i];

        if (cancel && cancel->load())
            throw Cancelled();
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.ffn_norm, n, E, I.rms_eps);
        if (L.moe) {
            moe_ffn(*L.moe, h.data(), n, o.data(), pool);
        } else {
            matmul(L.w_gate, h.data(), n, gate.data(), pool);
            matmul(L.w_up, h.data(), n, up.data(), pool);
            swiglu(gate.data(), up.data(), n * F);
            matmul(L.w_down, gate.data(), n, o.data(), pool);
        }
        for (int64_t i = 0; i < n * E; ++i)
            x[i] += hp_.residual_scale * o[i];
    }
    lm_head(x.data(), n, E, output_norm_, I.rms_eps, hp_.logit_scale, output_, logit_rows, logits,
            pool, surprisal, cancel);
}

} // namespace

std::unique_ptr<Model> load_granite_hybrid(std::unique_ptr<GgufFile> gguf,
                                           const std::string& path) {
    return std::make_unique<GraniteHybridModel>(std::move(gguf), path);
}

} // namespace spanscope
