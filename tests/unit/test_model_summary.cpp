// describe_model_file: a model file described from its metadata alone. The tiny files are
// written here (tiny_model.h); the expected figures are computed from the configurations they
// were written with, and cross-checked against the layers Model::load builds. The real models
// are checked when installed, against their published shapes and their own keys. Every refusal
// against loading's own message: test_model_summary_vs_load.cpp.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/model/model_summary.h"
#include "engine/text/tokenizer.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace spanscope;
using namespace spanscope::test;

namespace {

class ModelSummaryTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = temp_dir(); }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string file(const std::string& name) const { return dir_ + "/" + name; }
    std::string dir_;
};

/// An f16 key row and value row per token and attention layer (the definition, written out).
int64_t f16_kv_bytes(int64_t kv_heads, int64_t head_dim) {
    return 2 * kv_heads * head_dim * 2;
}

/// The same sums over the layers Model::load builds (its own reading of the hyper-parameters).
void expect_matches_loaded_layers(const ModelSummary& s) {
    const auto m = Model::load(s.path);
    int64_t all = 0, global = 0;
    int attention = 0, sliding = 0, recurrent = 0;
    for (const auto& l : m->info().layers) {
        if (l.recurrent()) {
            ++recurrent;
            continue;
        }
        ++attention;
        const int64_t b = f16_kv_bytes(l.attn.n_kv_head, l.attn.head_dim);
        all += b;
        if (l.sliding())
            ++sliding;
        else
            global += b;
    }
    EXPECT_EQ(s.kv_bytes_per_token, all);
    EXPECT_EQ(s.kv_bytes_per_token_global, global);
    EXPECT_EQ(s.n_attention_layers, attention);
    EXPECT_EQ(s.n_sliding_layers, sliding);
    EXPECT_EQ(s.n_recurrent_layers, recurrent);
    EXPECT_EQ(s.n_layer, m->info().n_layer);
    EXPECT_EQ(s.context_length, m->info().n_ctx_train);
    EXPECT_EQ(s.architecture, m->info().architecture);
}

} // namespace

TEST_F(ModelSummaryTest, Gemma3CountsSlidingLayersApart) {
    TinyGemma3Config c; // 4 layers, every 2nd global, 2 KV heads of 32
    c.sliding_window = 8;
    c.sliding_pattern = 2;
    write_tiny_gemma3(file("g.gguf"), c);
    const ModelSummary s = describe_model_file(file("g.gguf"));
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_TRUE(s.problem.empty());
    EXPECT_EQ(s.architecture, "gemma3");
    EXPECT_EQ(s.name, "tiny gemma3 test model");
    EXPECT_EQ(s.file_bytes, std::filesystem::file_size(file("g.gguf")));
    EXPECT_EQ(s.context_length, c.n_ctx);
    EXPECT_EQ(s.n_layer, c.n_layer);
    EXPECT_EQ(s.n_attention_layers, 4);
    EXPECT_EQ(s.n_sliding_layers, 2); // layers 0 and 2
    EXPECT_EQ(s.sliding_window, 8);
    EXPECT_EQ(s.kv_bytes_per_token, 4 * f16_kv_bytes(c.n_head_kv, c.head_dim));
    EXPECT_EQ(s.kv_bytes_per_token_global, 2 * f16_kv_bytes(c.n_head_kv, c.head_dim));
    expect_matches_loaded_layers(s);
}

