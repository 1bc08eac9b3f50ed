// Byte-level BPE tokenizer (engine/text/bpe_tokenizer.*) against llama.cpp's tokenizer on
// SmolLM2-135M-Instruct (tests/reference/fixtures/bpe_tokenizer_smollm2.json, made by
// tests/reference/make_bpe_fixtures.py), and its refusals of bad vocabularies written with
// the tests' GGUF writer.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/text/bpe_tokenizer.h"
#include "engine/text/tokenizer.h"
#include "gguf_test_util.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>

using namespace spanscope;
using namespace spanscope::test;

namespace {

const nlohmann::json& fixture() {
    static const nlohmann::json f = [] {
        std::ifstream in(data_dir() + "/reference/fixtures/bpe_tokenizer_smollm2.json");
        return nlohmann::json::parse(in);
    }();
    return f;
}

class SmolLM2Tokenizer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const auto path = smollm2_model_path();
        if (!path)
            return;
        gguf_ = GgufFile::open(*path).release();
        tok_ = Tokenizer::from_gguf(*gguf_).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete gguf_;
        tok_ = nullptr;
        gguf_ = nullptr;
    }
    void SetUp() override {
        if (!tok_)
            GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf is not installed (bash "
                            "scripts/setup.sh model, or set SPANSCOPE_SMOLLM2_MODEL)";
    }
    static inline GgufFile* gguf_ = nullptr;
    static inline Tokenizer* tok_ = nullptr;
};

} // namespace

