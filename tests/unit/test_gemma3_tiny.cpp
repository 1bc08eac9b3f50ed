// The Gemma 3 forward pass on tiny models written by the test, against a naive reference
// implemented here from the architecture description (no cache, no BLAS, explicit window
// mask: failure mode 2 (tests/README.md)), and the batching/caching invariants of the session.
#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/quant.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/prompt.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

using namespace spanscope;
using namespace spanscope::test;

namespace {

std::vector<float> load_f32(const GgufFile& g, const std::string& name) {
    const auto* t = g.find_tensor(name);
    if (!t)
        throw std::runtime_error("missing " + name);
    const int64_t cols = t->ne[0];
    const int64_t rows = t->n_elements() / cols;
    std::vector<float> out(static_cast<size_t>(rows * cols));
    const size_t rb = row_bytes(t->type, cols);
    for (int64_t r = 0; r < rows; ++r)
        dequantize_row(t->type, t->data + r * rb, out.data() + r * cols, cols);
    return out;
}

// Naive reference: logits[t][v] for every position of `tokens` (positions 0..n-1).
std::vector<std::vector<float>> reference_logits(const std::string& path, const TinyGemma3Config& c,
                                                 const std::vector<int32_t>& tokens) {
    auto g = GgufFile::open(path);
    const int n = static_cast<int>(tokens.size());
    const int E = c.n_embd, D = c.head_dim, H = c.n_head, Hkv = c.n_head_kv, F = c.n_ff;
    const auto embd = load_f32(*g, "token_embd.weight");
    const int V = static_cast<int>(embd.size() / E);
    auto rms = [&](std::vector<float>& x, int off, int len, const std::vector<float>& w) {
        double ss = 0;
        for (int i = 0; i < len; ++i)
            ss += double(x[off + i]) * x[off + i];
        const double s = 1.0 / std::sqrt(ss / len + 1e-6);
        for (int i = 0; i < len; ++i)
            x[off + i] = float(x[off + i] * s * w[i]);
    };
    auto linear = [&](const std::vector<float>& W, int cols, int rows, const std::vector<float>& x,
                      int off) {
        std::vector<float> y(rows);
        for (int r = 0; r < rows; ++r) {
            double acc = 0;
            for (int i = 0; i < cols; ++i)
                acc += double(W[size_t(r) * cols + i]) * x[off + i];
            y[r] = float(acc);
        }
        return y;
    };
    auto rope = [&](std::vector<float>& v, int off, int pos, double base) {
        for (int i = 0; i < D / 2; ++i) {
            const double th = pos * std::pow(base, -2.0 * i / D);
            const double a = v[off + i], b = v[off + i + D / 2];
            v[off + i] = float(a * std::cos(th) - b * std::sin(th));
            v[off + i + D / 2] = float(a * std::sin(th) + b * std::cos(th));
        }
    };
    std::vector<std::vector<float>> x(n, std::vector<float>(E));
    for (int t = 0; t < n; ++t)
        for (int i = 0; i < E; ++i)
            x[t][i] = embd[size_t(tokens[t]) * E + i] * std::sqrt(float(E));
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        const bool global = (il + 1) % c.sliding_pattern == 0;
        const double base = global ? c.rope_base : c.rope_base_local;
        const auto Wq = load_f32(*g, p + "attn_q.weight"), Wk = load_f32(*g, p + "attn_k.weight"),
                   Wv = load_f32(*g, p + "attn_v.weight"),
                   Wo = load_f32(*g, p + "attn_output.weight"),
                   Wg = load_f32(*g, p + "ffn_gate.weight"), Wu = load_f32(*g, p + "ffn_up.weight"),
                   Wd = load_f32(*g, p + "ffn_down.weight");
        const auto n_attn = load_f32(*g, p + "attn_norm.weight"),
                   n_q = load_f32(*g, p + "attn_q_norm.weight"),
                   n_k = load_f32(*g, p + "attn_k_norm.weight"),
                   n_pa = load_f32(*g, p + "post_attention_norm.weight"),
                   n_f = load_f32(*g, p + "ffn_norm.weight"),
                   n_pf = load_f32(*g, p + "post_ffw_norm.weight");
        std::vector<std::vector<float>> Q(n), K(n), Vv(n);
        for (int t = 0; t < n; ++t) {
            auto h = x[t];
            rms(h, 0, E, n_attn);
            Q[t] = linear(Wq, E, H * D, h, 0);
            K[t] = linear(Wk, E, Hkv * D, h, 0);
            Vv[t] = linear(Wv, E, Hkv * D, h, 0);
            for (int hh = 0; hh < H; ++hh) {
                rms(Q[t], hh * D, D, n_q);
                rope(Q[t], hh * D, t, base);
            }
            for (int hh = 0; hh < Hkv; ++hh) {
                rms(K[t], hh * D, D, n_k);
                rope(K[t], hh * D, t, base);
            }
            // The KV cache keeps f16 precision (memory.h, like llama.cpp's default F16 cache);
            // the compiler's _Float16 conversion rounds to nearest even independently of ours.
            for (auto* kv : {&K[t], &Vv[t]})
                for (auto& e : *kv)
                    e = static_cast<float>(static_cast<_Float16>(e));
        }
        for (int t = 0; t < n; ++t) {
            std::vector<float> att(H * D, 0.0f);
            for (int hh = 0; hh < H; ++hh) {
                const int gk = hh / (H / Hkv);
                std::vector<double> s;
                std::vector<int> js;
                for (int j = 0; j <= t; ++j) {
                    if (!global && t - j >= c.sliding_window)
                        continue; // key older than the window
                    double d = 0;
                    for (int i = 0; i < D; ++i)
                        d += double(Q[t][hh * D + i]) * K[j][gk * D + i];
                    s.push_back(d / std::sqrt(double(D)));
                    js.push_back(j);
                }
                double mx = s[0];
                for (double v : s)
                    mx = std::max(mx, v);
                double sum = 0;
                for (double& v : s)
                    sum += (v = std::exp(v - mx));
                for (size_t m = 0; m < s.size(); ++m)
                    for (int i = 0; i < D; ++i)
                        att[hh * D + i] += float(s[m] / sum * Vv[js[m]][gk * D + i]);
            }
            auto o = linear(Wo, H * D, E, att, 0);
            rms(o, 0, E, n_pa);
            for (int i = 0; i < E; ++i)
                x[t][i] += o[i];
            auto h = x[t];
            rms(h, 0, E, n_f);
            auto gt = linear(Wg, E, F, h, 0), up = linear(Wu, E, F, h, 0);
            for (int i = 0; i < F; ++i) {
                const double z = gt[i];
                gt[i] = float(0.5 * z *
                              (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))) *
                              up[i]);
            }
            auto d = linear(Wd, F, E, gt, 0);
            rms(d, 0, E, n_pf);
            for (int i = 0; i < E; ++i)
                x[t][i] += d[i];
        }
    }
    const auto n_out = load_f32(*g, "output_norm.weight");
    std::vector<std::vector<float>> logits(n);
    for (int t = 0; t < n; ++t) {
        auto h = x[t];
        rms(h, 0, E, n_out);
        logits[t] = linear(embd, E, V, h, 0);
    }
    return logits;
}

