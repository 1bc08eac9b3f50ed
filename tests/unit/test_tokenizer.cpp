// Tokenizer built from the GGUF vocabulary, against llama.cpp's tokenizer on the same file
// (tests/reference/fixtures/tokenizer.json, made by tests/reference/make_fixtures.py).
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "gguf_test_util.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;

namespace {

nlohmann::json fixture() {
    std::ifstream in(data_dir() + "/reference/fixtures/tokenizer.json");
    return nlohmann::json::parse(in);
}

class RealTokenizer : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const auto path = real_model_path();
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
            GTEST_SKIP() << "the default model is not installed (bash scripts/setup.sh model)";
    }
    static inline GgufFile* gguf_ = nullptr;
    static inline Tokenizer* tok_ = nullptr;
};

} // namespace

TEST_F(RealTokenizer, IdenticalToLlamaCppOnEveryFixtureString) {
    const auto f = fixture();
    ASSERT_GE(f["cases"].size(), 25u);
    int compared = 0;
    for (const auto& c : f["cases"]) {
        const std::string text = text_from_hex(c["utf8_hex"].get<std::string>());
        const auto expected = c["ids"].get<std::vector<int32_t>>();
        // The fixture's ids parse special-token text (llama.cpp parse_special=true).
        EXPECT_EQ(tok_->encode(text, /*parse_special=*/true), expected) << c["name"];
        if (c.contains("ids_special_false")) {
            EXPECT_EQ(tok_->encode(text, false), c["ids_special_false"].get<std::vector<int32_t>>())
                << c["name"] << " (special text as plain text)";
        } else {
            EXPECT_EQ(tok_->encode(text, false), expected) << c["name"] << " (plain)";
        }
        if (c.value("detok_roundtrip_exact", false)) {
            EXPECT_EQ(tok_->decode(expected, /*render_special=*/true), text) << c["name"];
        }
        ++compared;
    }
    EXPECT_EQ(compared, static_cast<int>(f["cases"].size()));
}

TEST_F(RealTokenizer, SpecialIdsMatch) {
    const auto s = fixture()["special"];
    EXPECT_EQ(tok_->bos(), s["bos"].get<int>());
    EXPECT_EQ(tok_->eos(), s["eos"].get<int>());
    EXPECT_EQ(tok_->unk(), s["unk"].get<int>());
    EXPECT_EQ(tok_->pad(), s["pad"].get<int>());
    EXPECT_EQ(tok_->find("<start_of_turn>"), s["start_of_turn"].get<int>());
    EXPECT_EQ(tok_->find("<end_of_turn>"), s["end_of_turn"].get<int>());
    EXPECT_EQ(tok_->n_vocab(), s["n_vocab"].get<int>());
    EXPECT_TRUE(tok_->is_end_of_generation(s["eos"].get<int>()));
    EXPECT_TRUE(tok_->is_end_of_generation(s["end_of_turn"].get<int>()));
}

TEST_F(RealTokenizer, PiecesDecodeLikeLlamaCpp) {
    const auto f = fixture(); // keep the document alive while iterating over a member
    for (const auto& p : f["pieces"]) {
        const int id = p["id"].get<int>();
        EXPECT_EQ(tok_->token_bytes(id), text_from_hex(p["piece"]["hex"].get<std::string>())) << id;
    }
}

TEST_F(RealTokenizer, DetokenizesLikeLlamaCpp) {
    // llama_detokenize with remove_special=true drops control tokens (our decode), with
    // remove_special=false and unparse_special=true it spells them (render_special).
    const auto f = fixture();
    ASSERT_FALSE(f["detokenize"].empty());
    for (const auto& d : f["detokenize"]) {
        const auto ids = d["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok_->decode(ids),
                  text_from_hex(d["remove_special_true_unparse_false"]["hex"].get<std::string>()));
        EXPECT_EQ(tok_->decode(ids, /*render_special=*/true),
                  text_from_hex(d["remove_special_false_unparse_true"]["hex"].get<std::string>()));
    }
}

TEST_F(RealTokenizer, BosThenTextLikeLlamaCpp) {
    // llama.cpp's add_bos=true is BOS + the text's ids. (For "<bos>Hello" it gives two BOS;
    // our prompts never parse special text from documents, so they keep exactly one.)
    const auto f = fixture();
    for (const auto& c : f["with_bos"]) {
        const std::string text = c["text"];
        std::vector<int32_t> ids{tok_->bos()};
        const auto rest = tok_->encode(text, /*parse_special=*/true);
        ids.insert(ids.end(), rest.begin(), rest.end());
        EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << text;
    }
}

