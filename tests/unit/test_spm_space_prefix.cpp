// SentencePiece vocabularies with a space prefix (tokenizer.ggml.add_space_prefix true or
// absent: Llama 2, Mistral 7B) against llama.cpp (tests/reference/fixtures/spm_space_prefix.json,
// made by tests/reference/make_spm_prefix_fixtures.py): one-shot encoding, decoding, and whole
// prompts built in parts (prompt.h, chunking.h), whose concatenated ids must be llama.cpp's ids
// of the rendered prompt. The vocabularies are Gemma 3's, real and whole, rebuilt here from the
// installed model file as the script rebuilt them for llama.cpp; llama.cpp's own Llama 2
// vocabulary runs too when $SPANSCOPE_LLAMA_SPM_VOCAB names it. A Mistral-7B-shaped tiny file
// with the prefix (tiny_mistral.gguf without the key, Llama-2-chat's template) runs end to end:
// loaded, its prompt built, prefilled, against llama.cpp's logits.
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/text/chat_format.h"
#include "engine/text/chunking.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "gguf_test_util.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

using namespace spanscope;
using namespace spanscope::test;

namespace {

const nlohmann::json& fixture() {
    static const nlohmann::json f = [] {
        std::ifstream in(data_dir() + "/reference/fixtures/spm_space_prefix.json");
        return nlohmann::json::parse(in);
    }();
    return f;
}

// Gemma 3's vocabulary changed as the script changes it (its docstring): "<s>" and "</s>"
// CONTROL, the space prefix set (or left out), for prefix_text_newlines the user-defined pieces
// NORMAL, and for prefix_markup <unused0..6> renamed.
std::unique_ptr<Tokenizer> vocabulary(const GgufFile& gemma, const std::string& variant) {
    const auto& meta = fixture()["meta"];
    auto tokens = gemma.get_string_array("tokenizer.ggml.tokens");
    std::vector<int32_t> types;
    for (const int64_t t : gemma.get_int_array("tokenizer.ggml.token_type"))
        types.push_back(static_cast<int32_t>(t));
    if (variant == "prefix_text_newlines")
        for (auto& t : types)
            t = t == 4 ? 1 : t; // USER_DEFINED -> NORMAL
    for (const int id : meta["made_control"])
        types.at(static_cast<size_t>(id)) = 3;
    if (variant == "prefix_markup")
        for (const auto& [id, text] : meta["markup_renames"].items())
            tokens.at(std::stoul(id)) = text.get<std::string>();
    std::vector<float> scores;
    for (const double s : gemma.get_float_array("tokenizer.ggml.scores"))
        scores.push_back(static_cast<float>(s));
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_float32_array("tokenizer.ggml.scores", scores);
    w.set_int32_array("tokenizer.ggml.token_type", types);
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"})
        w.set_uint32(key, static_cast<uint32_t>(gemma.get_uint(key)));
    w.set_bool("tokenizer.ggml.add_bos_token", gemma.get_bool("tokenizer.ggml.add_bos_token"));
    if (variant != "prefix_absent")
        w.set_bool("tokenizer.ggml.add_space_prefix", true);
    const auto g = parse(w.to_bytes());
    return Tokenizer::from_gguf(*g);
}

ChatFormat format_named(const std::string& name) {
    for (const auto f : {ChatFormat::Completion, ChatFormat::Gemma, ChatFormat::Llama3,
                         ChatFormat::ChatML, ChatFormat::Mistral})
        if (name == chat_format_name(f))
            return f;
    throw std::invalid_argument("no chat format " + name);
}

std::pair<std::string, std::string> document(const std::string& key) {
    const auto& d = fixture()["meta"]["docs"][key];
    return {d["name"].get<std::string>(), d["text"].get<std::string>()};
}

// A document's units as a project prefills them (one unit: the context is long enough).
std::vector<DocumentUnit> units_of(const Tokenizer& tok, ChatFormat f, const std::string& key,
                                   int64_t target_tokens) {
    const auto [name, text] = document(key);
    ChunkingOptions o;
    o.target_tokens = target_tokens;
    o.max_unit_tokens = 1 << 20;
    o.chat_format = f;
    return build_document_units(tok, name, text, o);
}

std::vector<int32_t> unit_tokens(const DocumentUnit& u) {
    std::vector<int32_t> out;
    for (const auto& c : u.chunks)
        out.insert(out.end(), c.tokens.begin(), c.tokens.end());
    return out;
}

struct Tally {
    int cases = 0, cases_ok = 0, prompts = 0, prompts_ok = 0;
};

// Every case, detokenisation and prompt of one vocabulary of the fixture.
Tally check_vocabulary(const Tokenizer& tok, const std::string& variant) {
    const auto& v = fixture()["vocabularies"][variant];
    Tally t;
    EXPECT_TRUE(tok.add_space_prefix()) << variant;
    EXPECT_EQ(tok.n_vocab(), v["n_vocab"].get<int>()) << variant;
    EXPECT_EQ(tok.bos(), v["bos"].get<int>()) << variant;
    for (const auto& c : v["cases"]) {
        const std::string name = c["name"], text = text_from_hex(c["utf8_hex"]);
        const auto want = c["ids"].get<std::vector<int32_t>>();
        const auto got = tok.encode(text, /*parse_special=*/true);
        EXPECT_EQ(got, want) << variant << " " << name << ": ours " << ids_text(got)
                             << ", llama.cpp " << ids_text(want);
        const auto want_plain = c.contains("ids_special_false")
                                    ? c["ids_special_false"].get<std::vector<int32_t>>()
                                    : want;
        const auto plain = tok.encode(text, /*parse_special=*/false);
        EXPECT_EQ(plain, want_plain) << variant << " " << name << " (special text as text)";
        t.cases += 2;
        t.cases_ok += (got == want) + (plain == want_plain);
    }
    for (const auto& c : v["with_bos"]) {
        std::vector<int32_t> got{tok.bos()};
        const auto body = tok.encode(text_from_hex(c["utf8_hex"]), true);
        got.insert(got.end(), body.begin(), body.end());
        EXPECT_EQ(got, c["ids"].get<std::vector<int32_t>>()) << variant << " with BOS";
    }
    for (const auto& d : v["detok"]) {
        const auto ids = d["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok.decode(ids, d["unparse_special"].get<bool>()), text_from_hex(d["hex"]))
            << variant << " decode " << ids_text(ids);
    }
    const auto target = fixture()["meta"]["chunk_target_tokens"].get<int64_t>();
    for (const auto& p : v["prompts"]) {
        const std::string name = p["name"];
        const ChatFormat f = format_named(p["format"]);
        const auto want = p["ids"].get<std::vector<int32_t>>();
        auto expect_same = [&](const std::vector<int32_t>& got, const std::string& how) {
            EXPECT_EQ(got, want) << variant << " " << name << " (" << how << "): ours "
                                 << ids_text(got) << "\nllama.cpp " << ids_text(want);
            ++t.prompts;
            t.prompts_ok += got == want;
        };
        if (p.contains("unit")) {
            const auto units = units_of(tok, f, p["unit"], 1 << 20);
            EXPECT_EQ(units.size(), 1u);
            expect_same(unit_tokens(units.at(0)), "build_document_units");
            continue;
        }
        std::vector<std::pair<std::string, std::string>> history;
        for (const auto& h : p["history"])
            history.emplace_back(h[0], h[1]);
        std::vector<PromptDocument> docs;
        for (const auto& d : p["docs"]) {
            const auto [doc_name, text] = document(d);
            docs.push_back({doc_name, text});
        }
        if (history.empty())
            expect_same(build_question_prompt(tok, f, docs, p["question"]).tokens,
                        "build_question_prompt");
        if (docs.size() != 1)
            continue;
        // The project's way: the document's unit in chunks, then the question part.
        const bool chunked = name.find("chunked") != std::string::npos;
        const auto units = units_of(tok, f, p["docs"][0], chunked ? target : 1 << 20);
        EXPECT_EQ(units.size(), 1u);
        if (chunked) {
            EXPECT_GE(units.at(0).chunks.size(), 3u) << variant << " " << name;
        }
        for (size_t i = 1; i < units.at(0).chunks.size(); ++i) {
            // Cut only at paragraphs: after a line end (the fixture's text is made so).
            const auto b = units.at(0).chunks[i].char_begin;
            EXPECT_EQ(docs[0].text.at(static_cast<size_t>(b - 1)), '\n') << name << " chunk " << i;
        }
        auto ids = unit_tokens(units.at(0));
        const auto q = question_tokens(tok, f, p["question"], history);
        ids.insert(ids.end(), q.begin(), q.end());
        expect_same(ids, chunked ? "chunks + question_tokens" : "unit + question_tokens");
    }
    return t;
}

class SpmSpacePrefix : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        const auto path = real_model_path();
        if (path)
            gemma_ = GgufFile::open(*path).release();
    }
    static void TearDownTestSuite() {
        delete gemma_;
        gemma_ = nullptr;
    }
    void SetUp() override {
        if (!gemma_)
            GTEST_SKIP() << "gemma-3-270m-q4_k_m.gguf is not installed (bash scripts/setup.sh "
                            "model): the vocabularies are built from its tokenizer";
    }
    static inline GgufFile* gemma_ = nullptr;
};

} // namespace

