// Qwen3-Next forward pass (llama.cpp src/models/qwen3next.cpp; HF transformers'
// Qwen3NextForCausalLM). Per layer:
//   h = RMSNorm(x)
//   a = GatedDeltaNet(h)                       recurrent layers (recurrent_gated_deltanet.h)
//     | Wo·(attention(q, k, v) ⊙ sigmoid(g))   attention layers: [q | g] per head = Wq·h (the
//                                              query projection carries the output gate),
//                                              q, k RMSNorm per head, partial NeoX RoPE over the
//                                              first rope.dimension_count elements of each head
//   x = x + a
//   x = x + MoE(RMSNorm(x))                    moe_ffn.h: softmax top-k, normalised weights,
//                                              shared expert gated by sigmoid(w·h)
// Norm weights are used as stored: the converter has already added HF's "+1" (conversion/qwen.py).
// The Gated DeltaNet's L2 norm uses the model's rms epsilon, as llama.cpp's build_gdn_l2_norm
// does (x / √(Σx² + eps)).
#include "engine/model/qwen3next.h"

#include "engine/kernels/matmul.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/rope.h"
#include "engine/model/model_file.h"
#include "engine/model/moe_ffn.h"
#include "engine/model/recurrent_gated_deltanet.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

namespace spanscope {
namespace {

struct Qwen3NextLayer {
    const float* attn_norm = nullptr;
    const float* post_attn_norm = nullptr;
    const float* q_norm = nullptr;
    const float* k_norm = nullptr;
    WeightMatrix wq, wk, wv, wo; ///< wq rows n_head·2·head_dim: [q_h | gate_h] per head
    std::optional<GatedDeltaNetLayer> gdn;
    MoeWeights moe;
};

class Qwen3NextModel final : public GgufModel {
public:
    Qwen3NextModel(std::unique_ptr<GgufFile> gguf, const std::string& path);
    void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                 const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                 const SurprisalRequest* surprisal = nullptr,
                 const std::atomic<bool>* cancel = nullptr,
                 const TokenFilter* filter = nullptr) const override;

private:
    void load_layer(int il);

    /// The file's hyper-parameters, read once by read_qwen3next_hparams (their info is info_: moved
    /// there, left empty here).
    Qwen3NextHparams hp_;
    std::vector<Qwen3NextLayer> layers_;
};

Qwen3NextModel::Qwen3NextModel(std::unique_ptr<GgufFile> gguf, const std::string& path)
    : GgufModel(std::move(gguf), path, "qwen3next") {
    hp_ = read_qwen3next_hparams(*file_);
    info_ = std::exchange(hp_.info, ModelInfo{});
    tok_embd_ = token_embedding(*file_, info_);
    load_tokenizer_and_output();
    layers_.resize(static_cast<size_t>(info_.n_layer));
    for (int il = 0; il < info_.n_layer; ++il)
        load_layer(il);
}

/// Tensors of variants this implementation does not read: their presence refuses the file.
void refuse_variant_tensors(const ModelFile& f, const std::vector<LayerInfo>& layers) {
    for (size_t il = 0; il < layers.size(); ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        if (!layers[il].recurrent()) {
            for (const char* b : {"attn_q.bias", "attn_k.bias", "attn_v.bias"})
                f.refuse_tensor(p + b, "attention biases are not implemented");
            f.refuse_tensor(p + "attn_qkv.weight",
                            "fused QKV in attention layers is not implemented");
        }
        f.refuse_tensor(p + "ffn_gate_up_exps.weight", "fused gate/up experts are not implemented");
    }
}

} // namespace

