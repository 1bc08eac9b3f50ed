// The sources of an answer (answering/answer_sources.h): a section's passages against the
// sentences found here in its text by a regular expression (and under SEKV, against its spans),
// the shares and the top sources by hand, and a project answer that keeps its sources with its
// message, each an excerpt of its document's text.
#include "answering/answer_sources.h"
#include "answering/context_assembly.h"
#include "answering/project_answer.h"
#include "answering/state_cache.h"
#include "engine/sekv/segmentation.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

class AnswerSources : public ::testing::Test {
protected:
    void SetUp() override {
        config_.n_ctx = 2048;
        config_.sliding_window = 16;
        config_.n_layer = 4;
        write_tiny_gemma3(dir_.file("a.gguf"), config_);
        model_ = Model::load(dir_.file("a.gguf"));
        chunking_.target_tokens = 48;
        chunking_.max_unit_tokens = 1500;
        chunking_.chat_format = ChatFormat::Completion;
    }
    /// The answering sessions' options under full: 2 threads, ubatches of 32.
    static SessionOptions full_options() {
        SessionOptions o;
        o.threads = 2;
        o.ubatch = 32;
        return o;
    }
    static void ingest_all(StateCache& cache, Session& scratch, const std::vector<int64_t>& ids) {
        for (const auto id : ids)
            cache.ingest(id, scratch);
    }
    TempDir dir_;
    TinyGemma3Config config_;
    std::unique_ptr<Model> model_;
    ChunkingOptions chunking_;
};

// Sentences (one wrapped over a line end), a paragraph without a stop, quotes and brackets, a
// list and two table rows (cells joined by tabs, as the DOCX and ODT loaders write them).
const std::string kText = "The harbour bell rang twice. Gulls circled over the\nmarket!\n"
                          "A list line without a stop\n\n"
                          "\"Is the lamp lit?\" asked the keeper. It was (of course.) Then "
                          "night fell…   The end.\n"
                          "Items we keep\n- rope\n- 12 lamps\n2) oil\n"
                          "Name\tCount\nwicks\t40\n";

// The sentences of kText written out by a regular expression: up to a terminator and closing
// quotes or brackets followed by whitespace, a blank line, a line end before a list item, or
// the end of a line holding a tab. Other line ends are spaces.
std::vector<std::string> sentences(const std::string& t) {
    std::vector<std::string> out;
    const std::regex end(
        R"(([.!?]|…)["')\]]*\s|\n(?=[ \t]*(\n|$))|\n(?=- |\* |\d+\) )|\t[^\n]*\n)");
    size_t from = 0;
    for (std::sregex_iterator it(t.begin(), t.end(), end), e; it != e; ++it) {
        const size_t to = static_cast<size_t>(it->position()) + it->length();
        std::string s = t.substr(from, to - from);
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
            s.pop_back();
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
            s.erase(s.begin());
        if (!s.empty())
            out.push_back(s);
        from = to;
    }
    if (from < t.size())
        out.push_back(t.substr(from));
    return out;
}

} // namespace

TEST_F(AnswerSources, ASectionsPassagesAreItsSentencesAfterItsHeader) {
    const auto units = build_document_units(model_->tokenizer(), "doc.txt", kText, chunking_);
    ASSERT_EQ(units.size(), 1u);
    std::vector<SourcePassage> passages;
    append_section_passages(units[0], kText, nullptr, 7, 100, passages);
    std::vector<std::string> got;
    for (const auto& p : passages) {
        EXPECT_EQ(p.document_id, 7);
        got.push_back(kText.substr(static_cast<size_t>(p.char_begin),
                                   static_cast<size_t>(p.char_end - p.char_begin)));
    }
    EXPECT_EQ(got, sentences(kText));
    // Positions: after the header (BOS and "Document: doc.txt"), contiguous, inside the section.
    const auto& ch = units[0].chunks;
    int32_t first_text = 0;
    while (ch[0].token_chars[static_cast<size_t>(first_text)] < 0)
        ++first_text;
    ASSERT_FALSE(passages.empty());
    EXPECT_EQ(passages.front().pos_begin, 100 + first_text);
    for (size_t i = 1; i < passages.size(); ++i)
        EXPECT_EQ(passages[i].pos_begin, passages[i - 1].pos_end);
    EXPECT_LE(passages.back().pos_end, 100 + units[0].n_tokens());
}