TEST_F(SpmSpacePrefix, TheModelFileIsTheOneTheFixtureWasMadeFrom) {
    // The pieces the vocabularies change, as the script asserted them.
    const auto tokens = gemma_->get_string_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), fixture()["vocabularies"]["prefix"]["n_vocab"].get<size_t>());
    EXPECT_EQ(tokens.at(203), "<s>");
    EXPECT_EQ(tokens.at(212), "</s>");
    for (const auto& [id, text] : fixture()["meta"]["markup_renames"].items())
        EXPECT_EQ(tokens.at(std::stoul(id)), "<unused" + std::to_string(std::stoi(id) - 6) + ">");
    EXPECT_FALSE(gemma_->get_bool("tokenizer.ggml.add_space_prefix"));
}

TEST_F(SpmSpacePrefix, OnGemmasVocabularyIdenticalToLlamaCpp) {
    for (const std::string variant :
         {"prefix", "prefix_absent", "prefix_text_newlines", "prefix_markup"}) {
        const auto tok = vocabulary(*gemma_, variant);
        const Tally t = check_vocabulary(*tok, variant);
        std::printf("[ fixture  ] %s: %d/%d case encodings and %d/%d prompts identical\n",
                    variant.c_str(), t.cases_ok, t.cases, t.prompts_ok, t.prompts);
    }
}

