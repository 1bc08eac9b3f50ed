#include "tiny_model.h"

#include "engine/gguf/gguf_writer.h"

#include <cmath>
#include <cstdio>
#include <random>

namespace spanscope::test {

std::vector<std::string> tiny_vocab() {
    std::vector<std::string> v{"<pad>",           "<eos>",         "<bos>", "<unk>",
                               "<start_of_turn>", "<end_of_turn>", "\n"};
    char buf[8];
    for (int b = 0; b < 256; ++b) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        v.emplace_back(buf);
    }
    for (const char* w : {"\xe2\x96\x81", "a", "b", "c", "e", "h", "t", "th", "the",
                          "\xe2\x96\x81"
                          "the",
                          "\xe2\x96\x81"
                          "a",
                          "at",
                          "\xe2\x96\x81"
                          "cat",
                          "c", "o"}) {
        bool dup = false;
        for (const auto& s : v)
            dup = dup || s == w;
        if (!dup)
            v.emplace_back(w);
    }
    return v;
}

namespace {

// The tiny SentencePiece vocabulary as tokenizer.ggml.* keys (llama.cpp's "llama" model).
void write_tiny_vocab(GgufWriter& w, bool alternate_scores = false) {
    const auto vocab = tiny_vocab();
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (size_t i = 0; i < vocab.size(); ++i) {
        const bool control = i < 6;
        const bool user = vocab[i] == "\n";
        const bool byte = vocab[i].size() == 6 && vocab[i].rfind("<0x", 0) == 0;
        types.push_back(control ? 3 : user ? 4 : byte ? 6 : 1);
        const float word =
            alternate_scores ? -static_cast<float>(vocab.size() - i) : -static_cast<float>(i);
        scores.push_back(control || user ? -1000.0f : byte ? 0.0f : word);
    }
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", vocab);
    w.set_float32_array("tokenizer.ggml.scores", scores);
    w.set_int32_array("tokenizer.ggml.token_type", types);
    w.set_uint32("tokenizer.ggml.bos_token_id", 2);
    w.set_uint32("tokenizer.ggml.eos_token_id", 1);
    w.set_uint32("tokenizer.ggml.unknown_token_id", 3);
    w.set_uint32("tokenizer.ggml.padding_token_id", 0);
    w.set_bool("tokenizer.ggml.add_bos_token", true);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
}

} // namespace

TinyGemma3Config slower_tiny_gemma3() {
    TinyGemma3Config c;
    c.n_layer = 6;
    c.n_embd = 128;
    c.n_ff = 512;
    c.n_ctx = 2048;
    c.sliding_window = 16;
    return c;
}

void write_tiny_gemma3(const std::string& path, const TinyGemma3Config& c) {
    GgufWriter w;
    const std::string a = c.architecture + ".";
    w.set_string("general.architecture", c.architecture);
    w.set_string("general.name", c.name);
    w.set_uint32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
    w.set_uint32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
    w.set_uint32(a + "block_count", static_cast<uint32_t>(c.n_layer));
    w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
    w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
    w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_float32(a + "rope.freq_base", c.rope_base);
    if (c.write_local_base)
        w.set_float32(a + "rope.freq_base_swa", c.rope_base_local);
    w.set_uint32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
    if (c.write_pattern)
        w.set_uint32(a + "attention.sliding_window_pattern",
                     static_cast<uint32_t>(c.sliding_pattern));

    write_tiny_vocab(w, c.alternate_scores);
    const auto vocab = tiny_vocab();
    std::mt19937_64 rng(c.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto random = [&](int64_t n, float scale, float offset = 0.0f) {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v)
            x = offset + scale * normal(rng);
        return v;
    };
    const int64_t E = c.n_embd, V = static_cast<int64_t>(vocab.size());
    const int64_t q_dim = int64_t{c.n_head} * c.head_dim,
                  kv_dim = int64_t{c.n_head_kv} * c.head_dim;
    w.add_tensor_f32("token_embd.weight", c.embd_type, {E, V}, random(E * V, 0.5f));
    w.add_tensor_f32("output_norm.weight", TensorType::F32, {E}, random(E, 0.1f, 1.0f));
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        auto mat = [&](const std::string& name, int64_t cols, int64_t rows) {
            w.add_tensor_f32(p + name, c.matrix_type, {cols, rows},
                             random(cols * rows, 1.0f / std::sqrt(static_cast<float>(cols))));
        };
        auto norm = [&](const std::string& name, int64_t n) {
            w.add_tensor_f32(p + name, TensorType::F32, {n}, random(n, 0.1f, 1.0f));
        };
        norm("attn_norm.weight", E);
        if (c.architecture == "gemma3" || c.architecture == "qwen3") {
            // Per-head q/k norms belong to these; a `llama` file with them is refused.
            norm("attn_q_norm.weight", c.head_dim);
            norm("attn_k_norm.weight", c.head_dim);
        }
        norm("post_attention_norm.weight", E);
        norm("ffn_norm.weight", E);
        norm("post_ffw_norm.weight", E);
        mat("attn_q.weight", E, q_dim);
        mat("attn_k.weight", E, kv_dim);
        mat("attn_v.weight", E, kv_dim);
        mat("attn_output.weight", q_dim, E);
        mat("ffn_gate.weight", E, c.n_ff);
        mat("ffn_up.weight", E, c.n_ff);
        mat("ffn_down.weight", c.n_ff, E);
    }
    w.write(path);
}