TEST_F(RealTokenizer, ExactlyOneBosWhateverTheTextSays) {
    // failure mode 17 (tests/README.md): documents or questions that contain "<bos>" stay text.
    const auto prompt =
        build_question_prompt(*tok_, ChatFormat::Completion, {{"d", "<bos>text<bos>"}}, "<bos>?");
    EXPECT_EQ(std::count(prompt.tokens.begin(), prompt.tokens.end(), tok_->bos()), 1);
    EXPECT_EQ(prompt.tokens.front(), tok_->bos());
    const auto chat =
        build_question_prompt(*tok_, ChatFormat::Gemma, {{"d", "<start_of_turn>x"}}, "q");
    EXPECT_EQ(std::count(chat.tokens.begin(), chat.tokens.end(), tok_->bos()), 1);
    EXPECT_EQ(std::count(chat.tokens.begin(), chat.tokens.end(), tok_->find("<start_of_turn>")), 2);
}

TEST(Tokenizer, RejectsInvalidUtf8) {
    const auto dir = temp_dir();
    write_tiny_gemma3(dir + "/t.gguf", TinyGemma3Config{});
    auto g = GgufFile::open(dir + "/t.gguf");
    auto tok = Tokenizer::from_gguf(*g);
    EXPECT_THROW(tok->encode("ab\xff"), std::invalid_argument);
    EXPECT_THROW(tok->encode("\xc0\xaf"), std::invalid_argument);     // overlong '/'
    EXPECT_THROW(tok->encode("\xed\xa0\x80"), std::invalid_argument); // surrogate
    // Byte fallback: a character outside the tiny vocabulary becomes its UTF-8 bytes.
    const auto ids = tok->encode("\xc3\xa9");
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(tok->decode(ids), "\xc3\xa9");
    std::filesystem::remove_all(dir);
}

namespace {

/// The tiny models' SentencePiece vocabulary (tiny_model.cpp) with `tokens` for its pieces, as
/// tokenizer.ggml.* keys, and what each build of it says: "" when it builds, else the message.
std::pair<std::string, std::string> build_messages(const std::vector<std::string>& tokens) {
    std::vector<int32_t> types;
    for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string& t = tokens[i];
        const bool byte = t.size() == 6 && t.rfind("<0x", 0) == 0;
        types.push_back(i < 6 ? 3 : t == "\n" && i == 6 ? 4 : byte ? 6 : 1);
    }
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_float32_array("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f));
    w.set_int32_array("tokenizer.ggml.token_type", types);
    w.set_uint32("tokenizer.ggml.unknown_token_id", 3);
    const auto g = parse(w.to_bytes());
    auto message = [&](TokenizerBuild build) -> std::string {
        try {
            Tokenizer::from_gguf(*g, build);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "";
    };
    return {message(TokenizerBuild::Full), message(TokenizerBuild::VocabularyOnly)};
}

} // namespace

// SentencePiece refuses a vocabulary with a repeated piece; the vocabulary-only build (what a
// model file's description uses) refuses it too, with the full build's message.
TEST(Tokenizer, BothBuildsRefuseARepeatedPieceAlike) {
    const std::vector<std::string> vocab = tiny_vocab();
    const auto index = [&](const std::string& piece) {
        return std::find(vocab.begin(), vocab.end(), piece) - vocab.begin();
    };
    ASSERT_EQ(build_messages(vocab), std::make_pair(std::string(), std::string()));
    // A normal piece written twice: its last one made "the".
    auto repeated = vocab;
    ASSERT_NE(repeated.back(), "the");
    repeated.back() = "the";
    const auto [full, vocabulary_only] = build_messages(repeated);
    EXPECT_EQ(full, "tokenizer.ggml.tokens repeats the piece 'the' (ids " +
                        std::to_string(index("the")) + " and " + std::to_string(vocab.size() - 1) +
                        ")");
    EXPECT_EQ(vocabulary_only, full);
    // A control piece written twice ("<end_of_turn>" as "<start_of_turn>").
    auto control = vocab;
    control[5] = control[4];
    const auto [full_control, vocabulary_only_control] = build_messages(control);
    EXPECT_EQ(full_control,
              "tokenizer.ggml.tokens repeats the piece '<start_of_turn>' (ids 4 and 5)");
    EXPECT_EQ(vocabulary_only_control, full_control);
    // A control piece with the text of a normal one is no repeat to SentencePiece (it keeps the
    // two kinds apart): both builds take it.
    auto apart = vocab;
    apart[4] = "the";
    EXPECT_EQ(build_messages(apart), std::make_pair(std::string(), std::string()));
}

TEST(Utf8Streamer, HoldsBackIncompleteCharacters) {
    Utf8Streamer s;
    EXPECT_EQ(s.push("a\xe2"), "a");
    EXPECT_EQ(s.push("\x82"), "");
    EXPECT_EQ(s.push("\xac!"), "\xe2\x82\xac!");
    EXPECT_EQ(s.push("\xf0\x9f"), "");
    EXPECT_EQ(s.flush(), "\xef\xbf\xbd"); // an unfinished character at the end
}