TEST_F(SpmSpacePrefix, GemmasOwnVocabularyHasNone) {
    const auto tok = Tokenizer::from_gguf(*gemma_);
    EXPECT_FALSE(tok->add_space_prefix());
    // The start of a text changes nothing without the prefix.
    EXPECT_EQ(tok->encode("Hello", false, TextStart::Fresh),
              tok->encode("Hello", false, TextStart::Continues));
    EXPECT_EQ(tok->decode(tok->encode(" Hello")), " Hello");
}

TEST_F(SpmSpacePrefix, TextThatContinuesGetsNoSpace) {
    const auto tok = vocabulary(*gemma_, "prefix");
    const auto fresh = tok->encode("Hello world");
    const auto cont = tok->encode("Hello world", false, TextStart::Continues);
    EXPECT_EQ(tok->decode(fresh), "Hello world"); // llama.cpp drops the prefix when decoding
    EXPECT_EQ(tok->token_bytes(fresh.at(0)), " Hello");
    EXPECT_EQ(tok->token_bytes(cont.at(0)), "Hello");
    // start_after: Fresh after nothing and after control or user-defined pieces.
    EXPECT_EQ(tok->start_after({}), TextStart::Fresh);
    EXPECT_EQ(tok->start_after({tok->bos()}), TextStart::Fresh);
    EXPECT_EQ(tok->start_after(tok->encode("\n\n")), TextStart::Fresh); // Gemma's "\n\n" piece
    EXPECT_EQ(tok->start_after(fresh), TextStart::Continues);
    EXPECT_THROW(tok->start_after({tok->n_vocab()}), std::out_of_range);
    // Text split where no piece spans the cut encodes as the whole.
    auto parts = tok->encode("Say it.");
    const auto rest = tok->encode(" Again and again.", false, tok->start_after(parts));
    parts.insert(parts.end(), rest.begin(), rest.end());
    EXPECT_EQ(parts, tok->encode("Say it. Again and again."));
}