class TinyGemma3 : public ::testing::Test {
protected:
    void SetUp() override { dir_ = temp_dir(); }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string write(const TinyGemma3Config& c, const std::string& name = "tiny.gguf") {
        const std::string p = dir_ + "/" + name;
        write_tiny_gemma3(p, c);
        return p;
    }
    std::string dir_;
};

// Logits of every position via a session that prefills in ubatches of `ubatch` tokens, with
// the logits of position t taken from a separate run ending at t (the session returns the
// last position's logits only).
std::vector<float> session_logits_at(const Model& m, const std::vector<int32_t>& tokens,
                                     int64_t upto, int64_t ubatch) {
    SessionOptions o;
    o.threads = 2;
    o.ubatch = ubatch;
    Session s(m, o);
    return s.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + upto + 1));
}

} // namespace

TEST_F(TinyGemma3, MatchesNaiveReferenceAcrossTheSlidingWindow) {
    TinyGemma3Config c; // window 8, alternating sliding/global layers, GQA 4:2
    const auto path = write(c);
    auto model = Model::load(path);
    const auto tokens = random_tokens(40, model->info().n_vocab, 7);
    const auto ref = reference_logits(path, c, tokens);
    for (int64_t t : {0, 5, 7, 8, 9, 20, 39}) {
        for (int64_t ub : {1, 3, 16}) {
            const auto got = session_logits_at(*model, tokens, t, ub);
            // fp32 BLAS vs double reference over 4 layers of width 64: agreement to ~1e-4
            // relative; logits here are O(1..10).
            EXPECT_LT(max_abs_diff(got, ref[t]), 2e-3f) << "position " << t << " ubatch " << ub;
        }
    }
}