TEST_F(AnswerSources, ALongSentenceIsCutAfterTheMostTokensAPassageHolds) {
    std::string text;
    for (int i = 0; i < 200; ++i)
        text += "word ";
    text += "end.";
    const auto units = build_document_units(model_->tokenizer(), "long.txt", text, chunking_);
    std::vector<SourcePassage> passages;
    for (const auto& u : units)
        append_section_passages(u, text, nullptr, 1, 0, passages);
    ASSERT_GT(passages.size(), 1u);
    for (const auto& p : passages)
        EXPECT_LE(p.pos_end - p.pos_begin, kMaxPassageTokens);
}

// Under SEKV: one passage per span, from the end of the span before it; the tokens after the
// last span one more.
TEST_F(AnswerSources, UnderSekvEachSpanIsAPassage) {
    const auto units = build_document_units(model_->tokenizer(), "doc.txt", kText, chunking_);
    const int64_t n = units[0].n_tokens();
    std::vector<int64_t> chars; // every token's first byte, in position order
    for (const auto& ch : units[0].chunks)
        chars.insert(chars.end(), ch.token_chars.begin(), ch.token_chars.end());
    ASSERT_EQ(std::ssize(chars), n);
    int32_t t = 0; // the first token of the text (after the header)
    while (chars[static_cast<size_t>(t)] < 0)
        ++t;
    ASSERT_GT(n, t + 40);
    Segmentation seg;
    seg.spans = {{t + 12, t + 20}, {t + 24, t + 30}, {t + 30, t + 37}};
    std::vector<SourcePassage> passages;
    append_section_passages(units[0], kText, &seg, 3, 0, passages);
    ASSERT_EQ(passages.size(), 4u);
    EXPECT_EQ(passages[0].pos_begin, t);
    EXPECT_EQ(passages[0].pos_end, t + 20);
    EXPECT_EQ(passages[1].pos_begin, t + 20);
    EXPECT_EQ(passages[1].pos_end, t + 30);
    EXPECT_EQ(passages[2].pos_begin, t + 30);
    EXPECT_EQ(passages[2].pos_end, t + 37);
    EXPECT_EQ(passages[3].pos_begin, t + 37);
    // Each passage's bytes: its tokens' (from its first token's start, a leading space left out,
    // to the next token's start, trailing whitespace left out), widened only over letters and
    // digits where a cut falls inside a word.
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    for (const auto& p : passages) {
        int64_t b = chars[static_cast<size_t>(p.pos_begin)];
        b += kText[static_cast<size_t>(b)] == ' ';
        int64_t e = p.pos_end < n && chars[static_cast<size_t>(p.pos_end)] >= 0
                        ? chars[static_cast<size_t>(p.pos_end)]
                        : static_cast<int64_t>(kText.size());
        while (e > b && std::isspace(static_cast<unsigned char>(kText[static_cast<size_t>(e - 1)])))
            --e;
        EXPECT_LE(p.char_begin, b);
        EXPECT_GE(p.char_end, e);
        for (int64_t c = p.char_begin; c < b; ++c)
            EXPECT_TRUE(word(kText[static_cast<size_t>(c)])) << "widened over '" << kText[c] << "'";
        for (int64_t c = e; c < p.char_end; ++c)
            EXPECT_TRUE(word(kText[static_cast<size_t>(c)])) << "widened over '" << kText[c] << "'";
    }
}

// A segmentation without spans (a section too short for the budget) gives the sentences, not
// one passage for the whole section.
TEST_F(AnswerSources, UnderSekvWithoutSpansTheSentencesArePassages) {
    const auto units = build_document_units(model_->tokenizer(), "doc.txt", kText, chunking_);
    std::vector<SourcePassage> with_none, sentences_only;
    const Segmentation none;
    append_section_passages(units[0], kText, &none, 3, 0, with_none);
    append_section_passages(units[0], kText, nullptr, 3, 0, sentences_only);
    ASSERT_EQ(with_none.size(), sentences(kText).size());
    for (size_t i = 0; i < with_none.size(); ++i) {
        EXPECT_EQ(with_none[i].char_begin, sentences_only[i].char_begin);
        EXPECT_EQ(with_none[i].pos_end, sentences_only[i].pos_end);
    }
}