TEST_F(SmolLM2Tokenizer, IsTheFileTheFixtureWasMadeFrom) {
    const auto& keys = fixture()["meta"]["gguf_tokenizer_keys"];
    EXPECT_EQ(gguf_->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(gguf_->get_string("tokenizer.ggml.pre"),
              keys["tokenizer.ggml.pre"].get<std::string>());
    EXPECT_EQ(gguf_->get_string_array("tokenizer.ggml.merges").size(),
              keys["n_merges"].get<size_t>());
    EXPECT_EQ(tok_->n_vocab(), keys["n_tokens"].get<int>());
}

TEST_F(SmolLM2Tokenizer, IdenticalToLlamaCppOnEveryFixtureString) {
    const auto& f = fixture();
    ASSERT_GE(f["cases"].size(), 60u);
    int matched = 0, matched_plain = 0;
    for (const auto& c : f["cases"]) {
        const std::string name = c["name"];
        const std::string text = text_from_hex(c["utf8_hex"].get<std::string>());
        const auto expected = c["ids"].get<std::vector<int32_t>>();
        const auto got = tok_->encode(text, /*parse_special=*/true);
        EXPECT_EQ(got, expected) << name << ": ours " << ids_text(got) << ", llama.cpp "
                                 << ids_text(expected);
        matched += got == expected;
        const auto expected_plain = c.contains("ids_special_false")
                                        ? c["ids_special_false"].get<std::vector<int32_t>>()
                                        : expected;
        const auto plain = tok_->encode(text, /*parse_special=*/false);
        EXPECT_EQ(plain, expected_plain) << name << " (special text as plain text)";
        matched_plain += plain == expected_plain;
    }
    std::printf("[ fixture  ] %d/%zu cases identical with parse_special, %d/%zu without\n", matched,
                f["cases"].size(), matched_plain, f["cases"].size());
}

TEST_F(SmolLM2Tokenizer, DecodesBackLikeLlamaCpp) {
    int exact = 0;
    for (const auto& c : fixture()["cases"]) {
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        const std::string text = text_from_hex(c["utf8_hex"].get<std::string>());
        const std::string want = c["detok_roundtrip_exact"].get<bool>()
                                     ? text
                                     : text_from_hex(c["detok"]["hex"].get<std::string>());
        EXPECT_EQ(tok_->decode(ids, /*render_special=*/true), want) << c["name"];
        exact += c["detok_roundtrip_exact"].get<bool>();
    }
    // Byte-level BPE loses nothing: every fixture string comes back byte for byte.
    EXPECT_EQ(exact, static_cast<int>(fixture()["cases"].size()));
}

TEST_F(SmolLM2Tokenizer, SpecialIdsMatchLlamaCpp) {
    const auto& s = fixture()["special"];
    auto id = [&](const char* k) { return s[k].is_null() ? -1 : s[k].get<int>(); };
    EXPECT_EQ(tok_->n_vocab(), s["n_vocab"].get<int>());
    EXPECT_EQ(tok_->bos(), id("bos"));
    EXPECT_EQ(tok_->eos(), id("eos"));
    EXPECT_EQ(tok_->pad(), id("pad"));
    EXPECT_EQ(tok_->add_bos(), s["add_bos_token"].get<bool>());
    ASSERT_GE(id("eot"), 0);
    EXPECT_TRUE(tok_->is_end_of_generation(id("eot")));
    EXPECT_TRUE(tok_->is_end_of_generation(id("eos")));
    EXPECT_EQ(tok_->encode("\n"), std::vector<int32_t>{id("nl")});
}

TEST_F(SmolLM2Tokenizer, PiecesLikeLlamaCpp) {
    int n = 0;
    for (const auto& p : fixture()["pieces"]) {
        const int id = p["id"].get<int>();
        EXPECT_EQ(tok_->piece(id), text_from_hex(p["vocab_text"]["hex"].get<std::string>())) << id;
        EXPECT_EQ(tok_->find(tok_->piece(id)), id) << id;
        EXPECT_EQ(tok_->token_bytes(id), text_from_hex(p["piece"]["hex"].get<std::string>())) << id;
        EXPECT_EQ(tok_->decode({id}, /*render_special=*/true),
                  text_from_hex(p["piece_special"]["hex"].get<std::string>()))
            << id;
        EXPECT_EQ(tok_->is_control(id), p["is_control"].get<bool>()) << id;
        EXPECT_EQ(tok_->is_end_of_generation(id), p["is_eog"].get<bool>()) << id;
        ++n;
    }
    EXPECT_GE(n, 20);
    EXPECT_THROW(tok_->token_bytes(tok_->n_vocab()), std::out_of_range);
    EXPECT_THROW(tok_->token_bytes(-1), std::out_of_range);
}

TEST_F(SmolLM2Tokenizer, DetokenizesSequencesLikeLlamaCpp) {
    const auto& d = fixture()["detokenize"];
    ASSERT_FALSE(d.empty());
    for (const auto& c : d) {
        const auto ids = c["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok_->decode(ids, true),
                  text_from_hex(c["remove_special_false_unparse_true"]["hex"].get<std::string>()));
        EXPECT_EQ(tok_->decode(ids, false),
                  text_from_hex(c["remove_special_false_unparse_false"]["hex"].get<std::string>()));
    }
}

TEST_F(SmolLM2Tokenizer, BosOnlyWhereTheModelWantsOneAndExactlyOne) {
    // llama.cpp's add_bos=true prepends BOS only when the vocabulary asks for it
    // (tokenizer.ggml.add_bos_token); our callers do the same with add_bos().
    for (const auto& c : fixture()["with_bos"]) {
        const std::string text = c["text"];
        for (const bool special : {true, false}) {
            std::vector<int32_t> ids;
            if (tok_->add_bos())
                ids.push_back(tok_->bos());
            const auto rest = tok_->encode(text, special);
            ids.insert(ids.end(), rest.begin(), rest.end());
            EXPECT_EQ(ids, c[special ? "ids_special" : "ids_plain"].get<std::vector<int32_t>>())
                << text;
        }
    }
    // Text that spells the BOS token stays text unless special text is parsed.
    if (tok_->bos() >= 0) {
        const std::string bos_text = tok_->piece(tok_->bos());
        const auto plain = tok_->encode("x" + bos_text + "y" + bos_text, false);
        EXPECT_EQ(std::count(plain.begin(), plain.end(), tok_->bos()), 0);
        const auto parsed = tok_->encode("x" + bos_text + "y", true);
        EXPECT_EQ(std::count(parsed.begin(), parsed.end(), tok_->bos()), 1);
    }
}

TEST_F(SmolLM2Tokenizer, LongAndDegenerateInputsRoundTrip) {
    // Long runs stress PCRE2's backtracking (\s+(?!\S) over a run of spaces) and the merge
    // queue; byte-level BPE must give every byte back.
    const std::string license = read_file("/usr/share/common-licenses/GPL-3");
    std::vector<std::string> inputs = {std::string(1 << 20, ' '), std::string(1 << 20, 'a'),
                                       std::string(1 << 18, '\n'), std::string(1 << 18, '7')};
    std::string mixed;
    for (int i = 0; i < 20000; ++i)
        mixed += i % 3 ? " \t" : "x\xc3\xa9 ";
    inputs.push_back(mixed);
    if (!license.empty())
        inputs.push_back(license);
    for (const auto& in : inputs) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto ids = tok_->encode(in, false);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_EQ(tok_->decode(ids, false), in) << in.substr(0, 20);
        std::printf("[ timing   ] %zu bytes -> %zu tokens in %.3f s\n", in.size(), ids.size(), s);
    }
}