namespace {

// Random tensors for the hybrid writers, with the error-test hooks (skip, one row short).
struct HybridTensorWriter {
    GgufWriter& w;
    std::mt19937_64 rng;
    std::string skip, reshape;
    std::normal_distribution<float> normal{0.0f, 1.0f};
    std::uniform_real_distribution<float> uniform{0.0f, 1.0f};

    void put(const std::string& name, std::vector<int64_t> ne, std::vector<float> data) {
        if (name == skip)
            return;
        if (name == reshape) { // one row (or element) short
            ne.back() -= 1;
            int64_t n = 1;
            for (const auto d : ne)
                n *= d;
            data.resize(static_cast<size_t>(n));
        }
        w.add_tensor_f32(name, TensorType::F32, ne, data);
    }
    std::vector<float> random(int64_t n, float scale, float offset = 0.0f) {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v)
            x = offset + scale * normal(rng);
        return v;
    }
    void mat(const std::string& name, int64_t cols, int64_t rows) {
        put(name, {cols, rows}, random(cols * rows, 1.0f / std::sqrt(static_cast<float>(cols))));
    }
    void norm(const std::string& name, int64_t n) { put(name, {n}, random(n, 0.1f, 1.0f)); }
    // A = -exp(A_log), A_log ~ U(log 1, log 16) (mamba_ssm's A_init_range).
    std::vector<float> ssm_a(int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v)
            x = -std::exp(std::log(16.0f) * uniform(rng));
        return v;
    }
    // dt_bias = softplus⁻¹(dt), dt ~ log-uniform [1e-3, 1e-1] (mamba_ssm's dt init).
    std::vector<float> dt_bias(int64_t n) {
        std::vector<float> v(static_cast<size_t>(n));
        for (auto& x : v) {
            const float dt = std::exp(std::log(1e-3f) + uniform(rng) * std::log(100.0f));
            x = dt + std::log(-std::expm1(-dt));
        }
        return v;
    }
};

} // namespace