// Each document token's offset is where its text starts in the document, the space prefix not
// counted. Checked against the document's bytes between one token's offset and the next's (the
// chunk's end after its last token): they are the token's bytes, or the token's bytes are a
// space and them, the prefix's space, which the tokenizer adds only where a text starts afresh
// (start_after: after nothing or a special piece, as llama.cpp's ids in the fixture hold it).
TEST_F(SpmSpacePrefix, ChunkOffsetsSkipThePrefixSpace) {
    const auto tok = vocabulary(*gemma_, "prefix");
    const auto [name, text] = document("manual");
    const auto units = units_of(*tok, ChatFormat::Completion, "manual",
                                fixture()["meta"]["chunk_target_tokens"].get<int64_t>());
    ASSERT_EQ(units.size(), 1u);
    std::vector<int32_t> before; // the token before, none at the unit's start
    int prefix_spaces = 0;
    for (size_t ci = 0; ci < units[0].chunks.size(); ++ci) {
        const auto& c = units[0].chunks[ci];
        std::vector<size_t> doc; // the chunk's document tokens (the header's and trailer's: -1)
        for (size_t i = 0; i < c.tokens.size(); ++i)
            if (c.token_chars[i] >= 0)
                doc.push_back(i);
        ASSERT_FALSE(doc.empty()) << "chunk " << ci;
        EXPECT_EQ(c.token_chars[doc.front()], c.char_begin) << "chunk " << ci;
        for (size_t i = 0; i < c.tokens.size(); ++i) {
            const auto k = std::find(doc.begin(), doc.end(), i);
            if (k != doc.end()) {
                const int64_t at = c.token_chars[i];
                const int64_t next = k + 1 != doc.end() ? c.token_chars[*(k + 1)] : c.char_end;
                ASSERT_LE(at, next) << "chunk " << ci << " token " << i;
                const std::string in_doc =
                    text.substr(static_cast<size_t>(at), static_cast<size_t>(next - at));
                const std::string bytes = tok->token_bytes(c.tokens[i]);
                const bool fresh = tok->start_after(before) == TextStart::Fresh;
                if (fresh && bytes == " " + in_doc)
                    ++prefix_spaces;
                else
                    EXPECT_EQ(bytes, in_doc) << "chunk " << ci << " token " << i << " at " << at
                                             << (fresh ? " (a fresh start)" : "");
            }
            before = {c.tokens[i]};
        }
    }
    // The case the test is about occurs: tokens with the prefix's space.
    EXPECT_GT(prefix_spaces, 0);
}

TEST(SpmSpacePrefixLlama2, IdenticalToLlamaCppOnLlama2sVocabulary) {
    const char* path = std::getenv("SPANSCOPE_LLAMA_SPM_VOCAB");
    const auto& v = fixture()["vocabularies"];
    if (!path || !v.contains("llama_spm"))
        GTEST_SKIP() << "set SPANSCOPE_LLAMA_SPM_VOCAB to llama.cpp's models/ggml-vocab-llama-"
                        "spm.gguf (tests/reference/README.md) to run llama.cpp's Llama 2 "
                        "vocabulary";
    const auto g = GgufFile::open(path);
    EXPECT_FALSE(g->has("tokenizer.ggml.add_space_prefix"));
    const auto tok = Tokenizer::from_gguf(*g);
    const Tally t = check_vocabulary(*tok, "llama_spm");
    std::printf("[ fixture  ] llama_spm: %d/%d case encodings and %d/%d prompts identical\n",
                t.cases_ok, t.cases, t.prompts_ok, t.prompts);
}