TEST_F(ModelSummaryTest, LlamaWithAndWithoutAWindow) {
    TinyGemma3Config c;
    c.architecture = "llama";   // llama.* keys: the summary reads metadata only
    c.sliding_window = c.n_ctx; // a window as long as the context: every layer global
    write_tiny_gemma3(file("l.gguf"), c);
    ModelSummary s = describe_model_file(file("l.gguf"));
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.architecture, "llama");
    EXPECT_EQ(s.n_sliding_layers, 0);
    EXPECT_EQ(s.sliding_window, 0);
    EXPECT_EQ(s.kv_bytes_per_token, c.n_layer * f16_kv_bytes(c.n_head_kv, c.head_dim));
    EXPECT_EQ(s.kv_bytes_per_token_global, s.kv_bytes_per_token);

    c.sliding_window = 16; // Mistral 7B v0.1: every layer slides
    write_tiny_gemma3(file("m.gguf"), c);
    s = describe_model_file(file("m.gguf"));
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.n_sliding_layers, c.n_layer);
    EXPECT_EQ(s.sliding_window, 16);
    EXPECT_EQ(s.kv_bytes_per_token, c.n_layer * f16_kv_bytes(c.n_head_kv, c.head_dim));
    EXPECT_EQ(s.kv_bytes_per_token_global, 0);
}

TEST_F(ModelSummaryTest, HybridModelsCountOnlyTheirAttentionLayers) {
    TinyGraniteHybridConfig g; // layer 2 attends; head size n_embd / n_head (no key_length)
    write_tiny_granite_hybrid(file("granite.gguf"), g);
    ModelSummary s = describe_model_file(file("granite.gguf"));
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.n_attention_layers, 1);
    EXPECT_EQ(s.n_recurrent_layers, 3);
    EXPECT_EQ(s.kv_bytes_per_token, f16_kv_bytes(g.n_head_kv, g.n_embd / g.n_head));
    expect_matches_loaded_layers(s);

    TinyQwen3NextConfig q; // every 2nd of 4 layers attends
    write_tiny_qwen3next(file("qwen3next.gguf"), q);
    s = describe_model_file(file("qwen3next.gguf"));
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.n_attention_layers, 2);
    EXPECT_EQ(s.n_recurrent_layers, 2);
    EXPECT_EQ(s.kv_bytes_per_token, 2 * f16_kv_bytes(q.n_head_kv, q.head_dim));
    expect_matches_loaded_layers(s);
}

