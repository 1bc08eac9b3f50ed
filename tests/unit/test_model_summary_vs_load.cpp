// describe_model_file against loading, case by case: every refusal the loaders, the tokenizer and
// the chat format make from a file's header (keys, the tensor table) gives supported = false with
// exactly the message loading gives (Model::load, then chat_format_of as the programs call it
// when a model loads), and every tiny file that loads is supported, with the key/value bytes per
// token its loaded layers imply (computed here from the loaded model's LayerInfo, not from the
// summary). Each refusal also names what it is about, so a case refused for another reason (a
// mistake in the case) fails instead of passing. The files are the committed tiny models
// (tests/reference/README.md) and tiny_model.h's, rewritten with one change each.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/model/model_summary.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/chat_format.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace spanscope;
using namespace spanscope::test;

namespace {

struct Case {
    std::string name;
    /// A file of tests/reference/fixtures, or one written here: "gemma3" (write_tiny_gemma3's
    /// default), "gemma3-llama" (the same as a `llama` file, every layer global), "bpe-qwen2"
    /// (tiny_qwen2.gguf with a byte-level BPE vocabulary).
    std::string base;
    std::vector<std::string> drop;        ///< keys and tensors left out
    std::function<void(GgufWriter&)> set; ///< keys set (replacing) and tensors added
    /// What loading's message names; empty: the file loads and its chat format is decided.
    std::string refusal;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.name;
}

/// The message loading `path` gives, as the desktop application and spanscope-cli load a model
/// (Model::load, then the chat format decided); "" when it loads.
std::string load_message(const std::string& path) {
    try {
        const auto m = Model::load(path);
        chat_format_of(m->info(), m->tokenizer());
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * sizeof(float));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
}

/// A tensor of `n` floats, each `value`, shaped `ne`.
void add_f32(GgufWriter& w, const std::string& name, const std::vector<int64_t>& ne,
             float value = 0.5f) {
    int64_t n = 1;
    for (const int64_t d : ne)
        n *= d;
    w.add_tensor(name, TensorType::F32, ne,
                 f32_bytes(std::vector<float>(static_cast<size_t>(n), value)));
}

/// A byte-level BPE vocabulary of n tokens (the 256 byte symbols, "Ġt", "he", "Ġthe", three
/// ChatML and end-of-text control tokens, fillers) with its merges, as tokenizer.ggml.* keys.
void set_bpe_vocabulary(GgufWriter& w, size_t n) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b)
        tokens.push_back(BpeTokenizer::byte_to_unicode(static_cast<uint8_t>(b)));
    const std::string G = BpeTokenizer::byte_to_unicode(' ');
    for (const std::string& t : {G + "t", std::string("he"), G + "the"})
        tokens.push_back(t);
    const size_t first_control = tokens.size();
    for (const char* t : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"})
        tokens.emplace_back(t);
    std::vector<int32_t> types(tokens.size(), 1);
    for (size_t i = first_control; i < tokens.size(); ++i)
        types[i] = 3;
    while (tokens.size() < n) {
        std::string filler = "w"; // (appended: gcc 12 warns falsely on "w" + std::string&&)
        filler += std::to_string(tokens.size());
        tokens.push_back(filler);
        types.push_back(1);
    }
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "qwen2");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_int32_array("tokenizer.ggml.token_type", types);
    w.set_string_array("tokenizer.ggml.merges", {G + " t", "h e", G + "t he"});
    w.set_uint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(first_control + 2));
}

class SummaryVsLoad : public ::testing::TestWithParam<Case> {
protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(temp_dir());
        write_tiny_gemma3(*dir_ + "/gemma3.gguf", TinyGemma3Config{});
        TinyGemma3Config llama;
        llama.architecture = "llama";
        llama.sliding_window = llama.n_ctx;
        write_tiny_gemma3(*dir_ + "/gemma3-llama.gguf", llama);
        Case bpe;
        bpe.base = "tiny_qwen2.gguf";
        bpe.drop = {"tokenizer.ggml.scores",           "tokenizer.ggml.add_bos_token",
                    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.unknown_token_id",
                    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_space_prefix"};
        bpe.set = [](GgufWriter& w) { set_bpe_vocabulary(w, 277); };
        rewrite(bpe, *dir_ + "/bpe-qwen2.gguf");
    }
    static void TearDownTestSuite() {
        std::filesystem::remove_all(*dir_);
        delete dir_;
    }

