// Chunking (engine/text/chunking.h): chunks cover the text in order, are cut at paragraph, then
// sentence, then word boundaries, stay near the target size, and map every text token back to
// its bytes; documents longer than a unit are split into sections with their own headers.
#include "engine/model/model.h"
#include "engine/text/chunking.h"
#include "engine/text/prompt.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

using namespace spanscope;
using namespace spanscope::test;

namespace {

class Chunking : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        TinyGemma3Config c;
        c.n_ctx = 4096;
        write_tiny_gemma3(dir_ + "/tiny.gguf", c);
        model_ = Model::load(dir_ + "/tiny.gguf");
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    const Tokenizer& tok() const { return model_->tokenizer(); }
    std::string dir_;
    std::unique_ptr<Model> model_;
};

// Paragraphs of sentences of words, with a fixed seed.
std::string prose(int paragraphs, int sentences, uint64_t seed) {
    static const char* words[] = {"the",   "cat",   "sat",  "on",     "a",
                                  "mat",   "while", "rain", "fell",   "over",
                                  "quiet", "hills", "and",  "rivers", "ran"};
    std::mt19937_64 rng(seed);
    std::string t;
    for (int p = 0; p < paragraphs; ++p) {
        for (int s = 0; s < sentences; ++s) {
            const int n = 4 + static_cast<int>(rng() % 8);
            for (int w = 0; w < n; ++w) {
                std::string word = words[rng() % std::size(words)];
                if (w == 0)
                    word[0] = static_cast<char>(word[0] - 32);
                t += word + (w + 1 < n ? " " : ". ");
            }
        }
        t.back() = '\n';
        t += "\n";
    }
    return t;
}

} // namespace

TEST_F(Chunking, ChunksCoverTheTextAtParagraphBoundaries) {
    const std::string text = prose(30, 3, 1);
    const auto chunks = split_into_chunks(tok(), text, 200);
    ASSERT_GT(chunks.size(), 3u);
    int64_t at = 0;
    for (const auto& [b, e] : chunks) {
        EXPECT_EQ(b, at);
        EXPECT_LT(b, e);
        at = e;
        // Every chunk but the last ends right after a blank line (paragraphs are short here).
        if (e != static_cast<int64_t>(text.size())) {
            EXPECT_EQ(text.substr(static_cast<size_t>(e) - 2, 2), "\n\n")
                << "chunk ending at " << e;
        }
        const auto n =
            tok().encode(text.substr(static_cast<size_t>(b), static_cast<size_t>(e - b))).size();
        EXPECT_LE(n, 200u + 5u) << "a chunk is about the target size";
    }
    EXPECT_EQ(at, static_cast<int64_t>(text.size()));
}

TEST_F(Chunking, LongParagraphsAreCutAtSentencesThenWords) {
    const std::string one_paragraph = prose(1, 40, 2);
    const auto chunks = split_into_chunks(tok(), one_paragraph, 100);
    ASSERT_GT(chunks.size(), 2u);
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
        const auto e = static_cast<size_t>(chunks[i].second);
        EXPECT_EQ(one_paragraph.substr(e - 2, 2), ". ") << "cut after a sentence";
    }
    // A single "sentence" with no stops: cut between words.
    std::string words;
    for (int i = 0; i < 200; ++i)
        words += "rain ";
    const auto w = split_into_chunks(tok(), words, 50);
    ASSERT_GT(w.size(), 2u);
    for (size_t i = 0; i + 1 < w.size(); ++i)
        EXPECT_EQ(words[static_cast<size_t>(w[i].second) - 1], ' ');
}

TEST_F(Chunking, TokenOffsetsPointAtTheTokensText) {
    const std::string text = "Caf\xc3\xa9 ol\xc3\xa9.\n\n" + prose(5, 2, 3);
    ChunkingOptions o;
    o.target_tokens = 64;
    o.max_unit_tokens = 100000;
    const auto units = build_document_units(tok(), "doc.txt", text, o);
    ASSERT_EQ(units.size(), 1u);
    const auto header = document_unit_header(tok(), ChatFormat::Completion, "doc.txt", 1, 1);
    const auto& first = units[0].chunks.front();
    ASSERT_GE(first.tokens.size(), header.size());
    EXPECT_TRUE(std::equal(header.begin(), header.end(), first.tokens.begin()));
    EXPECT_EQ(first.tokens[0], tok().bos());
    int64_t pos = 0, text_tokens = 0;
    for (const auto& c : units[0].chunks) {
        EXPECT_EQ(c.token_begin, pos);
        pos = c.token_end();
        ASSERT_EQ(c.tokens.size(), c.token_chars.size());
        for (size_t i = 0; i < c.tokens.size(); ++i) {
            if (c.token_chars[i] < 0)
                continue;
            ++text_tokens;
            const auto bytes = tok().token_bytes(c.tokens[i]);
            EXPECT_EQ(text.compare(static_cast<size_t>(c.token_chars[i]), bytes.size(), bytes), 0)
                << "token " << i << " at " << c.token_chars[i];
        }
    }
    EXPECT_GT(text_tokens, static_cast<int64_t>(text.size()) / 4);
    // Exactly one BOS per unit (tests/README.md, failure mode 17), even with "<bos>" in the text.
    const auto with_bos = build_document_units(tok(), "d", "<bos> text <bos>\n", o);
    int bos = 0;
    for (const auto& c : with_bos[0].chunks)
        for (const auto t : c.tokens)
            bos += t == tok().bos();
    EXPECT_EQ(bos, 1);
}

TEST_F(Chunking, DocumentsLongerThanAUnitBecomeSections) {
    // At least 100 000 tokens (the tiny vocabulary is byte-level: ~1 token per byte).
    const std::string text = prose(800, 4, 4);
    ChunkingOptions o;
    o.target_tokens = 256;
    o.max_unit_tokens = 3000;
    const auto units = build_document_units(tok(), "long.txt", text, o);
    int64_t total = 0, at = 0;
    for (const auto& u : units) {
        EXPECT_LE(u.n_tokens(), o.max_unit_tokens);
        EXPECT_EQ(u.chunks.front().token_begin, 0) << "each section has its own positions";
        EXPECT_EQ(u.chunks.front().tokens.front(), tok().bos());
        EXPECT_EQ(u.char_begin, at);
        at = u.char_end;
        total += u.n_tokens();
        const auto header = document_unit_header(tok(), ChatFormat::Completion, "long.txt",
                                                 u.index + 1, static_cast<int>(units.size()));
        EXPECT_TRUE(std::equal(header.begin(), header.end(), u.chunks.front().tokens.begin()))
            << "section " << u.index << " names its part";
    }
    EXPECT_EQ(at, static_cast<int64_t>(text.size()));
    EXPECT_GE(total, 100000);
    EXPECT_GT(units.size(), 30u);
}

TEST_F(Chunking, BadInputIsRefused) {
    ChunkingOptions o;
    o.max_unit_tokens = 1000;
    EXPECT_THROW(build_document_units(tok(), "d", " \n\t ", o), std::invalid_argument);
    EXPECT_THROW(build_document_units(tok(), "d", "ab\xff", o), std::invalid_argument);
    o.max_unit_tokens = 0;
    EXPECT_THROW(build_document_units(tok(), "d", "text", o), std::invalid_argument);
    EXPECT_THROW(split_into_chunks(tok(), "text", 0), std::invalid_argument);
    o.max_unit_tokens = 30;
    o.target_tokens = 200;
    EXPECT_THROW(build_document_units(tok(), "d", prose(3, 3, 5), o), std::invalid_argument)
        << "a chunk larger than a unit";
}
