// The Llama-family loader (engine/model/llama_family.h): what it refuses, in one line naming the
// architecture, tensor or key, and how it reads RoPE scaling and a sliding window. The files are
// the committed tiny models (tests/reference/README.md) rewritten with our GGUF writer.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace spanscope;
using namespace spanscope::test;

namespace {

std::string fixture_path(const std::string& file) {
    return data_dir() + "/reference/fixtures/" + file;
}

std::string load_error(const std::string& path) {
    try {
        Model::load(path);
    } catch (const ModelError& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("not a ModelError: ") + e.what();
    }
    return "";
}

} // namespace

namespace {

struct Rewrite {
    std::string architecture; ///< non-empty: general.architecture and the keys' prefix
    std::string skip_tensor;  ///< a tensor left out
    std::string key;          ///< a key set to `value`
    uint32_t value = 0;
    std::string string_key; ///< a key set to `string_value`
    std::string string_value;
    std::vector<std::string> drop;         ///< keys left out
    std::function<void(GgufWriter&)> edit; ///< more keys set
};

std::string rewrite(const std::string& fixture, const Rewrite& r) {
    const auto in = GgufFile::open(fixture_path(fixture));
    const std::string arch = in->get_string("general.architecture");
    GgufWriter w;
    for (const auto& [key, value] : in->metadata()) {
        if (std::find(r.drop.begin(), r.drop.end(), key) != r.drop.end())
            continue;
        std::string k = key;
        if (!r.architecture.empty() && k.rfind(arch + ".", 0) == 0)
            k = r.architecture + k.substr(arch.size());
        if (k == "general.architecture" && !r.architecture.empty()) {
            w.set_string(k, r.architecture);
            continue;
        }
        w.set_value(k, value);
    }
    if (!r.key.empty())
        w.set_uint32(r.key, r.value);
    if (!r.string_key.empty())
        w.set_string(r.string_key, r.string_value);
    if (r.edit)
        r.edit(w);
    for (const auto& t : in->tensors())
        if (t.name != r.skip_tensor)
            w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    const std::string path = temp_dir() + "/" + fixture;
    w.write(path);
    return path;
}

void expect_one_line_naming(const std::string& message, const std::string& what) {
    EXPECT_NE(message.find(what), std::string::npos)
        << "the message does not name " << what << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind("not a ModelError", 0), std::string::npos) << message;
}

} // namespace

TEST(LlamaLoader, RefusesAnUnsupportedArchitectureNamingIt) {
    Rewrite r;
    r.architecture = "phi3";
    const std::string message = load_error(rewrite("tiny_mistral.gguf", r));
    ASSERT_FALSE(message.empty()) << "a phi3 file was accepted";
    expect_one_line_naming(message, "'phi3'");
}

TEST(LlamaLoader, RefusesAMissingTensorNamingIt) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"tiny_mistral.gguf", "blk.1.attn_k.weight"},
        {"tiny_mistral.gguf", "blk.2.ffn_down.weight"},
        {"tiny_mistral.gguf", "output_norm.weight"},
        {"tiny_mistral.gguf", "token_embd.weight"},
        {"tiny_qwen2.gguf", "blk.0.attn_q.bias"},
        {"tiny_qwen2.gguf", "blk.1.attn_v.bias"},
        {"tiny_qwen3.gguf", "blk.1.attn_k_norm.weight"},
        {"tiny_llama3.gguf", "blk.0.ffn_gate.weight"},
    };
    for (const auto& [file, tensor] : cases) {
        Rewrite r;
        r.skip_tensor = tensor;
        const std::string message = load_error(rewrite(file, r));
        ASSERT_FALSE(message.empty()) << file << " without " << tensor << " was accepted";
        expect_one_line_naming(message, tensor);
    }
}

TEST(LlamaLoader, RefusesHeadCountsThatDoNotDivideNamingTheKey) {
    // 8 query heads cannot share 3 key/value heads.
    Rewrite r;
    r.key = "llama.attention.head_count_kv";
    r.value = 3;
    const std::string message = load_error(rewrite("tiny_mistral.gguf", r));
    ASSERT_FALSE(message.empty()) << "head_count 8 with head_count_kv 3 was accepted";
    expect_one_line_naming(message, "llama.attention.head_count_kv");
    // The same in a qwen2 file (4 query heads, 3 key/value heads).
    r.key = "qwen2.attention.head_count_kv";
    const std::string qwen = load_error(rewrite("tiny_qwen2.gguf", r));
    ASSERT_FALSE(qwen.empty()) << "qwen2 head_count 4 with head_count_kv 3 was accepted";
    expect_one_line_naming(qwen, "qwen2.attention.head_count_kv");
}

TEST(LlamaLoader, RefusesRopeScalingItDoesNotImplementNamingIt) {
    for (const char* type : {"yarn", "longrope"}) {
        Rewrite r;
        r.string_key = "llama.rope.scaling.type";
        r.string_value = type;
        const std::string message = load_error(rewrite("tiny_mistral.gguf", r));
        ASSERT_FALSE(message.empty()) << "RoPE scaling " << type << " was accepted";
        expect_one_line_naming(message, std::string("'") + type + "'");
    }
}