    static std::string base_path(const std::string& base) {
        if (base == "gemma3" || base == "gemma3-llama" || base == "bpe-qwen2")
            return *dir_ + "/" + base + ".gguf";
        return data_dir() + "/reference/fixtures/" + base;
    }

    /// The case's base file with its change, written to `path`.
    static void rewrite(const Case& c, const std::string& path) {
        const auto in = GgufFile::open(base_path(c.base));
        auto dropped = [&](const std::string& name) {
            return std::find(c.drop.begin(), c.drop.end(), name) != c.drop.end();
        };
        GgufWriter w;
        for (const auto& [key, value] : in->metadata())
            if (!dropped(key))
                w.set_value(key, value);
        for (const auto& t : in->tensors())
            if (!dropped(t.name))
                w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
        if (c.set)
            c.set(w);
        w.write(path);
    }

    static inline std::string* dir_ = nullptr;
};

TEST_P(SummaryVsLoad, SaysWhatLoadingSays) {
    const Case& c = GetParam();
    const std::string path = *dir_ + "/" + c.name + ".gguf";
    rewrite(c, path);
    const ModelSummary s = describe_model_file(path);
    const std::string load = load_message(path);
    if (!c.refusal.empty()) {
        ASSERT_NE(load, "") << "loading accepted the file; the case expected a refusal naming "
                            << c.refusal;
        ASSERT_NE(load.find(c.refusal), std::string::npos)
            << "loading refused the file for another reason than the case's: " << load;
        EXPECT_FALSE(s.supported) << "described as supported; loading says: " << load;
        EXPECT_EQ(s.problem, load);
        EXPECT_EQ(s.problem.find('\n'), std::string::npos) << s.problem;
        return;
    }
    ASSERT_EQ(load, "") << "the case expected the file to load";
    ASSERT_TRUE(s.supported) << s.problem;
    EXPECT_EQ(s.problem, "");
    // What the loaded model's layers hold per token: a key and a value row of n_kv_head ×
    // head_dim f16 values per attention layer, global ones apart.
    const auto m = Model::load(path);
    const ModelInfo& I = m->info();
    int64_t all = 0, global = 0;
    int attention = 0, sliding = 0, recurrent = 0, window = 0;
    for (const LayerInfo& l : I.layers) {
        if (l.recurrent()) {
            ++recurrent;
            continue;
        }
        ++attention;
        const int64_t bytes = int64_t{2} * l.attn.n_kv_head * l.attn.head_dim * 2;
        all += bytes;
        if (l.sliding()) {
            ++sliding;
            window = l.attn.window;
        } else {
            global += bytes;
        }
    }
    // The memory the model builds keeps rows in exactly those layers.
    const ModelMemory memory = m->new_memory(64, 16);
    int with_rows = 0;
    for (int il = 0; il < memory.n_layers(); ++il)
        with_rows += memory.is_recurrent(il) ? 0 : 1;
    EXPECT_EQ(with_rows, attention);
    EXPECT_GT(all, 0);
    EXPECT_EQ(s.kv_bytes_per_token, all);
    EXPECT_EQ(s.kv_bytes_per_token_global, global);
    EXPECT_EQ(s.n_attention_layers, attention);
    EXPECT_EQ(s.n_sliding_layers, sliding);
    EXPECT_EQ(s.n_recurrent_layers, recurrent);
    EXPECT_EQ(s.sliding_window, window);
    EXPECT_EQ(s.n_layer, I.n_layer);
    EXPECT_EQ(s.context_length, I.n_ctx_train);
    EXPECT_EQ(s.architecture, I.architecture);
    EXPECT_EQ(s.instruction_tuned, I.instruction_tuned);
    EXPECT_EQ(s.chat_format, chat_format_name(chat_format_of(I, m->tokenizer())));
}