Qwen3NextHparams read_qwen3next_hparams(const ModelFile& f) {
    Qwen3NextHparams hp;
    auto& I = hp.info;
    const GgufFile& g = f.gguf();
    I.architecture = "qwen3next";
    read_model_identity(g, I);
    I.n_layer = static_cast<int>(f.need_int("block_count", 1, 4096));
    if (f.opt_int("nextn_predict_layers", 0, 0, 4096) != 0)
        throw ModelError("qwen3next.nextn_predict_layers > 0: multi-token-prediction layers "
                         "are not supported");
    I.n_embd = static_cast<int>(f.need_int("embedding_length"));
    I.n_ctx_train = static_cast<int>(f.need_int("context_length", 1, INT32_MAX));
    I.rms_eps = static_cast<float>(f.need_float("attention.layer_norm_rms_epsilon", 1e-12, 1e-2));
    I.n_head = static_cast<int>(f.need_int("attention.head_count", 1, 4096));
    I.n_head_kv = static_cast<int>(f.need_int("attention.head_count_kv", 1, 4096));
    if (I.n_head % I.n_head_kv != 0)
        throw ModelError("head_count " + std::to_string(I.n_head) +
                         " is not a multiple of head_count_kv " + std::to_string(I.n_head_kv));
    I.head_dim = static_cast<int>(f.opt_int("attention.key_length", I.n_embd / I.n_head));
    if (f.opt_int("attention.value_length", I.head_dim) != I.head_dim)
        throw ModelError("qwen3next.attention.value_length differs from key_length");
    hp.rope_dims = static_cast<int>(f.opt_int("rope.dimension_count", I.head_dim, 2, I.head_dim));
    if (hp.rope_dims % 2 != 0)
        throw ModelError("qwen3next.rope.dimension_count must be even");
    I.rope_base_global = f.opt_float("rope.freq_base", 10000.0, 1.0 + 1e-9, 1e12);
    if (!f.has("rope.freq_base"))
        I.defaults_used.push_back("rope.freq_base = 10000 (llama.cpp's default)");
    if (f.has("rope.scaling.type") && g.get_string(f.key("rope.scaling.type")) != "none" &&
        g.get_string(f.key("rope.scaling.type")) != "linear")
        throw ModelError("RoPE scaling '" + g.get_string(f.key("rope.scaling.type")) +
                         "' is not supported");
    if (f.opt_float("rope.scaling.factor", 1.0, 0.0, 1e6) != 1.0 &&
        f.opt_float("rope.scaling.factor", 1.0, 0.0, 1e6) != 0.0)
        throw ModelError("qwen3next.rope.scaling.factor ≠ 1 is not supported");
    const double attn_scale = f.opt_float("attention.scale", 0.0, -1e6, 1e6);
    I.n_ff = static_cast<int>(f.opt_int("feed_forward_length", 0, 0));

    hp.n_expert = f.opt_int("expert_count", 0, 0, 4096);
    if (hp.n_expert == 0) // llama.cpp: "model cannot have zero experts"
        throw ModelError("qwen3next.expert_count is missing or 0: qwen3next files are MoE");
    hp.n_expert_used = f.need_int("expert_used_count", 1, hp.n_expert);
    hp.n_ff_exp = f.has("expert_feed_forward_length") ? f.need_int("expert_feed_forward_length")
                                                      : I.n_ff / hp.n_expert_used;
    if (hp.n_ff_exp <= 0)
        throw ModelError("qwen3next.expert_feed_forward_length is missing");
    hp.n_ff_shexp = f.opt_int("expert_shared_feed_forward_length", I.n_ff, 0);
    if (hp.n_ff_shexp <= 0)
        throw ModelError("qwen3next.expert_shared_feed_forward_length is missing");

    GatedDeltaNetShape gs;
    gs.d_model = I.n_embd;
    gs.d_conv = f.need_int("ssm.conv_kernel", 1, 64);
    gs.d_k = f.need_int("ssm.state_size");
    gs.n_k_heads = f.need_int("ssm.group_count");
    gs.n_v_heads = f.need_int("ssm.time_step_rank");
    const int64_t d_inner = f.need_int("ssm.inner_size");
    if (d_inner % gs.n_v_heads != 0)
        throw ModelError("qwen3next.ssm.inner_size is not a multiple of ssm.time_step_rank");
    gs.d_v = d_inner / gs.n_v_heads;
    if (gs.d_v != gs.d_k) // llama.cpp's state is {d_v, d_v, n_v} and asserts S_k == S_v
        throw ModelError("qwen3next: value head size " + std::to_string(gs.d_v) +
                         " differs from the key head size " + std::to_string(gs.d_k));
    gs.rms_eps = I.rms_eps;
    gs.l2_eps = I.rms_eps;
    try {
        gs.validate();
    } catch (const std::invalid_argument& e) {
        throw ModelError(std::string("Gated DeltaNet shape: ") + e.what());
    }

    std::vector<bool> recurrent;
    if (f.has("attention.recurrent_layers")) {
        recurrent = f.bool_per_layer("attention.recurrent_layers", I.n_layer);
    } else {
        if (!f.has("full_attention_interval"))
            I.defaults_used.push_back("full_attention_interval = 4 (llama.cpp's default)");
        const int64_t interval = f.opt_int("full_attention_interval", 4, 1, 4096);
        for (int il = 0; il < I.n_layer; ++il)
            recurrent.push_back((il + 1) % interval != 0);
    }

    token_embedding(f, I); // n_vocab: its rows

    I.layers.resize(static_cast<size_t>(I.n_layer));
    for (int il = 0; il < I.n_layer; ++il) {
        auto& L = I.layers[static_cast<size_t>(il)];
        if (recurrent[static_cast<size_t>(il)]) {
            L.kind = LayerKind::GatedDeltaNet;
            L.gated_deltanet = gs;
            continue;
        }
        L.attn.n_head = I.n_head;
        L.attn.n_kv_head = I.n_head_kv;
        L.attn.head_dim = I.head_dim;
        L.attn.scale = attn_scale != 0.0 ? static_cast<float>(attn_scale)
                                         : 1.0f / std::sqrt(static_cast<float>(I.head_dim));
        L.attn.window = 0;
        L.rope = I.rope_base_global;
        L.rope_dims = hp.rope_dims;
    }
    refuse_variant_tensors(f, I.layers);
    return hp;
}

