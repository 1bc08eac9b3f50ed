// Fact probes for SEKV's zoom recordings (issue 8, lab/router/zoom_fact_probes.h): made-up facts
// inserted at line ends of the document in the evaluation's prompt form, then question turns
// asking for each, answered with its sentence; in both prompt styles; the refusals.
#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "lab/router/zoom_fact_probes.h"
#include "test_support.h"
#include "tiny_model_suite.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

using namespace spanscope;

namespace {

class ZoomFactProbesTest : public test::TinyGemma3Suite<::testing::TestWithParam<ChatFormat>> {
protected:
    static ZoomRecordSettings settings() {
        ZoomRecordSettings s;
        s.max_tokens = 1500;
        s.recall_probes = 4;
        s.probe_tokens = 80; // the tiny vocabulary spends about a token per byte
        s.probe_form = ZoomProbeForm::Fact;
        return s;
    }
};

// Prose in lines of five words (the tiny vocabulary spends a token per byte, so a line fits the
// 64 tokens searched for a line end).
std::string short_lines(uint32_t seed, size_t min_bytes) {
    std::string text = test::sample_prose(seed, min_bytes);
    int spaces = 0;
    for (char& c : text)
        if (c == ' ' && ++spaces % 5 == 0)
            c = '\n';
    return text;
}

std::vector<int32_t> slice(const std::vector<int32_t>& v, int64_t a, int64_t b) {
    return {v.begin() + a, v.begin() + b};
}

const std::regex
    kStatement(R"(Note: the ([a-z]+) number of ([A-Z][a-z]+ [A-Z][a-z]+) is ([0-9]{6})\.)");

} // namespace

TEST(ZoomFacts, DistinctKeysSixDigitValuesAndMatchingWording) {
    std::mt19937_64 rng(7);
    const auto facts = zoom_facts(rng, 40);
    ASSERT_EQ(facts.size(), 40u);
    std::set<std::string> keys;
    for (const auto& f : facts) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(f.statement, m, kStatement)) << f.statement;
        const std::string what = m[1].str() + " number of " + m[2].str();
        EXPECT_EQ(f.value, m[3].str());
        EXPECT_EQ(f.question, "What is the " + what + "?");
        EXPECT_EQ(f.answer, "The " + what + " is " + f.value + ".");
        EXPECT_TRUE(keys.insert(what).second) << "a key asked twice: " << what;
        // Not the evaluation's needle wording.
        EXPECT_EQ(f.statement.find("secret code"), std::string::npos);
    }
    std::mt19937_64 again(7), other(8);
    EXPECT_EQ(zoom_facts(again, 40)[5].statement, facts[5].statement);
    EXPECT_NE(zoom_facts(other, 40)[5].statement, facts[5].statement);
    EXPECT_THROW(zoom_facts(rng, -1), std::invalid_argument);
    EXPECT_THROW(zoom_facts(rng, 1 << 20), std::invalid_argument);
}

TEST_P(ZoomFactProbesTest, FactsAtLineEndsThenQuestionsAnsweredWithThem) {
    const ChatFormat it = GetParam();
    const auto s = settings();
    const std::string text = short_lines(3, 8000);
    const auto p = zoom_fact_probes(tok(), it, "notes.txt", text, s);
    ASSERT_LE(static_cast<int64_t>(p.tokens.size()), s.max_tokens);
    EXPECT_GT(static_cast<int64_t>(p.tokens.size()), s.max_tokens - 120);
    ASSERT_EQ(p.run_starts.size(), 4u);
    ASSERT_EQ(p.answer_starts.size(), 4u);

    const auto header = document_unit_header(tok(), it, "notes.txt", 1, 1);
    ASSERT_EQ(slice(p.tokens, 0, static_cast<int64_t>(header.size())), header);
    const int64_t h = static_cast<int64_t>(header.size());

    // Each answer is "The <kind> number of <person> is <value>." and the fact asked sits at
    // run_starts in the document as "Note: ... <value>.\n", after a line end.
    std::vector<std::pair<int64_t, int64_t>> inserted; // [begin, end) of each fact's tokens
    int64_t at = p.document_end;
    for (size_t i = 0; i < 4; ++i) {
        const int64_t a = p.answer_starts[i];
        const int64_t answer_end =
            i + 1 < 4 ? p.answer_starts[i + 1] : static_cast<int64_t>(p.tokens.size());
        // From the answer on (the next turn follows it).
        const std::string answer = tok().decode(slice(p.tokens, a, answer_end));
        std::smatch m;
        const std::regex answer_re(
            R"(^The ([a-z]+ number of [A-Z][a-z]+ [A-Z][a-z]+) is ([0-9]{6})\.)");
        ASSERT_TRUE(std::regex_search(answer, m, answer_re)) << answer;
        const std::string what = m[1].str(), value = m[2].str();
        const auto answer_tokens = tok().encode("The " + what + " is " + value + ".");
        ASSERT_EQ(slice(p.tokens, a, a + static_cast<int64_t>(answer_tokens.size())),
                  answer_tokens);
        // The question turn before it (after an answer: the turn's close and the question as
        // one piece of the rendered prompt).
        const std::string question = "What is the " + what + "?";
        const auto q = i == 0 ? question_tokens(tok(), it, question)
                              : follow_up_question_tokens(tok(), it, question);
        ASSERT_EQ(slice(p.tokens, at, at + static_cast<int64_t>(q.size())), q) << "question " << i;
        ASSERT_EQ(at + static_cast<int64_t>(q.size()), a);
        at = a + static_cast<int64_t>(answer_tokens.size());
        // The fact in the document.
        const auto fact = tok().encode("Note: the " + what + " is " + value + ".\n");
        const int64_t f = p.run_starts[i];
        ASSERT_GT(f, h);
        ASSERT_LE(f + static_cast<int64_t>(fact.size()), p.document_end);
        EXPECT_EQ(slice(p.tokens, f, f + static_cast<int64_t>(fact.size())), fact) << what;
        const std::string before = tok().decode(slice(p.tokens, f - 1, f));
        ASSERT_FALSE(before.empty());
        EXPECT_EQ(before.back(), '\n') << "a fact follows a line end";
        inserted.emplace_back(f, f + static_cast<int64_t>(fact.size()));
    }
    EXPECT_EQ(at, static_cast<int64_t>(p.tokens.size()));
    // Asked in a drawn order, not the text's.
    std::vector<int32_t> sorted = p.run_starts;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_NE(sorted, p.run_starts);

    // Without the facts, the unit is the header, the text's first tokens and the trailer.
    std::sort(inserted.begin(), inserted.end());
    std::vector<int32_t> kept;
    int64_t from = h;
    for (const auto& [b, e] : inserted) {
        kept.insert(kept.end(), p.tokens.begin() + from, p.tokens.begin() + b);
        from = e;
    }
    const auto body = tok().encode(text);
    int64_t n = 0;
    while (from + n < p.document_end &&
           p.tokens[static_cast<size_t>(from + n)] == body[static_cast<size_t>(kept.size()) + n])
        ++n;
    kept.insert(kept.end(), p.tokens.begin() + from, p.tokens.begin() + from + n);
    ASSERT_EQ(kept, slice(body, 0, static_cast<int64_t>(kept.size())));
    EXPECT_EQ(slice(p.tokens, from + n, p.document_end),
              document_unit_trailer(tok(), tok().decode(kept).back() == '\n'));
    // Facts spread over the text: one per quarter.
    for (size_t k = 0; k < inserted.size(); ++k) {
        const double depth =
            static_cast<double>(inserted[k].first - h) / static_cast<double>(p.document_end - h);
        EXPECT_GT(depth, k / 4.0) << k;
        EXPECT_LT(depth, (k + 1) / 4.0) << k;
    }

    // The same name gives the same probes; another name other facts.
    EXPECT_EQ(zoom_fact_probes(tok(), it, "notes.txt", text, s).tokens, p.tokens);
    const auto other = zoom_fact_probes(tok(), it, "other.txt", text, s);
    const auto other_header = document_unit_header(tok(), it, "other.txt", 1, 1);
    EXPECT_NE(slice(other.tokens, static_cast<int64_t>(other_header.size()), other.document_end),
              slice(p.tokens, h, p.document_end))
        << "another name draws other facts";
}