// A declared window (Mistral 7B v0.1's attention.sliding_window) makes every layer a
// sliding-window layer: a query no longer sees keys `window` or more positions back. llama.cpp
// ignores the key for the `llama` architecture, so there is no reference from it: the positions
// before the window fills must equal the unwindowed model's exactly, and later ones must differ.
TEST(LlamaLoader, ADeclaredSlidingWindowHidesTheKeysBehindIt) {
    constexpr uint32_t kWindow = 8;
    Rewrite r;
    r.key = "llama.attention.sliding_window";
    r.value = kWindow;
    const auto windowed = Model::load(rewrite("tiny_mistral.gguf", r));
    const auto plain = Model::load(fixture_path("tiny_mistral.gguf"));
    for (const auto& l : windowed->info().layers) {
        EXPECT_TRUE(l.sliding());
        EXPECT_EQ(l.attn.window, static_cast<int>(kWindow));
    }
    EXPECT_EQ(plain->info().sliding_window, 0);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 40; ++i)
        tokens.push_back(7 + (i * 37) % 250);
    ThreadPool pool(2);
    const auto a = prefill_logits(*windowed, tokens, 16, pool);
    const auto b = prefill_logits(*plain, tokens, 16, pool);
    const int64_t V = plain->info().n_vocab;
    for (int64_t p = 0; p < static_cast<int64_t>(tokens.size()); ++p) {
        float d = 0.0f;
        for (int64_t v = 0; v < V; ++v)
            d = std::max(
                d, std::abs(a[static_cast<size_t>(p * V + v)] - b[static_cast<size_t>(p * V + v)]));
        if (p < static_cast<int64_t>(kWindow)) {
            EXPECT_EQ(d, 0.0f) << "position " << p << " sees the same keys with and without "
                               << "the window";
        } else if (p > static_cast<int64_t>(kWindow)) {
            EXPECT_GT(d, 1e-3f) << "position " << p << " should have lost its oldest keys";
        }
    }
}

// llama.cpp reads rope.scaling.factor (or the older rope.scale_linear) as linear interpolation
// when the type is absent or "linear", and never scales when the type is "none". tiny_mistral
// declares type linear with factor 2.
TEST(LlamaLoader, ReadsRopeScalingAsLlamaCppDoes) {
    auto scale_of = [](const Rewrite& r) {
        return Model::load(rewrite("tiny_mistral.gguf", r))->info().layers[0].rope.scale;
    };
    EXPECT_DOUBLE_EQ(scale_of({}), 0.5);
    Rewrite absent;
    absent.drop = {"llama.rope.scaling.type"};
    EXPECT_DOUBLE_EQ(scale_of(absent), 0.5);
    Rewrite none;
    none.string_key = "llama.rope.scaling.type";
    none.string_value = "none";
    EXPECT_DOUBLE_EQ(scale_of(none), 1.0);
    Rewrite legacy;
    legacy.drop = {"llama.rope.scaling.factor"};
    legacy.edit = [](GgufWriter& w) { w.set_float32("llama.rope.scale_linear", 4.0f); };
    EXPECT_DOUBLE_EQ(scale_of(legacy), 0.25);
    Rewrite one;
    one.edit = [](GgufWriter& w) { w.set_float32("llama.rope.scaling.factor", 1.0f); };
    EXPECT_DOUBLE_EQ(scale_of(one), 1.0);
    Rewrite tiny;
    tiny.edit = [](GgufWriter& w) { w.set_float32("llama.rope.scaling.factor", 1e-5f); };
    expect_one_line_naming(load_error(rewrite("tiny_mistral.gguf", tiny)),
                           "llama.rope.scaling.factor");
    Rewrite not_string;
    not_string.drop = {"llama.rope.scaling.type"};
    not_string.edit = [](GgufWriter& w) { w.set_uint32("llama.rope.scaling.type", 3); };
    expect_one_line_naming(load_error(rewrite("tiny_mistral.gguf", not_string)),
                           "llama.rope.scaling.type");
    // Llama 3 frequency factors: tiny_llama3 carries them; a qwen2 window key is not read.
    const auto l3 = Model::load(fixture_path("tiny_llama3.gguf"));
    EXPECT_EQ(l3->info().layers[0].rope.factors.size(), 8u);
    Rewrite qwen_window;
    qwen_window.key = "qwen2.attention.sliding_window";
    qwen_window.value = 8;
    EXPECT_EQ(Model::load(rewrite("tiny_qwen2.gguf", qwen_window))->info().sliding_window, 0);
}

// A SentencePiece vocabulary that adds a space prefix (Llama 2, Mistral 7B: the key true, or
// absent, llama.cpp's default) loads and tokenises with it (tests/unit/test_spm_space_prefix.cpp
// holds it to llama.cpp); false keeps Gemma's way.
TEST(LlamaLoader, ReadsASentencePieceSpacePrefixAsLlamaCppDoes) {
    auto prefix_of = [](const Rewrite& r) {
        return Model::load(rewrite("tiny_mistral.gguf", r))->tokenizer().add_space_prefix();
    };
    Rewrite absent;
    absent.drop = {"tokenizer.ggml.add_space_prefix"};
    EXPECT_TRUE(prefix_of(absent));
    Rewrite on;
    on.drop = {"tokenizer.ggml.add_space_prefix"};
    on.edit = [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_space_prefix", true); };
    EXPECT_TRUE(prefix_of(on));
    EXPECT_FALSE(prefix_of({}));
    const auto m = Model::load(rewrite("tiny_mistral.gguf", on));
    EXPECT_EQ(m->tokenizer().decode(m->tokenizer().encode("the cat")), "the cat");
    EXPECT_EQ(m->tokenizer().token_bytes(m->tokenizer().encode("the cat").at(0)), " the");
}