void write_tiny_granite_hybrid(const std::string& path, const TinyGraniteHybridConfig& c) {
    GgufWriter w;
    const std::string a = "granitehybrid.";
    const int64_t E = c.n_embd, d_inner = 2 * E, N = c.d_state, H = c.ssm_heads, G = c.ssm_groups;
    const int64_t conv_dim = d_inner + 2 * G * N, in_dim = 2 * d_inner + 2 * G * N + H;
    const int64_t head_dim = E / c.n_head;
    auto is_attn = [&](int il) {
        for (const int a_il : c.attention_layers)
            if (a_il == il)
                return true;
        return false;
    };
    w.set_string("general.architecture", "granitehybrid");
    w.set_string("general.name", "tiny granitehybrid test model");
    w.set_uint32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
    w.set_uint32(a + "embedding_length", static_cast<uint32_t>(E));
    w.set_uint32(a + "block_count", static_cast<uint32_t>(c.n_layer));
    w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
    w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
    std::vector<int32_t> kv;
    for (int il = 0; il < c.n_layer; ++il)
        kv.push_back(is_attn(il) ? c.n_head_kv : 0);
    w.set_int32_array(a + "attention.head_count_kv", kv);
    w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_float32(a + "attention.scale", c.attention_scale);
    w.set_float32(a + "embedding_scale", c.embedding_scale);
    w.set_float32(a + "residual_scale", c.residual_scale);
    w.set_float32(a + "logit_scale", c.logit_scale);
    w.set_bool(a + "rope.scaling.finetuned", false);
    if (c.expert_count > 0) {
        w.set_uint32(a + "expert_count", static_cast<uint32_t>(c.expert_count));
        w.set_uint32(a + "expert_used_count", static_cast<uint32_t>(c.expert_used));
        w.set_uint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(c.n_ff_shexp));
    }
    w.set_uint32(a + "ssm.conv_kernel", static_cast<uint32_t>(c.d_conv));
    w.set_uint32(a + "ssm.state_size", static_cast<uint32_t>(N));
    w.set_uint32(a + "ssm.group_count", static_cast<uint32_t>(G));
    w.set_uint32(a + "ssm.inner_size", static_cast<uint32_t>(d_inner));
    w.set_uint32(a + "ssm.time_step_rank", static_cast<uint32_t>(H));
    write_tiny_vocab(w);
    const auto V = static_cast<int64_t>(tiny_vocab().size());

    HybridTensorWriter t{w, std::mt19937_64(c.seed), c.skip_tensor, c.reshape_tensor};
    t.put("token_embd.weight", {E, V}, t.random(E * V, 0.5f));
    t.norm("output_norm.weight", E);
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        t.norm(p + "attn_norm.weight", E);
        if (is_attn(il)) {
            t.mat(p + "attn_q.weight", E, c.n_head * head_dim);
            t.mat(p + "attn_k.weight", E, c.n_head_kv * head_dim);
            t.mat(p + "attn_v.weight", E, c.n_head_kv * head_dim);
            t.mat(p + "attn_output.weight", c.n_head * head_dim, E);
        } else {
            t.mat(p + "ssm_in.weight", E, in_dim);
            t.put(p + "ssm_conv1d.weight", {c.d_conv, conv_dim},
                  t.random(c.d_conv * conv_dim, 0.5f));
            t.put(p + "ssm_conv1d.bias", {conv_dim}, t.random(conv_dim, 0.1f));
            t.put(p + "ssm_dt.bias", {H}, t.dt_bias(H));
            t.put(p + "ssm_a", {1, H}, t.ssm_a(H));
            t.put(p + "ssm_d", {1, H}, t.random(H, 0.1f, 1.0f));
            t.put(p + "ssm_norm.weight", {d_inner / G, G}, t.random(d_inner, 0.1f, 1.0f));
            t.mat(p + "ssm_out.weight", d_inner, E);
        }
        t.norm(p + "ffn_norm.weight", E);
        if (c.expert_count > 0) {
            const int64_t F = c.n_ff, X = c.expert_count;
            t.mat(p + "ffn_gate_inp.weight", E, X);
            t.put(p + "ffn_gate_exps.weight", {E, F, X},
                  t.random(E * F * X, 1.0f / std::sqrt(float(E))));
            t.put(p + "ffn_up_exps.weight", {E, F, X},
                  t.random(E * F * X, 1.0f / std::sqrt(float(E))));
            t.put(p + "ffn_down_exps.weight", {F, E, X},
                  t.random(E * F * X, 1.0f / std::sqrt(float(F))));
            t.mat(p + "ffn_gate_shexp.weight", E, c.n_ff_shexp);
            t.mat(p + "ffn_up_shexp.weight", E, c.n_ff_shexp);
            t.mat(p + "ffn_down_shexp.weight", c.n_ff_shexp, E);
            continue;
        }
        t.mat(p + "ffn_gate.weight", E, c.n_ff);
        t.mat(p + "ffn_up.weight", E, c.n_ff);
        t.mat(p + "ffn_down.weight", c.n_ff, E);
    }
    w.write(path);
}

void write_tiny_qwen3next(const std::string& path, const TinyQwen3NextConfig& c) {
    GgufWriter w;
    const std::string a = "qwen3next.";
    const int64_t E = c.n_embd, D = c.head_dim, dk = c.linear_head_dim;
    const int64_t key_dim = c.linear_k_heads * dk, value_dim = c.linear_v_heads * dk;
    const int64_t conv_dim = 2 * key_dim + value_dim;
    w.set_string("general.architecture", "qwen3next");
    w.set_string("general.name", "tiny qwen3next test model");
    w.set_uint32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
    w.set_uint32(a + "embedding_length", static_cast<uint32_t>(E));
    w.set_uint32(a + "block_count", static_cast<uint32_t>(c.n_layer));
    w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff_exp * c.n_expert_used));
    w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(c.n_head));
    w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_head_kv));
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(D));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(D));
    w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_float32(a + "rope.freq_base", c.rope_base);
    w.set_uint32(a + "rope.dimension_count", static_cast<uint32_t>(c.rope_dims));
    w.set_uint32(a + "expert_count", static_cast<uint32_t>(c.n_expert));
    w.set_uint32(a + "expert_used_count", static_cast<uint32_t>(c.n_expert_used));
    w.set_uint32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_exp));
    w.set_uint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(c.n_ff_shexp));
    w.set_uint32(a + "ssm.conv_kernel", static_cast<uint32_t>(c.d_conv));
    w.set_uint32(a + "ssm.state_size", static_cast<uint32_t>(dk));
    w.set_uint32(a + "ssm.group_count", static_cast<uint32_t>(c.linear_k_heads));
    w.set_uint32(a + "ssm.time_step_rank", static_cast<uint32_t>(c.linear_v_heads));
    w.set_uint32(a + "ssm.inner_size", static_cast<uint32_t>(value_dim));
    w.set_uint32(a + "full_attention_interval", static_cast<uint32_t>(c.full_attention_interval));
    write_tiny_vocab(w);
    const auto V = static_cast<int64_t>(tiny_vocab().size());

    HybridTensorWriter t{w, std::mt19937_64(c.seed), c.skip_tensor, c.reshape_tensor};
    t.put("token_embd.weight", {E, V}, t.random(E * V, 0.5f));
    t.norm("output_norm.weight", E);
    t.mat("output.weight", E, V);
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        t.norm(p + "attn_norm.weight", E);
        t.norm(p + "post_attention_norm.weight", E);
        if ((il + 1) % c.full_attention_interval == 0) {
            t.mat(p + "attn_q.weight", E, 2 * c.n_head * D);
            t.mat(p + "attn_k.weight", E, c.n_head_kv * D);
            t.mat(p + "attn_v.weight", E, c.n_head_kv * D);
            t.mat(p + "attn_output.weight", c.n_head * D, E);
            t.norm(p + "attn_q_norm.weight", D);
            t.norm(p + "attn_k_norm.weight", D);
        } else {
            t.mat(p + "attn_qkv.weight", E, conv_dim);
            t.mat(p + "attn_gate.weight", E, value_dim);
            t.mat(p + "ssm_ba.weight", E, 2 * c.linear_v_heads);
            t.put(p + "ssm_conv1d.weight", {c.d_conv, conv_dim},
                  t.random(c.d_conv * conv_dim, 0.5f));
            t.put(p + "ssm_dt.bias", {c.linear_v_heads}, t.dt_bias(c.linear_v_heads));
            t.put(p + "ssm_a", {c.linear_v_heads}, t.ssm_a(c.linear_v_heads));
            t.norm(p + "ssm_norm.weight", dk);
            t.mat(p + "ssm_out.weight", value_dim, E);
        }
        t.mat(p + "ffn_gate_inp.weight", E, c.n_expert);
        const int64_t F = c.n_ff_exp, X = c.n_expert;
        t.put(p + "ffn_gate_exps.weight", {E, F, X},
              t.random(E * F * X, 1.0f / std::sqrt(float(E))));
        t.put(p + "ffn_up_exps.weight", {E, F, X}, t.random(E * F * X, 1.0f / std::sqrt(float(E))));
        t.put(p + "ffn_down_exps.weight", {F, E, X},
              t.random(E * F * X, 1.0f / std::sqrt(float(F))));
        t.put(p + "ffn_gate_inp_shexp.weight", {E}, t.random(E, 1.0f / std::sqrt(float(E))));
        t.mat(p + "ffn_gate_shexp.weight", E, c.n_ff_shexp);
        t.mat(p + "ffn_up_shexp.weight", E, c.n_ff_shexp);
        t.mat(p + "ffn_down_shexp.weight", c.n_ff_shexp, E);
    }
    w.write(path);
}

} // namespace spanscope::test