/// {name, base, drop, set, refusal}, written short.
Case refused(std::string name, std::string base, std::function<void(GgufWriter&)> set,
             std::string refusal, std::vector<std::string> drop = {}) {
    return {std::move(name), std::move(base), std::move(drop), std::move(set), std::move(refusal)};
}
Case dropped(std::string name, std::string base, std::vector<std::string> drop,
             std::string refusal) {
    return {std::move(name), std::move(base), std::move(drop), {}, std::move(refusal)};
}
Case accepted(std::string name, std::string base, std::function<void(GgufWriter&)> set = {},
              std::vector<std::string> drop = {}) {
    return {std::move(name), std::move(base), std::move(drop), std::move(set), ""};
}

auto u32(const std::string& key, uint32_t v) {
    return [=](GgufWriter& w) { w.set_uint32(key, v); };
}
auto f32(const std::string& key, float v) {
    return [=](GgufWriter& w) { w.set_float32(key, v); };
}
auto str(const std::string& key, const std::string& v) {
    return [=](GgufWriter& w) { w.set_string(key, v); };
}
auto i32s(const std::string& key, const std::vector<int32_t>& v) {
    return [=](GgufWriter& w) { w.set_int32_array(key, v); };
}
auto tensor(const std::string& name, const std::vector<int64_t>& ne) {
    return [=](GgufWriter& w) { add_f32(w, name, ne); };
}

const char* kGemmaTemplate = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n"
                             "{{ m.content }}<end_of_turn>\n{% endfor %}";
const char* kChatMLTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                              "<|im_end|>\n{% endfor %}";

std::vector<Case> gemma3_cases() {
    const std::string g = "gemma3"; // 4 layers, 4 heads of 32, 2 KV heads, window 8, context 256
    return {
        dropped("Gemma3NoBlockCount", g, {"gemma3.block_count"}, "gemma3.block_count"),
        refused("Gemma3ValueLengthDiffers", g, u32("gemma3.attention.value_length", 16),
                "value_length differs"),
        refused("Gemma3HeadsDoNotShareKvHeads", g, u32("gemma3.attention.head_count_kv", 3),
                "is not a multiple of head_count_kv 3"),
        refused(
            "Gemma3OddHeadSize", g,
            [](GgufWriter& w) {
                w.set_uint32("gemma3.attention.key_length", 33);
                w.set_uint32("gemma3.attention.value_length", 33);
            },
            "key_length must be even"),
        refused("Gemma3WindowLongerThanContext", g, u32("gemma3.attention.sliding_window", 512),
                "larger than the context length"),
        refused("Gemma3RmsEpsilonOutOfRange", g,
                f32("gemma3.attention.layer_norm_rms_epsilon", 0.5f), "layer_norm_rms_epsilon"),
        refused("Gemma3RopeBaseOne", g, f32("gemma3.rope.freq_base", 1.0f), "RoPE bases"),
        refused("Gemma3RopeBaseNotANumber", g, str("gemma3.rope.freq_base", "1e6"),
                "gemma3.rope.freq_base"),
        refused("Gemma3PartialRotation", g, u32("gemma3.rope.dimension_count", 16),
                "partial rotary dimensions"),
        refused("Gemma3YarnScaling", g, str("gemma3.rope.scaling.type", "yarn"),
                "RoPE scaling 'yarn'"),
        refused("Gemma3LogitSoftcapping", g, f32("gemma3.final_logit_softcapping", 30.0f),
                "softcapping"),
        refused("Gemma3UntiedOutput", g, tensor("output.weight", {64, 277}), "untied output"),
        dropped("Gemma3NoTokenEmbedding", g, {"token_embd.weight"}, "token_embd.weight"),
    };
}