TEST_F(TinyGemma3, WindowMatters) {
    // Guard against a reference and engine that both ignore the window: a model without a
    // sliding window (window larger than the sequence) must differ past the window.
    TinyGemma3Config c;
    const auto path = write(c, "a.gguf");
    TinyGemma3Config wide = c;
    wide.sliding_window = wide.n_ctx; // wider than the 30-token sequence
    const auto path_wide = write(wide, "b.gguf");
    auto m = Model::load(path), mw = Model::load(path_wide);
    const auto tokens = random_tokens(30, m->info().n_vocab, 3);
    const auto a = session_logits_at(*m, tokens, 5, 4), b = session_logits_at(*mw, tokens, 5, 4);
    EXPECT_LT(max_abs_diff(a, b), 1e-5f) << "inside the window both must agree";
    const auto a2 = session_logits_at(*m, tokens, 29, 4),
               b2 = session_logits_at(*mw, tokens, 29, 4);
    EXPECT_GT(max_abs_diff(a2, b2), 1e-3f) << "past the window they must differ";
}

TEST_F(TinyGemma3, QuantisedWeightsMatchTheirDequantisedReference) {
    for (TensorType type : {TensorType::Q8_0, TensorType::Q5_0, TensorType::Q4_0}) {
        TinyGemma3Config c;
        c.matrix_type = type;
        c.embd_type = TensorType::Q8_0;
        const auto path = write(c, "q.gguf");
        auto model = Model::load(path);
        const auto tokens = random_tokens(20, model->info().n_vocab, 11);
        const auto ref = reference_logits(path, c, tokens);
        // Few-token products (decode, and the logits of the last position in any ubatch)
        // quantise activations to Q8_0 for the integer dot products (as llama.cpp does); the
        // reference uses exact activations. Q8_0 rounds each activation to 1/254 of its
        // block's maximum, which moves these O(10) logits by up to ~0.1.
        for (int64_t ub : {1, 20}) {
            const auto got = session_logits_at(*model, tokens, 19, ub);
            const float tol = 0.15f;
            EXPECT_LT(max_abs_diff(got, ref[19]), tol) << traits(type).name << " ubatch " << ub;
        }
    }
}

TEST_F(TinyGemma3, PrefillThenDecodeEqualsOnePrefill) {
    TinyGemma3Config c;
    auto model = Model::load(write(c));
    const auto tokens = random_tokens(25, model->info().n_vocab, 5);
    SessionOptions o;
    o.ubatch = 4;
    Session a(*model, o);
    auto la = a.prefill(std::vector<int32_t>(tokens.begin(), tokens.begin() + 10));
    for (size_t i = 10; i < tokens.size(); ++i)
        la = a.decode(tokens[i]);
    Session b(*model, o);
    const auto lb = b.prefill(tokens);
    EXPECT_LT(max_abs_diff(la, lb), 1e-4f);
    EXPECT_EQ(a.n_past(), 25);
}

TEST_F(TinyGemma3, ClonedMemoryContinuesIdentically) {
    TinyGemma3Config c;
    auto model = Model::load(write(c));
    const auto tokens = random_tokens(30, model->info().n_vocab, 9);
    ThreadPool pool(2);
    ModelMemory mem = make_memory(model->info(), 64, 16);
    std::vector<int32_t> pos(30);
    for (int i = 0; i < 30; ++i)
        pos[i] = i;
    const int V = model->info().n_vocab;
    std::vector<float> a(V), b(V);
    model->forward(tokens.data(), pos.data(), 16, mem, {}, nullptr, pool);
    ModelMemory copy = mem.clone();
    EXPECT_EQ(copy.n_tokens(), 16);
    // Both continue with the same tokens; the original first, so that a clone sharing state
    // with it would see the extra rows.
    model->forward(tokens.data() + 16, pos.data() + 16, 14, mem, {13}, a.data(), pool);
    model->forward(tokens.data() + 16, pos.data() + 16, 14, copy, {13}, b.data(), pool);
    EXPECT_EQ(a, b);
    EXPECT_EQ(mem.n_tokens(), 30);
    EXPECT_EQ(copy.n_tokens(), 30);
}