TEST_F(SmolLM2Tokenizer, OtherPreTokenizersLikeLlamaCpp) {
    // The same vocabulary and merges under the other pre-tokenizers, as llama.cpp tokenised a
    // metadata-only copy of the file with tokenizer.ggml.pre replaced.
    const auto& other = fixture()["other_pre"];
    ASSERT_EQ(other.size(), 4u);
    std::map<std::string, std::vector<int32_t>> smollm;
    for (const auto& c : fixture()["cases"])
        smollm[c["name"]] = c["ids"].get<std::vector<int32_t>>();
    std::map<std::string, std::string> texts;
    for (const auto& c : fixture()["cases"])
        texts[c["name"]] = text_from_hex(c["utf8_hex"].get<std::string>());
    for (const auto& [pre, cases] : other.items()) {
        GgufWriter w;
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", pre);
        w.set_string_array("tokenizer.ggml.tokens",
                           gguf_->get_string_array("tokenizer.ggml.tokens"));
        std::vector<int32_t> types;
        for (int64_t t : gguf_->get_int_array("tokenizer.ggml.token_type"))
            types.push_back(static_cast<int32_t>(t));
        w.set_int32_array("tokenizer.ggml.token_type", types);
        w.set_string_array("tokenizer.ggml.merges",
                           gguf_->get_string_array("tokenizer.ggml.merges"));
        for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                "tokenizer.ggml.padding_token_id"})
            w.set_uint32(key, static_cast<uint32_t>(gguf_->get_uint(key)));
        w.set_bool("tokenizer.ggml.add_bos_token", gguf_->get_bool("tokenizer.ggml.add_bos_token"));
        const auto bytes = w.to_bytes();
        const auto g = parse(bytes);
        const auto tok = BpeTokenizer::from_gguf(*g);
        int matched = 0, differs_from_smollm = 0;
        for (const auto& c : cases) {
            const std::string name = c["name"];
            const auto expected = c["ids"].get<std::vector<int32_t>>();
            const auto got = tok->encode(texts.at(name), true);
            EXPECT_EQ(got, expected) << pre << " " << name << ": ours " << ids_text(got)
                                     << ", llama.cpp " << ids_text(expected);
            matched += got == expected;
            differs_from_smollm += expected != smollm.at(name);
        }
        std::printf("[ fixture  ] pre-tokenizer %s: %d/%zu cases identical (%d differ from "
                    "smollm's ids)\n",
                    pre.c_str(), matched, cases.size(), differs_from_smollm);
    }
}

// ---------------------------------------------------------------- small written vocabularies