std::vector<Case> llama_family_cases() {
    const std::string m = "tiny_mistral.gguf"; // llama: 3 layers, 8 heads of 8, 2 KV heads
    const std::string l3 = "tiny_llama3.gguf"; // llama: Llama 3 frequency factors
    const std::string q2 = "tiny_qwen2.gguf", q3 = "tiny_qwen3.gguf";
    return {
        refused("LlamaHeadsDoNotShareKvHeads", m, u32("llama.attention.head_count_kv", 3),
                "llama.attention.head_count_kv"),
        refused("Qwen2HeadsDoNotShareKvHeads", q2, u32("qwen2.attention.head_count_kv", 3),
                "qwen2.attention.head_count_kv"),
        refused("LlamaPerLayerHeadCounts", m, i32s("llama.attention.head_count", {8, 8, 4}),
                "differs between layers"),
        refused("LlamaPerLayerKvHeadCounts", m, i32s("llama.attention.head_count_kv", {2, 2, 1}),
                "differs between layers"),
        refused("LlamaPerLayerFeedForward", m, i32s("llama.feed_forward_length", {128, 128, 64}),
                "differs between layers"),
        refused("LlamaExperts", m, u32("llama.expert_count", 8), "mixture-of-experts"),
        refused("LlamaYarnScaling", m, str("llama.rope.scaling.type", "yarn"), "'yarn'"),
        refused("LlamaLongRopeScaling", m, str("llama.rope.scaling.type", "longrope"),
                "'longrope'"),
        refused("LlamaLongRopeFactors", m, tensor("rope_factors_long.weight", {4}), "LongRoPE"),
        refused("LlamaScalingFactorTiny", m, f32("llama.rope.scaling.factor", 1e-5f),
                "llama.rope.scaling.factor"),
        refused("LlamaScalingTypeNotAString", m, u32("llama.rope.scaling.type", 3),
                "is not a string"),
        refused("LlamaPartialRotation", m, u32("llama.rope.dimension_count", 4),
                "partial rotation"),
        refused("LlamaRopeBaseOne", m, f32("llama.rope.freq_base", 1.0f), "llama.rope.freq_base"),
        dropped("LlamaNoRmsEpsilon", m, {"llama.attention.layer_norm_rms_epsilon"},
                "llama.attention.layer_norm_rms_epsilon"),
        refused("LlamaValueLengthDiffers", m, u32("llama.attention.value_length", 4),
                "value_length differs"),
        refused(
            "LlamaHeadsDoNotDivideTheEmbedding", m,
            [](GgufWriter& w) {
                w.set_uint32("llama.attention.head_count", 7);
                w.set_uint32("llama.attention.head_count_kv", 7);
            },
            "does not divide into 7 heads"),
        refused("LlamaFusedQkv", m, tensor("blk.1.attn_qkv.weight", {64, 96}), "fused QKV"),
        refused("LlamaFeedForwardBias", m, tensor("blk.0.ffn_up.bias", {128}),
                "feed-forward biases"),
        refused("LlamaQkNorm", l3, tensor("blk.0.attn_q_norm.weight", {16}), "q/k normalisation"),
        refused("LlamaFrequencyFactorNotPositive", l3,
                [](GgufWriter& w) { add_f32(w, "rope_freqs.weight", {8}, 0.0f); },
                "positive finite", {"rope_freqs.weight"}),
        refused("Qwen2FrequencyFactors", q2, tensor("rope_freqs.weight", {8}), "not part of qwen2"),
        refused("Qwen2OutputBias", q2, tensor("blk.1.attn_output.bias", {64}),
                "output bias is not part of qwen2"),
        refused("Qwen3Experts", q3, u32("qwen3.expert_count", 4), "mixture-of-experts"),
    };
}