TEST_F(TinyGemma3, HyperParametersComeFromTheFile) {
    TinyGemma3Config c;
    c.rope_base_local = 500.0f;
    auto m = Model::load(write(c));
    EXPECT_EQ(m->info().sliding_window, 8);
    EXPECT_EQ(m->info().sliding_pattern, 2);
    EXPECT_DOUBLE_EQ(m->info().rope_base_local, 500.0);
    EXPECT_FALSE(m->info().layers[0].rope == m->info().layers[1].rope);
    EXPECT_EQ(m->info().layers[0].attn.window, 8);
    EXPECT_EQ(m->info().layers[1].attn.window, 0);
    EXPECT_FALSE(m->info().instruction_tuned);
}

TEST_F(TinyGemma3, ARopeBaseOfOneIsRefused) {
    TinyGemma3Config c;
    c.rope_base = 1.0f; // every position would rotate by the same angle: no position at all
    try {
        Model::load(write(c));
        FAIL() << "a RoPE base of 1 was accepted";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("RoPE bases must be > 1"), std::string::npos)
            << e.what();
    }
}

TEST_F(TinyGemma3, WrongArchitectureIsRefused) {
    TinyGemma3Config c;
    c.architecture = "phi3";
    try {
        Model::load(write(c));
        FAIL() << "a phi3 file was accepted";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("unsupported model architecture 'phi3'"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(TinyGemma3, ContextOverflowNamesBothLengths) {
    TinyGemma3Config c;
    c.n_ctx = 16;
    auto m = Model::load(write(c));
    Session s(*m, SessionOptions{});
    const auto tokens = random_tokens(20, m->info().n_vocab, 1);
    try {
        s.prefill(tokens);
        FAIL();
    } catch (const ContextOverflow& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("20"), std::string::npos) << msg;
        EXPECT_NE(msg.find("16"), std::string::npos) << msg;
    }
}

TEST_F(TinyGemma3, CancellationStopsBetweenUbatches) {
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    SessionOptions o;
    o.ubatch = 4;
    Session s(*m, o);
    std::atomic<bool> cancel{false};
    int calls = 0;
    EXPECT_THROW(s.prefill(random_tokens(40, m->info().n_vocab, 2), &cancel,
                           [&](int64_t, int64_t) {
                               if (++calls == 2)
                                   cancel = true;
                           }),
                 Cancelled);
    EXPECT_EQ(s.n_past(), 8); // two ubatches ran, the third saw the flag
}

TEST_F(TinyGemma3, WarmAskReusesTheDocumentAndAnswersLikeACold) {
    // failure modes 5 and 9 (tests/README.md): a second question about the same document reuses its
    // prefilled prefix (counted by the engine) and answers exactly as a cold session does.
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    const std::vector<PromptDocument> docs{{"d.txt", "the cat at the cat the cat\n"}};
    const auto p1 = build_question_prompt(m->tokenizer(), ChatFormat::Completion, docs, "the cat?");
    const auto p2 =
        build_question_prompt(m->tokenizer(), ChatFormat::Completion, docs, "a cat at the?");
    ASSERT_GT(p1.prefix_len, 1);
    ASSERT_EQ(p1.prefix_len, p2.prefix_len);
    SessionOptions o;
    o.ubatch = 4;
    Session warm(*m, o);
    const auto a1 = warm.ask(p1, 8, SamplingParams{});
    EXPECT_EQ(a1.stats.tokens_reused, 0);
    EXPECT_EQ(a1.stats.tokens_computed, static_cast<int64_t>(p1.tokens.size()));
    const auto a2 = warm.ask(p2, 8, SamplingParams{});
    EXPECT_EQ(a2.stats.tokens_reused, p2.prefix_len);
    EXPECT_EQ(a2.stats.tokens_computed, static_cast<int64_t>(p2.tokens.size()) - p2.prefix_len);
    Session cold(*m, o);
    const auto c2 = cold.ask(p2, 8, SamplingParams{});
    EXPECT_EQ(c2.stats.tokens_reused, 0);
    EXPECT_EQ(a2.tokens, c2.tokens);
    EXPECT_FALSE(a2.tokens.empty());
}

TEST_F(TinyGemma3, TurnBreakIsTheTurnFormatsChangeOfTurnInEveryPrompt) {
    // turn_break spelled out token by token, and the question part of a whole prompt
    // (build_question_prompt, used by ask) is the one a project appends (question_tokens).
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    const auto& tok = m->tokenizer();
    const int32_t eot = tok.find("<end_of_turn>"), sot = tok.find("<start_of_turn>");
    ASSERT_GE(eot, 0);
    ASSERT_GE(sot, 0);
    std::vector<int32_t> expected{eot};
    for (const int32_t t : tok.encode("\n"))
        expected.push_back(t);
    expected.push_back(sot);
    for (const int32_t t : tok.encode("user\n"))
        expected.push_back(t);
    EXPECT_EQ(turn_break(tok, "user\n"), expected);
    // The whole turn-format prompt, assembled by hand as the format reads: BOS, <start_of_turn>,
    // "user\n" and the documents, the question, <end_of_turn>, "\n", <start_of_turn>, "model\n".
    std::vector<int32_t> whole{tok.bos(), sot};
    auto add = [&](const std::string& text) {
        for (const int32_t t : tok.encode(text))
            whole.push_back(t);
    };
    add("user\nDocument: d\n\nthe cat\n\n");
    add("Answer the question using the documents above.\ncat?");
    whole.push_back(eot);
    add("\n");
    whole.push_back(sot);
    add("model\n");
    EXPECT_EQ(build_question_prompt(tok, ChatFormat::Gemma, {{"d", "the cat"}}, "cat?").tokens,
              whole);
    for (const ChatFormat it : {ChatFormat::Gemma, ChatFormat::Completion}) {
        const auto p = build_question_prompt(tok, it, {{"d", "the cat"}}, "cat?");
        const std::vector<int32_t> tail(p.tokens.begin() + p.prefix_len, p.tokens.end());
        EXPECT_EQ(tail, question_tokens(tok, it, "cat?")) << "format " << chat_format_name(it);
    }
}

TEST_F(TinyGemma3, MaxTokensGuardEndsGeneration) {
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    const auto p =
        build_question_prompt(m->tokenizer(), ChatFormat::Gemma, {{"d", "the cat"}}, "cat?");
    Session s(*m, SessionOptions{});
    // Premise: left alone, this model runs past 3 tokens (an instruction-style prompt has no
    // end-of-line stop).
    const auto free_run = s.ask(p, 40, SamplingParams{});
    ASSERT_GT(free_run.stats.generated_tokens, 3) << "stop reason " << free_run.stop_reason;
    const auto a = s.ask(p, 3, SamplingParams{});
    EXPECT_EQ(a.stats.generated_tokens, 3);
    EXPECT_EQ(a.stop_reason, "max_tokens");
    EXPECT_EQ(std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + 3), a.tokens);
}

TEST_F(TinyGemma3, StopDuringGenerationKeepsWhatWasGenerated) {
    // The desktop Stop button: the answer ends before the next token and keeps its text.
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    const auto p =
        build_question_prompt(m->tokenizer(), ChatFormat::Gemma, {{"d", "the cat"}}, "cat?");
    Session s(*m, SessionOptions{});
    const auto free_run = s.ask(p, 40, SamplingParams{});
    ASSERT_GT(free_run.stats.generated_tokens, 5) << "stop reason " << free_run.stop_reason;
    std::atomic<bool> stop{false};
    int pieces = 0;
    const auto a = s.ask(
        p, 40, SamplingParams{},
        [&](const std::string&) {
            if (++pieces == 3)
                stop = true;
        },
        &stop);
    EXPECT_EQ(a.stop_reason, "stopped");
    EXPECT_GE(a.stats.generated_tokens, 3);
    EXPECT_LT(a.stats.generated_tokens, free_run.stats.generated_tokens);
    EXPECT_EQ(std::vector<int32_t>(free_run.tokens.begin(),
                                   free_run.tokens.begin() + a.stats.generated_tokens),
              a.tokens);
}

TEST_F(TinyGemma3, ArchitectureDefaultsWhenTheFileIsSilent) {
    // The real file has neither rope.freq_base_swa nor sliding_window_pattern: the Gemma 3
    // values (10 000, every 6th layer global) apply and are reported.
    TinyGemma3Config c;
    c.n_layer = 6;
    c.write_local_base = false;
    c.write_pattern = false;
    auto m = Model::load(write(c));
    const auto& I = m->info();
    EXPECT_EQ(I.sliding_pattern, 6);
    EXPECT_DOUBLE_EQ(I.rope_base_local, 10000.0);
    EXPECT_EQ(I.defaults_used.size(), 2u);
    for (int il = 0; il < 6; ++il)
        EXPECT_EQ(I.layers[il].sliding(), il != 5) << il;
}

TEST_F(TinyGemma3, ComputedTokensAreCountedByTheEngine) {
    TinyGemma3Config c;
    auto m = Model::load(write(c));
    const std::vector<PromptDocument> docs{{"d.txt", "the cat at the cat\n"}};
    Session s(*m, SessionOptions{});
    const auto p = build_question_prompt(m->tokenizer(), ChatFormat::Completion, docs, "cat?");
    const int64_t before = s.tokens_processed();
    const auto a = s.ask(p, 2, SamplingParams{});
    const int64_t prompt_work = static_cast<int64_t>(p.tokens.size());
    // Every prompt token ran once, then one forward pass per decoded token.
    EXPECT_EQ(a.stats.tokens_computed, prompt_work);
    EXPECT_GE(s.tokens_processed() - before, prompt_work);
    const int64_t before2 = s.tokens_processed();
    const auto b = s.ask(p, 1, SamplingParams{});
    EXPECT_EQ(b.stats.tokens_reused, p.prefix_len);
    EXPECT_EQ(s.tokens_processed() - before2, prompt_work - p.prefix_len);
    EXPECT_THROW(s.ask(Prompt{}, 1, SamplingParams{}), std::invalid_argument);
}

namespace {
// A layer memory that raises a cancellation flag when it is stored into (so the test can
// cancel in the middle of a forward pass deterministically).
class FlagOnStore final : public LayerMemory {
public:
    FlagOnStore(std::unique_ptr<LayerMemory> inner, std::atomic<bool>* flag)
        : inner_(std::move(inner)), flag_(flag) {}
    std::string_view policy() const override { return inner_->policy(); }
    const AttentionShape& shape() const override { return inner_->shape(); }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override {
        inner_->store(k, v, pos, n);
        flag_->store(true);
    }
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override {
        inner_->attend(q, qpos, n_q, out, pool);
    }
    MemoryStats stats() const override { return inner_->stats(); }
    int64_t n_tokens() const override { return inner_->n_tokens(); }
    std::unique_ptr<LayerMemory> clone() const override { return inner_->clone(); }
    void clear() override { inner_->clear(); }

private:
    std::unique_ptr<LayerMemory> inner_;
    std::atomic<bool>* flag_;
};
} // namespace

TEST_F(TinyGemma3, CancellationStopsAForwardPassBetweenLayers) {
    TinyGemma3Config c;
    auto model = Model::load(write(c));
    const auto& info = model->info();
    ASSERT_GE(info.n_layer, 3);
    std::atomic<bool> cancel{false};
    // Layer 1 raises the flag while the ubatch runs; layer 2 must not start.
    auto plain = make_memory(info, 256, 64);
    std::vector<std::unique_ptr<LayerMemory>> layers;
    for (int il = 0; il < info.n_layer; ++il) {
        auto l = plain.layer(il).clone();
        if (il == 1)
            l = std::make_unique<FlagOnStore>(std::move(l), &cancel);
        layers.push_back(std::move(l));
    }
    ModelMemory memory(std::move(layers));
    const auto tokens = random_tokens(16, info.n_vocab, 11);
    std::vector<int32_t> pos(tokens.size());
    for (size_t i = 0; i < pos.size(); ++i)
        pos[i] = static_cast<int32_t>(i);
    ThreadPool pool(2);
    std::vector<float> logits(info.n_vocab);
    EXPECT_THROW(model->forward(tokens.data(), pos.data(), 16, memory, {15}, logits.data(), pool,
                                nullptr, &cancel),
                 Cancelled);
    EXPECT_EQ(memory.layer(1).n_tokens(), 16);
    for (int il = 2; il < info.n_layer; ++il)
        EXPECT_EQ(memory.layer(il).n_tokens(), 0) << "layer " << il << " ran after the stop";

    // Through a session: a set flag stops before anything runs, and the session stays usable.
    SessionOptions o;
    o.threads = 2;
    Session s(*model, o);
    std::atomic<bool> stop{true};
    EXPECT_THROW(s.prefill(tokens, &stop), Cancelled);
    EXPECT_EQ(s.n_past(), 0);
    EXPECT_NO_THROW(s.prefill(tokens));
    EXPECT_EQ(s.n_past(), 16);
}