// tiny_mistral.gguf as the script changed it: tokenizer.ggml.add_space_prefix left out (true, as
// in Mistral 7B's files), BOS and EOS spelled "<s>" and "</s>", and Llama-2-chat's template. The
// file loads, the template chooses the Mistral format, the prompt is llama.cpp's ids, and the
// logits of every position are llama.cpp's within the tolerance of the Q8_0 tiny Mistral
// (test_llama_reference.cpp, LlamaTiny: < 5e-2 of the largest logit).
TEST(MistralShapedFile, RunsEndToEndLikeLlamaCpp) {
    const auto& t = fixture()["tiny_mistral"];
    const auto in = GgufFile::open(data_dir() + "/reference/fixtures/tiny_mistral.gguf");
    GgufWriter w;
    for (const auto& [key, value] : in->metadata())
        if (key != "tokenizer.ggml.add_space_prefix" && key != "tokenizer.ggml.tokens")
            w.set_value(key, value);
    auto tokens = in->get_string_array("tokenizer.ggml.tokens");
    for (const auto& [id, text] : t["renames"].items())
        tokens.at(std::stoul(id)) = text.get<std::string>();
    w.set_string_array("tokenizer.ggml.tokens", tokens);
    w.set_string("tokenizer.chat_template", t["chat_template"].get<std::string>());
    for (const auto& tensor : in->tensors())
        w.add_tensor(tensor.name, tensor.type, tensor.ne,
                     std::vector<uint8_t>(tensor.data, tensor.data + tensor.nbytes));
    const std::string path = temp_dir() + "/tiny_mistral_space_prefix.gguf";
    w.write(path);
    std::unique_ptr<Model> m;
    try {
        m = Model::load(path);
    } catch (const std::exception& e) {
        FAIL() << "Model::load refused a Mistral-shaped file: " << e.what();
    }
    std::filesystem::remove(path);
    const Tokenizer& tok = m->tokenizer();
    EXPECT_TRUE(tok.add_space_prefix());
    const ChatFormat f = chat_format_of(m->info(), tok);
    ASSERT_EQ(f, ChatFormat::Mistral);

    const auto want = t["ids"].get<std::vector<int32_t>>();
    const std::string name = t["doc"][0], text = t["doc"][1], question = t["question"];
    const auto prompt = build_question_prompt(tok, f, {{name, text}}, question);
    EXPECT_EQ(prompt.tokens, want)
        << "ours " << ids_text(prompt.tokens) << "\nllama.cpp " << ids_text(want);
    ChunkingOptions o;
    o.max_unit_tokens = m->info().n_ctx_train;
    o.chat_format = f;
    const auto units = build_document_units(tok, name, text, o);
    ASSERT_EQ(units.size(), 1u);
    auto parts = unit_tokens(units[0]);
    const auto q = question_tokens(tok, f, question);
    parts.insert(parts.end(), q.begin(), q.end());
    EXPECT_EQ(parts, want) << "unit + question_tokens";
    // A follow-up question after an answer (the zoom probes' turns): the rendered turn, its
    // control pieces parsed, as llama.cpp tokenises the whole prompt (the encode path the
    // fixture's cases hold to llama.cpp's ids): "[INST] " and the question in one piece.
    const auto& mk = chat_markup(f);
    const std::string turn = std::string(mk.assistant_close) + std::string(mk.user_open) +
                             "Answer the question using the documents above.\n" + question +
                             std::string(mk.user_close) + std::string(mk.assistant_open);
    const auto follow = follow_up_question_tokens(tok, f, question);
    EXPECT_EQ(follow, tok.encode(turn, /*parse_special=*/true, TextStart::Continues))
        << ids_text(follow);
    // The markup and the question encoded apart would tokenise "[INST] "'s space apart.
    std::vector<int32_t> apart =
        tok.encode(std::string(mk.assistant_close) + std::string(mk.user_open),
                   /*parse_special=*/true, TextStart::Continues);
    const auto q2 = question_tokens(tok, f, question);
    apart.insert(apart.end(), q2.begin(), q2.end());
    EXPECT_NE(follow, apart) << "the turn's markup + question_tokens tokenise the space apart";

    // llama.cpp's logits at the stored positions, [positions][n_vocab].
    const auto positions = t["positions"].get<std::vector<int64_t>>();
    const auto n = static_cast<int64_t>(positions.size());
    const int64_t V = m->info().n_vocab;
    ASSERT_EQ(t["logits_shape"][0].get<int64_t>(), n);
    ASSERT_EQ(t["logits_shape"][1].get<int64_t>(), V);
    ASSERT_EQ(positions.back() + 1, static_cast<int64_t>(want.size()));
    const auto bytes = base64_decode(t["logits_f32le_base64"].get<std::string>());
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), n * V * 4);
    std::vector<float> ref(static_cast<size_t>(n * V));
    std::memcpy(ref.data(), bytes.data(), bytes.size()); // x86: little-endian
    ThreadPool pool(2);
    for (const int64_t ub : {static_cast<int64_t>(want.size()), int64_t{1}}) {
        const auto all = prefill_logits(*m, want, ub, pool);
        std::vector<float> ours;
        for (const int64_t p : positions)
            ours.insert(ours.end(), all.begin() + p * V, all.begin() + (p + 1) * V);
        const auto [err, argmax_same] = compare_logits(ours, ref, n, V);
        std::printf("[ tiny     ] Mistral-shaped, %zu tokens, ubatch %lld: max |dlogit| / max "
                    "|logit| = %.3g at %lld positions (tolerance 5e-2), argmax %lld/%lld\n",
                    want.size(), static_cast<long long>(ub), err, static_cast<long long>(n),
                    static_cast<long long>(argmax_same), static_cast<long long>(n));
        EXPECT_LT(err, 5e-2f) << "ubatch " << ub;
        EXPECT_GE(argmax_same, n * 95 / 100) << "ubatch " << ub;
    }
}