namespace {

// A tiny GPT-2 style vocabulary: the ids are written here by hand.
struct TinyBpe {
    std::vector<std::string> tokens = {"<|endoftext|>",
                                       "<|im_start|>",
                                       "a",
                                       "b",
                                       "c",
                                       "ab",
                                       "bc",
                                       "abc",
                                       "\xc4\xa0", // Ġ
                                       "\xc4\xa0"
                                       "a",
                                       "1",
                                       "2"};
    std::vector<int32_t> types = {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    std::vector<std::string> merges = {"b c", "a b", "a bc", "\xc4\xa0 a"};
    std::string pre = "smollm";
    bool with_bos = true;
    std::function<void(GgufWriter&)> extra;

    std::unique_ptr<GgufFile> file(std::vector<uint8_t>& bytes) const {
        GgufWriter w;
        w.set_string("general.architecture", "llama");
        w.set_string("tokenizer.ggml.model", "gpt2");
        w.set_string("tokenizer.ggml.pre", pre);
        w.set_string_array("tokenizer.ggml.tokens", tokens);
        w.set_int32_array("tokenizer.ggml.token_type", types);
        w.set_string_array("tokenizer.ggml.merges", merges);
        if (with_bos)
            w.set_uint32("tokenizer.ggml.bos_token_id", 1);
        w.set_uint32("tokenizer.ggml.eos_token_id", 0);
        if (extra)
            extra(w);
        bytes = w.to_bytes();
        return parse(bytes);
    }
    std::unique_ptr<BpeTokenizer> build() const {
        std::vector<uint8_t> bytes;
        auto g = file(bytes);
        return BpeTokenizer::from_gguf(*g);
    }
    // The message of the std::runtime_error from_gguf throws ("" if it does not).
    std::string refusal() const {
        try {
            build();
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    }
};

} // namespace

TEST(BpeTokenizer, MergesLowestRankFirst) {
    TinyBpe v;
    auto tok = v.build();
    // "b c" (rank 0) before "a b" (rank 1): a + bc, then "a bc" -> abc.
    EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{7}));
    v.merges = {"a b", "b c", "a bc", "\xc4\xa0 a"}; // now ab first; "ab c" is no merge
    tok = v.build();
    EXPECT_EQ(tok->encode("abc", false), (std::vector<int32_t>{5, 4}));
    // A space joins the next word (GPT-2 " ?\p{L}+"), digits are split one by one (smollm).
    EXPECT_EQ(tok->encode("a a", false), (std::vector<int32_t>{2, 9}));
    EXPECT_EQ(tok->encode("12", false), (std::vector<int32_t>{10, 11}));
    EXPECT_EQ(tok->decode({2, 9}, false), "a a");
    // Control text is parsed only on request.
    EXPECT_EQ(tok->encode("<|im_start|>", true), (std::vector<int32_t>{1}));
    EXPECT_NE(tok->encode("<|im_start|>", false), (std::vector<int32_t>{1}));
    EXPECT_EQ(tok->decode({1, 2}, true), "<|im_start|>a");
    EXPECT_EQ(tok->decode({1, 2}, false), "a");
    EXPECT_THROW(tok->encode("a\xff", false), std::invalid_argument);
}

TEST(BpeTokenizer, UserDefinedAndByteTokens) {
    TinyBpe v;
    v.tokens.insert(v.tokens.end(), {"x y", "<0x0A>", "<0xZZ>", "zz"});
    v.types.insert(v.types.end(), {4, 6, 6, 5});
    auto tok = v.build();
    // A user-defined token is cut out of the raw text even without parse_special, and decodes
    // to its text as stored (no byte mapping); <0x0A> is the byte 0x0A; a malformed byte
    // piece and an unused token decode to nothing.
    EXPECT_EQ(tok->encode("ax yb", false), (std::vector<int32_t>{2, 12, 3}));
    EXPECT_EQ(tok->token_bytes(12), "x y");
    EXPECT_EQ(tok->token_bytes(13), "\n");
    EXPECT_EQ(tok->token_bytes(14), "");
    EXPECT_EQ(tok->token_bytes(15), "");
    EXPECT_FALSE(tok->is_control(12));
    EXPECT_TRUE(tok->is_control(1));
}

TEST(BpeTokenizer, GptTwoByteMapping) {
    EXPECT_EQ(BpeTokenizer::byte_to_unicode(' '), "\xc4\xa0");  // U+0120 Ġ
    EXPECT_EQ(BpeTokenizer::byte_to_unicode('\n'), "\xc4\x8a"); // U+010A Ċ
    EXPECT_EQ(BpeTokenizer::byte_to_unicode('A'), "A");
    EXPECT_EQ(BpeTokenizer::byte_to_unicode(0xad), "\xc5\x83"); // U+0143, the 68th remapped byte
    EXPECT_EQ(BpeTokenizer::byte_to_unicode(0xe9), "\xc3\xa9"); // é stands for itself
}