TEST_P(ZoomFactProbesTest, ATextWithoutLineEndsGetsItsFactsOnLinesOfTheirOwn) {
    std::string text;
    while (text.size() < 6000)
        text += "one long line of words without an end ";
    const auto p = zoom_fact_probes(tok(), GetParam(), "flat.txt", text, settings());
    ASSERT_EQ(p.run_starts.size(), 4u);
    for (const int32_t f : p.run_starts) {
        const std::string from = tok().decode(slice(p.tokens, f, f + 120));
        EXPECT_EQ(from.rfind("\nNote: the ", 0), 0u) << from;
    }
}

// The message of the std::invalid_argument `f` throws ("" when it throws none).
template <class F> std::string refusal(F f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

TEST_P(ZoomFactProbesTest, RefusesWhatCannotBeAsked) {
    const ChatFormat it = GetParam();
    auto s = settings();
    const std::string text = short_lines(3, 8000);
    auto probes = [&](const std::string& name, const std::string& t) {
        return refusal([&] { zoom_fact_probes(tok(), it, name, t, s); });
    };
    EXPECT_NE(probes("a", "few").find("too short for 4 facts"), std::string::npos);
    EXPECT_NE(probes("a", text + "\xff").find("document is not valid UTF-8"), std::string::npos);
    EXPECT_NE(probes("a\xff", text).find("name is not valid UTF-8"), std::string::npos);
    s.probe_form = ZoomProbeForm::Question;
    EXPECT_NE(probes("a", text).find("no fact probe"), std::string::npos);
    s = settings();
    s.recall_probes = 0;
    EXPECT_NE(probes("a", text).find("no fact probe"), std::string::npos);
    s = settings();
    s.recall_probes = -1;
    EXPECT_NE(probes("a", text).find("recall_probes"), std::string::npos);
    // An answer longer than probe_tokens.
    s = settings();
    s.probe_tokens = 8;
    EXPECT_NE(probes("a", text).find("more than probe_tokens = 8"), std::string::npos);
    // Facts, questions and answers that cannot fit 400 tokens however the text is cut.
    s = settings();
    s.max_tokens = 400;
    s.recall_probes = 3;
    s.probe_tokens = 64;
    const std::string fit = probes("a", text);
    EXPECT_TRUE(fit.find("too short for 3 facts") != std::string::npos ||
                fit.find("do not fit") != std::string::npos)
        << fit;
    // The settings' key tells the forms apart; the copy probes do not make fact probes.
    s = settings();
    EXPECT_NE(zoom_record_settings_key(s).find(" probe_form=fact"), std::string::npos);
    EXPECT_NE(refusal([&] { zoom_recall_probes(tok().encode(text), s); }).find("fact probes"),
              std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Styles, ZoomFactProbesTest,
                         ::testing::Values(ChatFormat::Completion, ChatFormat::Gemma),
                         [](const auto& info) {
                             return info.param == ChatFormat::Gemma ? "TurnFormat" : "Completion";
                         });