std::vector<Case> tokenizer_cases() {
    const std::string sp = "tiny_qwen3.gguf"; // the tiny SentencePiece vocabulary
    const std::string bpe = "bpe-qwen2";
    // tiny_model.cpp's vocabulary with one more normal piece, its types as that file writes them.
    std::vector<std::string> longer_tokens = tiny_vocab();
    longer_tokens.push_back("extra");
    std::vector<int32_t> longer_types;
    for (size_t i = 0; i < longer_tokens.size(); ++i) {
        const std::string& t = longer_tokens[i];
        const bool byte = t.size() == 6 && t.rfind("<0x", 0) == 0;
        longer_types.push_back(i < 6 ? 3 : t == "\n" ? 4 : byte ? 6 : 1);
    }
    return {
        refused("TokenizerUnknownModel", sp, str("tokenizer.ggml.model", "bert"),
                "tokenizer: unsupported tokenizer 'bert'"),
        dropped("TokenizerNoModelKey", sp, {"tokenizer.ggml.model"}, "tokenizer.ggml.model"),
        refused("TokenizerBosOutsideTheVocabulary", sp, u32("tokenizer.ggml.bos_token_id", 9999),
                "tokenizer.ggml.bos_token_id = 9999"),
        dropped("TokenizerNoUnknownToken", sp, {"tokenizer.ggml.unknown_token_id"},
                "no unknown token id"),
        refused(
            "TokenizerScoresDisagree", sp,
            [](GgufWriter& w) {
                w.set_float32_array("tokenizer.ggml.scores", std::vector<float>(100, 0.0f));
            },
            "tokenizer arrays disagree"),
        refused(
            "TokenizerLongerThanTheEmbedding", sp,
            [longer_tokens, longer_types](GgufWriter& w) {
                const size_t n = longer_tokens.size();
                w.set_string_array("tokenizer.ggml.tokens", longer_tokens);
                w.set_float32_array("tokenizer.ggml.scores", std::vector<float>(n, 0.0f));
                w.set_int32_array("tokenizer.ggml.token_type", longer_types);
            },
            "token_embd.weight has 277 rows"),
        refused(
            "TokenizerRepeatedPiece", sp,
            [](GgufWriter& w) {
                std::vector<std::string> tokens = tiny_vocab();
                tokens.back() = "the"; // a normal piece already in the vocabulary
                w.set_string_array("tokenizer.ggml.tokens", tokens);
            },
            "tokenizer: tokenizer.ggml.tokens repeats the piece 'the'"),
        refused("BpeUnknownPreTokenizer", bpe, str("tokenizer.ggml.pre", "nonsense"),
                "unsupported BPE pre-tokenizer"),
        dropped("BpeNoMerges", bpe, {"tokenizer.ggml.merges"}, "tokenizer.ggml.merges"),
        refused(
            "BpeMergeOfAMissingPiece", bpe,
            [](GgufWriter& w) { w.set_string_array("tokenizer.ggml.merges", {"q zz"}); },
            "not in the vocabulary"),
        refused("BpeEosOutsideTheVocabulary", bpe, u32("tokenizer.ggml.eos_token_id", 5000),
                "tokenizer.ggml.eos_token_id = 5000"),
        refused(
            "BpeBosWantedWithoutOne", bpe,
            [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_bos_token", true); },
            "asks for a BOS token"),
        refused("BpeTypesDisagree", bpe, i32s("tokenizer.ggml.token_type", {1, 1, 1}),
                "tokenizer arrays disagree"),
    };
}

std::vector<Case> chat_format_cases() {
    std::vector<std::string> no_turn_tokens = tiny_vocab();
    no_turn_tokens[4] = "<sot>"; // <start_of_turn>
    return {
        refused("ChatTemplateOfNoKnownFormat", "tiny_mistral.gguf",
                str("tokenizer.chat_template",
                    "{% for m in messages %}<|user|>\n{{ m.content }}<|end|>{% endfor %}"),
                "none of the formats"),
        refused("ChatMLTemplateWithoutItsTokens", "tiny_mistral.gguf",
                str("tokenizer.chat_template", kChatMLTemplate), "lacks <|im_start|>"),
        refused(
            "GemmaTemplateWithoutItsTokens", "gemma3",
            [no_turn_tokens](GgufWriter& w) {
                w.set_string("tokenizer.chat_template", kGemmaTemplate);
                w.set_string_array("tokenizer.ggml.tokens", no_turn_tokens);
            },
            "lacks <start_of_turn>"),
        refused(
            "InstructionTunedGemmaNamedItWithoutItsTokens", "gemma3",
            [no_turn_tokens](GgufWriter& w) {
                w.set_string("general.name", "tiny gemma3-it");
                w.set_string_array("tokenizer.ggml.tokens", no_turn_tokens);
            },
            "lacks <start_of_turn>"),
        refused("SentencePieceBosWantedWithoutOne", "tiny_qwen3.gguf",
                [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_bos_token", true); },
                "asks for a BOS token", {"tokenizer.ggml.bos_token_id"}),
        refused("Llama3TemplateOnAChatMLVocabulary", "bpe-qwen2",
                str("tokenizer.chat_template", "<|start_header_id|>{{ role }}<|end_header_id|>"),
                "lacks <|start_header_id|>"),
    };
}

std::vector<Case> hybrid_cases() {
    const std::string g = "tiny_granitehybrid.gguf"; // layers 0, 1, 3 Mamba-2; 2 attends
    const std::string q = "tiny_qwen3next.gguf";     // layers 1, 3 attend
    return {
        refused(
            "GraniteRope", g,
            [](GgufWriter& w) { w.set_bool("granitehybrid.rope.scaling.finetuned", true); },
            "only NoPE"),
        refused("GranitePerLayerFeedForward", g,
                i32s("granitehybrid.feed_forward_length", {64, 64, 64, 32}),
                "differs between layers"),
        refused("GraniteFirstHeadCountZero", g,
                i32s("granitehybrid.attention.head_count", {0, 4, 4, 4}), "must be > 0"),
        refused("GraniteHeadsDoNotShareKvHeads", g,
                i32s("granitehybrid.attention.head_count_kv", {0, 0, 3, 0}),
                "layer 2: head_count 4 is not a multiple of head_count_kv 3"),
        refused("GraniteValueLengthDiffers", g, u32("granitehybrid.attention.value_length", 4),
                "value_length differs"),
        refused("GraniteSsmInnerSize", g, u32("granitehybrid.ssm.inner_size", 60),
                "is not a multiple of time_step_rank"),
        refused("GraniteExpertsWithoutUsedCount", g, u32("granitehybrid.expert_count", 4),
                "granitehybrid.expert_used_count"),
        refused("GraniteAttentionBias", g, tensor("blk.2.attn_q.bias", {32}), "attention biases"),
        refused("GraniteRouterWithoutExperts", g, tensor("blk.0.ffn_gate_inp.weight", {32, 4}),
                "router without"),
        refused("GraniteFeedForwardBias", g, tensor("blk.1.ffn_up.bias", {64}),
                "feed-forward biases"),
        refused("Qwen3NextMultiTokenPrediction", q, u32("qwen3next.nextn_predict_layers", 1),
                "multi-token-prediction"),
        refused("Qwen3NextWithoutExperts", q, u32("qwen3next.expert_count", 0),
                "qwen3next files are MoE"),
        refused("Qwen3NextYarnScaling", q, str("qwen3next.rope.scaling.type", "yarn"),
                "RoPE scaling 'yarn'"),
        refused("Qwen3NextScalingFactor", q, f32("qwen3next.rope.scaling.factor", 2.0f),
                "rope.scaling.factor"),
        refused("Qwen3NextOddRotation", q, u32("qwen3next.rope.dimension_count", 3),
                "must be even"),
        refused("Qwen3NextValueHeadsDiffer", q, u32("qwen3next.ssm.inner_size", 64),
                "value head size 16"),
        refused("Qwen3NextSsmInnerSize", q, u32("qwen3next.ssm.inner_size", 30),
                "not a multiple of ssm.time_step_rank"),
        refused(
            "Qwen3NextRecurrentLayersOfAnotherLength", q,
            [](GgufWriter& w) {
                w.set_value("qwen3next.attention.recurrent_layers",
                            GgufValue{GgufValueType::Array, GgufValueType::Bool,
                                      std::vector<bool>{true, false, true}});
            },
            "3 entries for 4 layers"),
        refused("Qwen3NextFusedGateUpExperts", q,
                tensor("blk.0.ffn_gate_up_exps.weight", {32, 32, 4}), "fused gate/up"),
        refused("Qwen3NextFusedQkvInAttention", q, tensor("blk.1.attn_qkv.weight", {32, 128}),
                "fused QKV in attention layers"),
    };
}

std::vector<Case> other_refusals() {
    return {
        refused("UnsupportedArchitecture", "tiny_mistral.gguf", str("general.architecture", "phi3"),
                "unsupported model architecture 'phi3'"),
        dropped("NoArchitecture", "tiny_mistral.gguf", {"general.architecture"},
                "not a model file"),
        refused("ArchitectureNotAString", "tiny_mistral.gguf", u32("general.architecture", 1),
                "general.architecture"),
    };
}

std::vector<Case> accepted_cases() {
    return {
        accepted("Gemma3", "gemma3"),
        accepted("Gemma3DefaultPattern", "gemma3", {}, {"gemma3.attention.sliding_window_pattern"}),
        accepted("Gemma3NamedInstructionTuned", "gemma3", str("general.name", "tiny gemma3-it")),
        accepted("Gemma3WithItsTemplate", "gemma3", str("tokenizer.chat_template", kGemmaTemplate)),
        accepted("Gemma3ShapedLlama", "gemma3-llama"),
        accepted("Llama3", "tiny_llama3.gguf"),
        accepted("Mistral", "tiny_mistral.gguf"),
        accepted("MistralEveryLayerSliding", "tiny_mistral.gguf",
                 u32("llama.attention.sliding_window", 8)),
        accepted("MistralWindowAsLongAsTheContext", "tiny_mistral.gguf",
                 u32("llama.attention.sliding_window", 256)),
        accepted("MistralRopeScalingNone", "tiny_mistral.gguf",
                 str("llama.rope.scaling.type", "none")),
        // A SentencePiece space prefix (Llama 2, Mistral 7B), the key absent or true.
        accepted("MistralSpacePrefixByDefault", "tiny_mistral.gguf", {},
                 {"tokenizer.ggml.add_space_prefix"}),
        accepted("MistralSpacePrefix", "tiny_mistral.gguf",
                 [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_space_prefix", true); }),
        accepted("MistralUniformPerLayerHeadCounts", "tiny_mistral.gguf",
                 i32s("llama.attention.head_count", {8, 8, 8})),
        accepted("Qwen2", "tiny_qwen2.gguf"),
        accepted("Qwen2WindowKeyIgnored", "tiny_qwen2.gguf",
                 u32("qwen2.attention.sliding_window", 8)),
        accepted("Qwen3", "tiny_qwen3.gguf"),
        accepted("Qwen2BpeChatML", "bpe-qwen2", str("tokenizer.chat_template", kChatMLTemplate)),
        accepted("Qwen2BpeBase", "bpe-qwen2"),
        accepted("GraniteHybrid", "tiny_granitehybrid.gguf"),
        accepted("GraniteHybridMoe", "tiny_granitehybrid_moe.gguf"),
        accepted("Qwen3Next", "tiny_qwen3next.gguf"),
        accepted("Qwen3NextRecurrentLayersListed", "tiny_qwen3next.gguf",
                 [](GgufWriter& w) {
                     w.set_value("qwen3next.attention.recurrent_layers",
                                 GgufValue{GgufValueType::Array, GgufValueType::Bool,
                                           std::vector<bool>{true, false, true, false}});
                 }),
    };
}

std::vector<Case> all_cases() {
    std::vector<Case> out;
    for (auto part : {gemma3_cases(), llama_family_cases(), tokenizer_cases(), chat_format_cases(),
                      hybrid_cases(), other_refusals(), accepted_cases()})
        out.insert(out.end(), part.begin(), part.end());
    return out;
}

} // namespace

INSTANTIATE_TEST_SUITE_P(Cases, SummaryVsLoad, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });
