#include "tiny_model.h"

#include "gguf_writer.h"

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

void write_tiny_gemma3(const std::string& path, const TinyGemma3Config& c) {
    GgufWriter w;
    const std::string a = c.architecture + ".";
    w.set_string("general.architecture", c.architecture);
    w.set_string("general.name", "tiny gemma3 test model");
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

    const auto vocab = tiny_vocab();
    std::vector<float> scores;
    std::vector<int32_t> types;
    for (size_t i = 0; i < vocab.size(); ++i) {
        const bool control = i < 6;
        const bool user = vocab[i] == "\n";
        const bool byte = vocab[i].size() == 6 && vocab[i].rfind("<0x", 0) == 0;
        types.push_back(control ? 3 : user ? 4 : byte ? 6 : 1);
        scores.push_back(control || user ? -1000.0f : byte ? 0.0f : -static_cast<float>(i));
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
        norm("attn_q_norm.weight", c.head_dim);
        norm("attn_k_norm.weight", c.head_dim);
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

} // namespace spanscope::test
