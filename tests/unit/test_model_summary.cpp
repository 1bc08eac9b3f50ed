// describe_model_file: a model file described from its metadata alone. The tiny files are
// written here (tiny_model.h); the expected figures are computed from the configurations they
// were written with, and cross-checked against the layers Model::load builds. The real models
// are checked when installed, against their published shapes and their own keys.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/model/model_summary.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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
}