TEST(BpeTokenizer, RefusesUnknownPreTokenizer) {
    TinyBpe v;
    v.pre = "no-such-pre";
    const std::string msg = v.refusal();
    EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tokenizer.ggml.pre"), std::string::npos) << msg;
}

TEST(BpeTokenizer, RefusesMergesNamingMissingPieces) {
    TinyBpe v;
    v.merges.push_back("a zz");
    std::string msg = v.refusal();
    EXPECT_NE(msg.find("tokenizer.ggml.merges[4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'zz', which is not in the vocabulary"), std::string::npos) << msg;
    v.merges = {"c a"}; // both halves exist, the merged piece "ca" does not
    msg = v.refusal();
    EXPECT_NE(msg.find("'ca', which is not in the vocabulary"), std::string::npos) << msg;
    v.merges = {"abc"};
    msg = v.refusal();
    EXPECT_NE(msg.find("is not two pieces separated by a space"), std::string::npos) << msg;
}

TEST(BpeTokenizer, RefusesCountsThatDisagree) {
    TinyBpe v;
    v.types.pop_back();
    std::string msg = v.refusal();
    EXPECT_NE(msg.find("12 tokens but 11 token types"), std::string::npos) << msg;
    TinyBpe w;
    w.extra = [](GgufWriter& g) {
        g.set_float32_array("tokenizer.ggml.scores", std::vector<float>(13, 0.f));
    };
    msg = w.refusal();
    EXPECT_NE(msg.find("12 tokens but 13 scores"), std::string::npos) << msg;
    w.extra = [](GgufWriter& g) {
        g.set_float32_array("tokenizer.ggml.scores", std::vector<float>(12, 0.f));
    };
    EXPECT_EQ(w.refusal(), "");
}

TEST(BpeTokenizer, RefusesBosOrEosOutOfRangeAndLeavesTheOptionalIdsUnset) {
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
        TinyBpe v;
        v.extra = [key](GgufWriter& w) { w.set_uint32(key, 12); };
        const std::string msg = v.refusal();
        EXPECT_NE(msg.find(std::string(key) + " = 12 is outside the vocabulary of 12 tokens"),
                  std::string::npos)
            << msg;
    }
    // A padding id one past the vocabulary (such files exist): the id is left unset, as
    // llama.cpp leaves it, and the vocabulary loads.
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.padding_token_id",
                            "tokenizer.ggml.unknown_token_id"}) {
        TinyBpe v;
        v.extra = [key](GgufWriter& w) { w.set_uint32(key, 12); };
        ASSERT_EQ(v.refusal(), "") << key;
        const auto tok = v.build();
        EXPECT_EQ(tok->pad(), -1) << key;
        EXPECT_EQ(tok->unk(), -1) << key;
    }
}

TEST(BpeTokenizer, RefusesBosWantedButAbsent) {
    TinyBpe v;
    v.with_bos = false;
    v.extra = [](GgufWriter& w) { w.set_bool("tokenizer.ggml.add_bos_token", true); };
    const std::string msg = v.refusal();
    EXPECT_NE(msg.find("asks for a BOS token"), std::string::npos) << msg;
    v.pre = "llama-bpe"; // Llama 3 wants BOS by default, even without the key
    v.extra = nullptr;
    EXPECT_NE(v.refusal().find("asks for a BOS token"), std::string::npos);
    v.pre = "smollm";
    EXPECT_EQ(v.refusal(), "");
}

TEST(BpeTokenizer, TokenizerDispatchesOnTheModelKey) {
    TinyBpe v;
    std::vector<uint8_t> bytes;
    auto g = v.file(bytes);
    auto tok = Tokenizer::from_gguf(*g);
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{7}));
    EXPECT_EQ(tok->n_vocab(), 12);
    EXPECT_EQ(tok->piece(8), "\xc4\xa0");
    EXPECT_EQ(tok->find("bc"), 6);
    EXPECT_EQ(tok->bos(), 1);
    EXPECT_TRUE(tok->is_end_of_generation(0)); // eos; <|endoftext|> by its text too
    v.extra = [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "rwkv"); };
    g = v.file(bytes);
    try {
        Tokenizer::from_gguf(*g);
        ADD_FAILURE() << "an rwkv vocabulary was accepted";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("'rwkv'"), std::string::npos) << e.what();
    }
}