// A span that ends inside a word (here inside "1874") gives both passages the whole word: the
// bytes widen to the word's ends, the positions stay apart.
TEST_F(AnswerSources, ACutInsideAWordWidensTheBytesToTheWord) {
    const std::string text = "The lighthouse was built in 1874 by masons.\n";
    const auto units = build_document_units(model_->tokenizer(), "w.txt", text, chunking_);
    std::vector<int64_t> chars;
    for (const auto& ch : units[0].chunks)
        chars.insert(chars.end(), ch.token_chars.begin(), ch.token_chars.end());
    // The token that starts at the "7" of 1874 (the tiny vocabulary has a token per byte there).
    const auto seven = static_cast<int64_t>(text.find("1874")) + 1;
    const auto at = std::find(chars.begin(), chars.end(), seven);
    ASSERT_NE(at, chars.end()) << "the premise: a token starts inside the number";
    const int64_t cut = at - chars.begin();
    Segmentation seg;
    seg.spans = {{cut - 6, cut}, {cut, cut + 5}};
    std::vector<SourcePassage> passages;
    append_section_passages(units[0], text, &seg, 1, 0, passages);
    ASSERT_GE(passages.size(), 2u);
    const auto word_end = static_cast<int64_t>(text.find(" by"));
    const auto word_begin = static_cast<int64_t>(text.find("1874"));
    EXPECT_EQ(passages[0].char_end, word_end) << "the first passage ends with the whole number";
    EXPECT_EQ(passages[1].char_begin, word_begin) << "the second begins with it";
    EXPECT_EQ(passages[0].pos_end, passages[1].pos_begin);
}

TEST(AnswerSourceShares, SharesSumTheTokensMassPerPassage) {
    const std::vector<std::vector<float>> mass{{1, 0, 3}, {0, 2, 2}};
    const auto s = passage_shares(mass, 3);
    EXPECT_DOUBLE_EQ(s[0], 1.0 / 8);
    EXPECT_DOUBLE_EQ(s[1], 2.0 / 8);
    EXPECT_DOUBLE_EQ(s[2], 5.0 / 8);
    EXPECT_EQ(passage_shares({{0, 0}}, 2), (std::vector<double>{0, 0}));
    EXPECT_THROW(passage_shares({{1, 2}}, 3), std::invalid_argument);

    const std::string text = "Alpha one.  Beta\ttwo.\nGamma three.";
    const std::vector<SourcePassage> passages{{1, 0, 3, 0, 10}, {1, 3, 6, 12, 21}, {2, 6, 9, 0, 5}};
    const std::string other = "Delta";
    const std::vector<SourceAnchor> map1{{0, 0, 0, 1}, {12, 12, 0, 1}, {22, 22, 0, 2}};
    const std::vector<SourceAnchor> map2{{0, 0, 4, 0}};
    const auto top = top_sources(
        passages, {0.25, 0.5, 0.25}, 2,
        [&](int64_t id) -> const std::string& { return id == 1 ? text : other; },
        [&](int64_t id) -> const std::vector<SourceAnchor>& { return id == 1 ? map1 : map2; });
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].excerpt, "Beta two.");
    EXPECT_EQ(top[0].line, 1);
    EXPECT_DOUBLE_EQ(top[0].share, 0.5);
    EXPECT_EQ(top[1].excerpt, "Alpha one."); // the tie goes to the earlier passage
    const auto zero = top_sources(
        passages, {0, 0, 1}, 5, [&](int64_t) -> const std::string& { return other; },
        [&](int64_t) -> const std::vector<SourceAnchor>& { return map2; });
    ASSERT_EQ(zero.size(), 1u);
    EXPECT_EQ(zero[0].page, 4);
    // Each token's own: token 0 looked at passage 2 only, token 1 mostly at passage 0.
    const auto per = token_sources(
        passages, {{0, 0, 2}, {3, 1, 0}}, 2,
        [&](int64_t id) -> const std::string& { return id == 1 ? text : other; },
        [&](int64_t id) -> const std::vector<SourceAnchor>& { return id == 1 ? map1 : map2; });
    ASSERT_EQ(per.size(), 2u);
    ASSERT_EQ(per[0].size(), 1u);
    EXPECT_EQ(per[0][0].excerpt, "Delta");
    EXPECT_DOUBLE_EQ(per[0][0].share, 1.0);
    ASSERT_EQ(per[1].size(), 2u);
    EXPECT_EQ(per[1][0].excerpt, "Alpha one.");
    EXPECT_DOUBLE_EQ(per[1][0].share, 0.75);
    EXPECT_DOUBLE_EQ(per[1][1].share, 0.25);
}