namespace {

void Qwen3NextModel::load_layer(int il) {
    const auto& I = info_;
    const auto& LI = I.layers[static_cast<size_t>(il)];
    auto& L = layers_[static_cast<size_t>(il)];
    ModelFile& f = *file_;
    const std::string p = "blk." + std::to_string(il) + ".";
    const int64_t E = I.n_embd;
    L.attn_norm = f.floats(p + "attn_norm.weight", {E});
    L.post_attn_norm = f.floats(p + "post_attention_norm.weight", {E});
    if (LI.kind == LayerKind::GatedDeltaNet) {
        const auto& s = LI.gated_deltanet;
        GatedDeltaNetWeights w;
        if (f.has_tensor(p + "attn_qkv.weight")) {
            w.qkv = f.matrix(p + "attn_qkv.weight", E, s.conv_dim());
            w.gate = f.matrix(p + "attn_gate.weight", E, s.value_dim());
        } else if (f.has_tensor(p + "ssm_in.weight")) { // older converters' fused projection
            w.qkvz = f.matrix(p + "ssm_in.weight", E, s.qkvz_dim());
        } else {
            throw ModelError("missing tensor " + p + "attn_qkv.weight (or the older " + p +
                             "ssm_in.weight)");
        }
        w.ba = f.matrix(p + "ssm_ba.weight", E, 2 * s.n_v_heads);
        w.conv_weight = f.floats(p + "ssm_conv1d.weight", {s.d_conv, s.conv_dim()});
        w.dt_bias = f.floats(p + "ssm_dt.bias", {s.n_v_heads});
        w.A = f.floats(p + "ssm_a", {s.n_v_heads});
        w.norm_weight = f.floats(p + "ssm_norm.weight", {s.d_v});
        w.out = f.matrix(p + "ssm_out.weight", s.value_dim(), E);
        try {
            L.gdn.emplace(s, w);
        } catch (const std::invalid_argument& e) {
            throw ModelError("layer " + std::to_string(il) + " (Gated DeltaNet): " + e.what());
        }
    } else {
        const int64_t D = LI.attn.head_dim;
        const int64_t q_dim = int64_t{LI.attn.n_head} * D;
        const int64_t kv_dim = int64_t{LI.attn.n_kv_head} * D;
        L.wq = f.matrix(p + "attn_q.weight", E, 2 * q_dim);
        L.wk = f.matrix(p + "attn_k.weight", E, kv_dim);
        L.wv = f.matrix(p + "attn_v.weight", E, kv_dim);
        L.wo = f.matrix(p + "attn_output.weight", q_dim, E);
        L.q_norm = f.floats(p + "attn_q_norm.weight", {D});
        L.k_norm = f.floats(p + "attn_k_norm.weight", {D});
    }
    auto& m = L.moe;
    m.n_embd = E;
    m.n_ff_expert = hp_.n_ff_exp;
    m.n_expert = hp_.n_expert;
    m.n_used = hp_.n_expert_used;
    m.router = f.matrix(p + "ffn_gate_inp.weight", E, hp_.n_expert);
    m.gate = f.experts(p + "ffn_gate_exps.weight", E, hp_.n_ff_exp, hp_.n_expert);
    m.up = f.experts(p + "ffn_up_exps.weight", E, hp_.n_ff_exp, hp_.n_expert);
    m.down = f.experts(p + "ffn_down_exps.weight", hp_.n_ff_exp, E, hp_.n_expert);
    m.n_ff_shared = hp_.n_ff_shexp;
    m.shared_router = f.floats(p + "ffn_gate_inp_shexp.weight", {E});
    m.shared_gate = f.matrix(p + "ffn_gate_shexp.weight", E, hp_.n_ff_shexp);
    m.shared_up = f.matrix(p + "ffn_up_shexp.weight", E, hp_.n_ff_shexp);
    m.shared_down = f.matrix(p + "ffn_down_shexp.weight", hp_.n_ff_shexp, E);
}

void Qwen3NextModel::forward(const int32_t* tokens, const int32_t* pos, int64_t n,
                             ModelMemory& memory, const std::vector<int64_t>& logit_rows,
                             float* logits, ThreadPool& pool, const SurprisalRequest* surprisal,
                             const std::atomic<bool>* cancel, const TokenFilter* filter) const {
    const auto& I = info_;
    if (filter)
        throw std::invalid_argument("token filters are not supported by hybrid models: their "
                                    "recurrent layers need every token");
    check_forward_inputs(I, tokens, pos, n, memory);
    const int64_t E = I.n_embd, D = I.head_dim;
    const int64_t q_dim = int64_t{I.n_head} * D, kv_dim = int64_t{I.n_head_kv} * D;
    std::vector<float> x(static_cast<size_t>(n * E)), h(x.size()), o(x.size());
    std::vector<float> qg, q, gate, att, k, v;
    for (int64_t t = 0; t < n; ++t)
        dequantize_row(tok_embd_.type, tok_embd_.row(tokens[t]), x.data() + t * E, E);
    const RopeTable rope(pos, n, hp_.rope_dims, I.rope_base_global);

    for (int il = 0; il < I.n_layer; ++il) {
        if (cancel && cancel->load())
            throw Cancelled();
        const auto& L = layers_[static_cast<size_t>(il)];
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.attn_norm, n, E, I.rms_eps);
        if (L.gdn) {
            RecurrentMemory& rm = memory.recurrent(il);
            // One token: the recurrence itself; more: the chunked (WY) prefill.
            if (n == 1)
                L.gdn->decode(h.data(), o.data(), rm.gated_deltanet(), pool);
            else
                L.gdn->prefill(h.data(), n, o.data(), rm.gated_deltanet(), pool);
            rm.advance(n);
        } else {
            qg.resize(static_cast<size_t>(n * 2 * q_dim));
            q.resize(static_cast<size_t>(n * q_dim));
            gate.resize(q.size());
            att.resize(q.size());
            k.resize(static_cast<size_t>(n * kv_dim));
            v.resize(k.size());
            matmul(L.wq, h.data(), n, qg.data(), pool);
            for (int64_t t = 0; t < n; ++t) // per head: [q (D) | gate (D)]
                for (int hd = 0; hd < I.n_head; ++hd) {
                    const float* src = qg.data() + (t * I.n_head + hd) * 2 * D;
                    std::copy(src, src + D, q.begin() + (t * I.n_head + hd) * D);
                    std::copy(src + D, src + 2 * D, gate.begin() + (t * I.n_head + hd) * D);
                }
            matmul(L.wk, h.data(), n, k.data(), pool);
            matmul(L.wv, h.data(), n, v.data(), pool);
            rms_norm(q.data(), L.q_norm, n * I.n_head, D, I.rms_eps);
            rms_norm(k.data(), L.k_norm, n * I.n_head_kv, D, I.rms_eps);
            rope_neox_partial(q.data(), rope, n, I.n_head, static_cast<int>(D));
            rope_neox_partial(k.data(), rope, n, I.n_head_kv, static_cast<int>(D));
            LayerMemory& mem = memory.layer(il);
            mem.store(k.data(), v.data(), pos, n);
            mem.attend(q.data(), pos, n, att.data(), pool);
            sigmoid_inplace(gate.data(), n * q_dim);
            for (int64_t i = 0; i < n * q_dim; ++i)
                att[i] *= gate[i];
            matmul(L.wo, att.data(), n, o.data(), pool);
        }
        add_inplace(x.data(), o.data(), n * E);

        if (cancel && cancel->load())
            throw Cancelled();
        std::copy(x.begin(), x.end(), h.begin());
        rms_norm(h.data(), L.post_attn_norm, n, E, I.rms_eps);
        moe_ffn(L.moe, h.data(), n, o.data(), pool);
        add_inplace(x.data(), o.data(), n * E);
    }
    lm_head(x.data(), n, E, output_norm_, I.rms_eps, 1.0f, output_, logit_rows, logits, pool,
            surprisal, cancel);
}

} // namespace

std::unique_ptr<Model> load_qwen3next(std::unique_ptr<GgufFile> gguf, const std::string& path) {
    return std::make_unique<Qwen3NextModel>(std::move(gguf), path);
}

} // namespace spanscope