TEST_F(ModelSummaryTest, UnsupportedArchitectureGivesLoadsOneLine) {
    GgufWriter w;
    w.set_string("general.architecture", "phi3");
    w.set_string("general.name", "Phi 3 mini");
    w.set_uint32("phi3.context_length", 4096);
    w.set_uint32("phi3.block_count", 32);
    w.write(file("phi3.gguf"));
    const ModelSummary s = describe_model_file(file("phi3.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_EQ(s.architecture, "phi3");
    EXPECT_EQ(s.name, "Phi 3 mini");
    EXPECT_EQ(s.context_length, 4096); // what the file declares is still shown
    EXPECT_EQ(s.kv_bytes_per_token, 0);
    EXPECT_EQ(s.problem.find('\n'), std::string::npos);
    EXPECT_EQ(s.problem.rfind("unsupported model architecture 'phi3' (supported: gemma3, llama", 0),
              0u)
        << s.problem;
    // The same words as loading the file.
    try {
        Model::load(file("phi3.gguf"));
        FAIL() << "a phi3 file was loaded";
    } catch (const ModelError& e) {
        EXPECT_EQ(s.problem, e.what());
    }
}

TEST_F(ModelSummaryTest, BadFilesSayWhyInOneLine) {
    // Missing.
    ModelSummary s = describe_model_file(file("absent.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_EQ(s.problem.rfind("cannot open " + file("absent.gguf"), 0), 0u) << s.problem;
    EXPECT_EQ(s.name, "absent.gguf");

    // Not GGUF.
    std::ofstream(file("notes.gguf")) << "these are notes, not a model\n";
    s = describe_model_file(file("notes.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_GT(s.file_bytes, 0u);
    EXPECT_EQ(s.problem.rfind("not a valid GGUF file: ", 0), 0u) << s.problem;

    // GGUF without an architecture (a tokenizer-only or parameter file).
    GgufWriter w;
    w.set_string("general.name", "parameters");
    w.write(file("params.gguf"));
    s = describe_model_file(file("params.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_EQ(s.problem, "not a model file: general.architecture is missing");

    // A supported architecture missing a hyper-parameter: the key is named.
    GgufWriter l;
    l.set_string("general.architecture", "llama");
    l.set_uint32("llama.context_length", 2048);
    l.write(file("cut.gguf"));
    s = describe_model_file(file("cut.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_NE(s.problem.find("llama.block_count"), std::string::npos) << s.problem;
    EXPECT_EQ(s.problem.find('\n'), std::string::npos);
}

// A file refused after its hyper-parameters were read (here its chat template, none of the
// formats) keeps the figures read before: the model list and `spanscope-cli info` show them.
TEST_F(ModelSummaryTest, AFileRefusedLaterKeepsItsFigures) {
    TinyGemma3Config c;
    c.architecture = "llama";
    c.sliding_window = c.n_ctx;
    write_tiny_gemma3(file("plain.gguf"), c);
    const auto in = GgufFile::open(file("plain.gguf"));
    GgufWriter w;
    for (const auto& [key, value] : in->metadata())
        w.set_value(key, value);
    w.set_string("tokenizer.chat_template", "{% for m in messages %}<|user|>{% endfor %}");
    for (const auto& t : in->tensors())
        w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    w.write(file("template.gguf"));
    const ModelSummary s = describe_model_file(file("template.gguf"));
    EXPECT_FALSE(s.supported);
    EXPECT_EQ(s.problem.rfind("the model's chat template (llama, markers <|user|>)", 0), 0u)
        << s.problem;
    EXPECT_TRUE(s.instruction_tuned);
    EXPECT_EQ(s.chat_format, "");
    EXPECT_EQ(s.kv_bytes_per_token, c.n_layer * f16_kv_bytes(c.n_head_kv, c.head_dim));
    EXPECT_EQ(s.n_attention_layers, c.n_layer);
    EXPECT_EQ(s.context_length, c.n_ctx);
    // The same file without the template: a base model, supported.
    const ModelSummary plain = describe_model_file(file("plain.gguf"));
    ASSERT_TRUE(plain.supported) << plain.problem;
    EXPECT_EQ(plain.chat_format, "completion");
    EXPECT_EQ(plain.kv_bytes_per_token, s.kv_bytes_per_token);
}

// The summary reads the vocabulary without building SentencePiece's model: what it asks of the
// tokenizer (size, special ids, pieces) is what the full tokenizer says; encoding is refused.
TEST_F(ModelSummaryTest, AVocabularyOnlyTokenizerAnswersAsTheFullOne) {
    write_tiny_gemma3(file("g.gguf"), TinyGemma3Config{});
    const auto g = GgufFile::open(file("g.gguf"));
    const auto full = Tokenizer::from_gguf(*g);
    const auto vocab = Tokenizer::from_gguf(*g, TokenizerBuild::VocabularyOnly);
    EXPECT_EQ(vocab->n_vocab(), full->n_vocab());
    EXPECT_EQ(vocab->bos(), full->bos());
    EXPECT_EQ(vocab->eos(), full->eos());
    EXPECT_EQ(vocab->unk(), full->unk());
    EXPECT_EQ(vocab->add_bos(), full->add_bos());
    for (const char* piece : {"<start_of_turn>", "<end_of_turn>", "\n", "absent"})
        EXPECT_EQ(vocab->find(piece), full->find(piece)) << piece;
    const int32_t eot = full->find("<end_of_turn>");
    ASSERT_GE(eot, 0);
    EXPECT_EQ(vocab->is_end_of_generation(eot), full->is_end_of_generation(eot));
    const std::vector<int32_t> ids = full->encode("the cat");
    EXPECT_EQ(vocab->decode(ids), full->decode(ids));
    EXPECT_THROW(vocab->encode("the cat"), std::logic_error);
}

// The model list describes files on worker threads, several at once.
TEST_F(ModelSummaryTest, DescriptionsOnSeveralThreadsAgree) {
    write_tiny_gemma3(file("g.gguf"), TinyGemma3Config{});
    write_tiny_granite_hybrid(file("h.gguf"), TinyGraniteHybridConfig{});
    write_tiny_qwen3next(file("q.gguf"), TinyQwen3NextConfig{});
    const std::vector<std::string> paths{file("g.gguf"), file("h.gguf"), file("q.gguf"),
                                         file("absent.gguf")};
    std::vector<ModelSummary> expected;
    for (const auto& p : paths)
        expected.push_back(describe_model_file(p));
    std::vector<std::vector<ModelSummary>> got(4);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < got.size(); ++t)
        threads.emplace_back([&, t] {
            for (int round = 0; round < 3; ++round)
                for (const auto& p : paths)
                    got[t].push_back(describe_model_file(p));
        });
    for (auto& th : threads)
        th.join();
    for (const auto& g : got) {
        ASSERT_EQ(g.size(), 3 * paths.size());
        for (size_t i = 0; i < g.size(); ++i) {
            const ModelSummary& a = g[i];
            const ModelSummary& b = expected[i % paths.size()];
            EXPECT_EQ(a.supported, b.supported) << a.path;
            EXPECT_EQ(a.problem, b.problem) << a.path;
            EXPECT_EQ(a.kv_bytes_per_token, b.kv_bytes_per_token) << a.path;
            EXPECT_EQ(a.chat_format, b.chat_format) << a.path;
        }
    }
    EXPECT_TRUE(expected[0].supported && expected[1].supported && expected[2].supported);
}

TEST(ModelSummaryReal, SmolLM2FromItsOwnHyperParameters) {
    const auto path = smollm2_model_path();
    if (!path)
        GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf is not installed (bash "
                        "scripts/setup.sh model, or set SPANSCOPE_SMOLLM2_MODEL)";
    const ModelSummary s = describe_model_file(*path);
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.architecture, "llama");
    // From the file's keys, read here apart from the summary.
    const auto g = GgufFile::open(*path);
    const int64_t layers = static_cast<int64_t>(g->get_uint("llama.block_count"));
    const int64_t kv_heads = static_cast<int64_t>(g->get_uint("llama.attention.head_count_kv"));
    const int64_t head_dim = g->has("llama.attention.key_length")
                                 ? static_cast<int64_t>(g->get_uint("llama.attention.key_length"))
                                 : static_cast<int64_t>(g->get_uint("llama.embedding_length") /
                                                        g->get_uint("llama.attention.head_count"));
    EXPECT_EQ(s.kv_bytes_per_token, layers * kv_heads * head_dim * 2 * 2);
    // SmolLM2-135M's published shape: 30 layers, 3 key/value heads of 64.
    EXPECT_EQ(s.kv_bytes_per_token, 30 * 3 * 64 * 2 * 2);
    EXPECT_EQ(s.kv_bytes_per_token_global, s.kv_bytes_per_token);
    EXPECT_EQ(s.context_length, static_cast<int64_t>(g->get_uint("llama.context_length")));
    EXPECT_EQ(s.file_bytes, std::filesystem::file_size(*path));
    // An instruction-tuned model with a ChatML template (its vocabulary has <|im_start|>).
    EXPECT_TRUE(s.instruction_tuned);
    EXPECT_EQ(s.chat_format, "chatml");
}

TEST(ModelSummaryReal, Gemma3DefaultModel) {
    const auto where = locate_model("");
    if (where.path.empty())
        GTEST_SKIP() << missing_model_message(where);
    const ModelSummary s = describe_model_file(where.path);
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.architecture, "gemma3");
    // Gemma 3 270M's published shape: 18 layers (every 6th global), 1 key/value head of 256,
    // a 512-token window, a 32 768-token context.
    EXPECT_EQ(s.n_layer, 18);
    EXPECT_EQ(s.n_sliding_layers, 15);
    EXPECT_EQ(s.sliding_window, 512);
    EXPECT_EQ(s.context_length, 32768);
    EXPECT_EQ(s.kv_bytes_per_token, 18 * 1 * 256 * 2 * 2);
    EXPECT_EQ(s.kv_bytes_per_token_global, 3 * 1 * 256 * 2 * 2);
    // The base model: plain completion prompts (README, "What to expect").
    EXPECT_EQ(s.chat_format, "completion");
}