TEST(AnswerSourceText, ExcerptsPlacesAndCitations) {
    EXPECT_EQ(source_excerpt("  a \n\n b  ", 0, 10), "a b");
    EXPECT_EQ(source_excerpt("héllo wörld", 0, 11, 3), "h\xC3\xA9\xE2\x80\xA6");
    EXPECT_EQ(source_excerpt("héllo wörld", 0, 11, 2), "h\xE2\x80\xA6"); // not inside é
    EXPECT_EQ(source_place("a.pdf", "pdf", 3, 9), "a.pdf, page 3");
    EXPECT_EQ(source_place("a.docx", "docx", 0, 12), "a.docx, paragraph 12");
    EXPECT_EQ(source_place("a.txt", "text", 0, 40), "a.txt, line 40");
    EXPECT_EQ(source_place("a.epub", "epub", 0, 40), "a.epub");
    SourceRecord r;
    r.share = 0.424;
    r.excerpt = "text";
    EXPECT_EQ(source_citation(r, "a.txt, line 4"), "a.txt, line 4 (42%): text");
    r.share = 0.004;
    EXPECT_EQ(source_citation(r, "a"), "a (<1%): text");
}

// A project answer under full and under sekv: sources, top first, shares in (0, 1] summing to at
// most 1, each an excerpt of its document's text at its range, saved with the message.
TEST_F(AnswerSources, AProjectAnswerKeepsItsSourcesWithItsMessage) {
    auto p = Project::open(dir_.file("p.spanscope"), true);
    const auto a = p->add_document("/a.txt", text_document(sample_prose(5, 900)));
    const auto b = p->add_document("/b.txt", text_document(sample_prose(6, 700)));
    StateCache cache(*p, *model_, chunking_);
    const SessionOptions full = full_options();
    Session scratch(*model_, full);
    ingest_all(cache, scratch, {a, b});
    for (const char* policy : {"full", "sekv"}) {
        SCOPED_TRACE(policy);
        SessionOptions so = full;
        so.global_policy = policy;
        so.sekv.budget = 0;
        ProjectQuestion q;
        q.question = "What happened at the harbour?";
        q.max_tokens = 8;
        const auto ans = ask_project(*p, *model_, cache, scratch, so, q);
        ASSERT_FALSE(ans.answer.tokens.empty());
        ASSERT_FALSE(ans.sources.empty());
        EXPECT_LE(ans.sources.size(), kAnswerSources);
        double sum = 0;
        for (size_t i = 0; i < ans.sources.size(); ++i) {
            const auto& s = ans.sources[i];
            EXPECT_GT(s.share, 0);
            if (i > 0) {
                EXPECT_LE(s.share, ans.sources[i - 1].share);
            }
            sum += s.share;
            const auto text = p->document_text(s.document_id);
            ASSERT_LT(s.start_char, s.end_char);
            ASSERT_LE(s.end_char, static_cast<int64_t>(text.size()));
            EXPECT_EQ(source_excerpt(text, s.start_char, s.end_char), s.excerpt);
        }
        EXPECT_LE(sum, 1.0 + 1e-9);
        // Each token's own, at most kTokenSources, their shares of that token's attention.
        // Only where a word can be selected: answers with a zoom trace (sekv).
        ASSERT_EQ(ans.token_sources.size(),
                  std::string(policy) == "sekv" ? ans.answer.tokens.size() : size_t{0});
        for (const auto& t : ans.token_sources) {
            EXPECT_LE(t.size(), kTokenSources);
            double token_sum = 0;
            for (const auto& s : t)
                token_sum += s.share;
            EXPECT_LE(token_sum, 1.0 + 1e-9);
            for (const auto& s : t)
                EXPECT_LE(s.excerpt.size(), 120u + 3); // "…" is three bytes
        }
        const auto saved = p->messages(ans.chat_id).back();
        ASSERT_EQ(saved.token_sources.size(), ans.token_sources.size());
        for (size_t t = 0; t < saved.token_sources.size(); ++t) {
            ASSERT_EQ(saved.token_sources[t].size(), ans.token_sources[t].size());
            for (size_t i = 0; i < saved.token_sources[t].size(); ++i)
                EXPECT_EQ(saved.token_sources[t][i].start_char, ans.token_sources[t][i].start_char);
        }
        EXPECT_EQ(saved.id, ans.message_id);
        ASSERT_EQ(saved.sources.size(), ans.sources.size());
        for (size_t i = 0; i < saved.sources.size(); ++i) {
            EXPECT_EQ(saved.sources[i].start_char, ans.sources[i].start_char);
            EXPECT_EQ(saved.sources[i].excerpt, ans.sources[i].excerpt);
            EXPECT_DOUBLE_EQ(saved.sources[i].share, ans.sources[i].share);
        }
    }
}

namespace {
// Whitespace runs as one space, none at the ends (written here, not the excerpt's code).
std::string squeezed(const std::string& s) {
    std::string out;
    for (const char c : s) {
        const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
        if (space && (out.empty() || out.back() == ' '))
            continue;
        out += space ? ' ' : c;
    }
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}
} // namespace

// The passages of an assembled context of two documents hold, at their context positions, the
// tokens of their text: the tokens' bytes there spell the passage's bytes of its document
// (whitespace aside), but for the letters of a word a cut inside it widened the passage by.
TEST_F(AnswerSources, AssembledPassagesHoldTheirTextAtTheirPositions) {
    auto p = Project::open(dir_.file("ctx.spanscope"), true);
    const auto a = p->add_document("/a.txt", text_document(sample_prose(5, 700)));
    const auto b = p->add_document("/b.txt", text_document(sample_prose(6, 600)));
    StateCache cache(*p, *model_, chunking_);
    const SessionOptions full = full_options();
    Session scratch(*model_, full);
    ingest_all(cache, scratch, {a, b});
    const auto& tok = model_->tokenizer();
    for (const char* policy : {"full", "sekv"}) {
        SCOPED_TRACE(policy);
        SessionOptions so = full;
        so.global_policy = policy;
        so.sekv.budget = 0;
        Session session(*model_, so);
        ProjectQuestion q;
        q.question = "Where?";
        q.max_tokens = 4;
        std::vector<std::string> notes;
        const auto question = question_tokens(tok, ChatFormat::Completion, q.question);
        const auto ctx = assemble_context(*p, *model_, cache, scratch, session, {a, b}, question, q,
                                          {}, nullptr, notes);
        ASSERT_FALSE(ctx.passages.empty());
        ASSERT_EQ(ctx.starts.size(), 2u);
        std::set<int64_t> documents;
        for (const auto& ps : ctx.passages) {
            documents.insert(ps.document_id);
            // Its section: the one its positions are in, of its document.
            const size_t sec = ps.pos_begin >= ctx.starts[1] ? 1 : 0;
            EXPECT_EQ(ps.document_id, sec == 0 ? a : b);
            EXPECT_LE(ps.pos_end, sec == 0 ? ctx.starts[1] : ctx.offset);
            std::string spelled;
            for (int32_t pos = ps.pos_begin; pos < ps.pos_end; ++pos)
                spelled += tok.token_bytes(ctx.tokens[static_cast<size_t>(pos)]);
            const std::string text = p->document_text(ps.document_id);
            const std::string bytes =
                squeezed(text.substr(static_cast<size_t>(ps.char_begin),
                                     static_cast<size_t>(ps.char_end - ps.char_begin)));
            // Exactly, but for the letters a cut inside a word widened it by at either end.
            const std::string inner = squeezed(spelled);
            const size_t at = bytes.find(inner);
            ASSERT_NE(at, std::string::npos)
                << "positions " << ps.pos_begin << ": " << inner << " | " << bytes;
            for (size_t i = 0; i < bytes.size(); ++i)
                if (i < at || i >= at + inner.size()) {
                    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(bytes[i])))
                        << "positions " << ps.pos_begin << ": " << inner << " | " << bytes;
                }
        }
        EXPECT_EQ(documents, (std::set<int64_t>{a, b}));
    }
}
