// Question probes for SEKV's zoom recordings (issue 8, lab/router/zoom_question_probes.h): the
// document in the evaluation's prompt form, then question turns answered with runs of the
// document, in both prompt styles; the question's text; the refusals.
#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "engine/text/text_input.h"
#include "lab/router/zoom_question_probes.h"
#include "test_support.h"
#include "tiny_model_suite.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace spanscope;

namespace {

class ZoomQuestionProbesTest : public test::TinyGemma3Suite<::testing::TestWithParam<ChatFormat>> {
protected:
    static ZoomRecordSettings settings() {
        ZoomRecordSettings s;
        s.max_tokens = 600;
        s.recall_probes = 3;
        s.probe_tokens = 16;
        s.probe_form = ZoomProbeForm::Question;
        return s;
    }
};

std::vector<int32_t> slice(const std::vector<int32_t>& v, int64_t a, int64_t b) {
    return {v.begin() + a, v.begin() + b};
}

} // namespace

TEST(ZoomProbeQuestion, QuotesTheCueWithItsWhiteSpaceMadeSingleSpaces) {
    EXPECT_EQ(zoom_probe_question("  the\n\tquick   fox \n"),
              "Which words follow \"the quick fox\" in the document?");
    EXPECT_EQ(zoom_probe_question("a"), "Which words follow \"a\" in the document?");
}

TEST_P(ZoomQuestionProbesTest, TheDocumentsUnitThenQuestionsAnsweredWithItsRuns) {
    const ChatFormat it = GetParam();
    const auto s = settings();
    const std::string text = test::sample_prose(7, 6000);
    const auto p = zoom_question_probes(tok(), it, "notes.txt", text, s);
    ASSERT_LE(static_cast<int64_t>(p.tokens.size()), s.max_tokens);
    // Cut to fit, and not by more than a question turn's worth: the text is long enough.
    EXPECT_GT(static_cast<int64_t>(p.tokens.size()), s.max_tokens - 80);

    // The unit: the header, the text's first tokens, the trailer.
    const auto header = document_unit_header(tok(), it, "notes.txt", 1, 1);
    const auto body = tok().encode(text);
    ASSERT_EQ(slice(p.tokens, 0, static_cast<int64_t>(header.size())), header);
    const int64_t h = static_cast<int64_t>(header.size());
    int64_t n = 0; // the text's tokens kept
    while (h + n < p.document_end &&
           p.tokens[static_cast<size_t>(h + n)] == body[static_cast<size_t>(n)])
        ++n;
    ASSERT_GT(n, 0);
    const auto kept = slice(body, 0, n);
    const std::string kept_text = tok().decode(kept);
    EXPECT_EQ(slice(p.tokens, h + n, p.document_end),
              document_unit_trailer(tok(), kept_text.back() == '\n'));
    EXPECT_EQ(text.rfind(kept_text, 0), 0u) << "the kept text is the document's beginning";

    // Each question quotes the 12 tokens before its run; the answer is that run of the text,
    // the document's own tokens; between two, the end of the answer's turn.
    ASSERT_EQ(p.run_starts.size(), 3u);
    ASSERT_EQ(p.answer_starts.size(), 3u);
    // Gemma's follow-up turn as its prompts have always had it: <end_of_turn>\n<start_of_turn>
    // user\n, then the question encoded apart.
    std::vector<int32_t> close;
    if (it == ChatFormat::Gemma) {
        close = {tok().find("<end_of_turn>")};
        for (const int32_t id : tok().encode("\n"))
            close.push_back(id);
        close.push_back(tok().find("<start_of_turn>"));
        for (const int32_t id : tok().encode("user\n"))
            close.push_back(id);
    }
    int64_t at = p.document_end;
    for (size_t i = 0; i < 3; ++i) {
        const int64_t run = p.run_starts[i];
        ASSERT_GE(run - h, kZoomQuestionCueTokens);
        ASSERT_LE(run + s.probe_tokens, h + n);
        const std::string cue = tok().decode(slice(p.tokens, run - kZoomQuestionCueTokens, run));
        auto q = question_tokens(tok(), it, zoom_probe_question(cue));
        if (i > 0) {
            EXPECT_GT(run, p.run_starts[i - 1]);
            const auto follow = follow_up_question_tokens(tok(), it, zoom_probe_question(cue));
            if (it == ChatFormat::Gemma) {
                std::vector<int32_t> as_before = close;
                as_before.insert(as_before.end(), q.begin(), q.end());
                EXPECT_EQ(follow, as_before) << "Gemma's probes keep their tokens";
            } else {
                EXPECT_EQ(tok().decode(follow),
                          "\nQuestion: " + zoom_probe_question(cue) + "\nAnswer:");
            }
            q = follow;
        }
        ASSERT_EQ(slice(p.tokens, at, at + static_cast<int64_t>(q.size())), q) << "question " << i;
        at += static_cast<int64_t>(q.size());
        ASSERT_EQ(p.answer_starts[i], at);
        EXPECT_EQ(slice(p.tokens, at, at + s.probe_tokens),
                  slice(p.tokens, run, run + s.probe_tokens));
        at += s.probe_tokens;
    }
    EXPECT_EQ(at, static_cast<int64_t>(p.tokens.size()));
    // Evenly spaced depths: the gaps differ by at most a token, and the runs span the text.
    const int64_t g1 = p.run_starts[1] - p.run_starts[0], g2 = p.run_starts[2] - p.run_starts[1];
    EXPECT_LE(std::abs(g1 - g2), 1);
    EXPECT_LT(p.run_starts[0] - h, g1);
    EXPECT_GT(p.run_starts[2] + s.probe_tokens, h + n - g1);
}

TEST_P(ZoomQuestionProbesTest, CuesCutInsideACharacterStillMakeQuestions) {
    // The tiny vocabulary has no piece for these characters: they are byte tokens, so the cues'
    // ends fall inside characters; the questions keep the whole characters and are asked.
    std::string text;
    for (int i = 0; i < 400; ++i)
        text += "日本語 é ";
    const auto p = zoom_question_probes(tok(), GetParam(), "u.txt", text, settings());
    ASSERT_EQ(p.answer_starts.size(), 3u);
    ASSERT_EQ(p.run_starts.size(), 3u);
    // At least one raw cue (the 12 tokens before a run) is cut inside a character.
    int cut = 0;
    for (const int32_t run : p.run_starts)
        cut += !is_valid_utf8(tok().decode(slice(p.tokens, run - kZoomQuestionCueTokens, run)));
    EXPECT_GT(cut, 0);
    for (size_t i = 0; i < 3; ++i) {
        const int64_t begin = i == 0 ? p.document_end : p.answer_starts[i - 1] + 16;
        const std::string turn = tok().decode(slice(p.tokens, begin, p.answer_starts[i]));
        EXPECT_TRUE(is_valid_utf8(turn)) << i;
        EXPECT_NE(turn.find("Which words follow \""), std::string::npos) << turn;
    }
}

TEST_P(ZoomQuestionProbesTest, RefusesWhatCannotBeAsked) {
    const ChatFormat it = GetParam();
    auto s = settings();
    const std::string text = test::sample_prose(7, 6000);
    // Too short a text for three questions with 16-token answers.
    EXPECT_THROW(zoom_question_probes(tok(), it, "a", "just a few words here", s),
                 std::invalid_argument);
    // Invalid UTF-8, in the text or the name.
    EXPECT_THROW(zoom_question_probes(tok(), it, "a", text + "\xff", s), std::invalid_argument);
    EXPECT_THROW(zoom_question_probes(tok(), it, "a\xff", text, s), std::invalid_argument);
    // Settings without question probes, or out of range.
    s.probe_form = ZoomProbeForm::Copy;
    EXPECT_THROW(zoom_question_probes(tok(), it, "a", text, s), std::invalid_argument);
    s = settings();
    s.recall_probes = 0;
    EXPECT_THROW(zoom_question_probes(tok(), it, "a", text, s), std::invalid_argument);
    s = settings();
    s.probe_tokens = 4;
    EXPECT_THROW(zoom_question_probes(tok(), it, "a", text, s), std::invalid_argument);
    // The copy probes do not make question probes; the settings' key tells the forms apart.
    s = settings();
    EXPECT_THROW(zoom_recall_probes(tok().encode(text), s), std::invalid_argument);
    EXPECT_NE(zoom_record_settings_key(s).find(" probe_form=question"), std::string::npos);
    s.probe_form = ZoomProbeForm::Copy;
    EXPECT_EQ(zoom_record_settings_key(s).find("probe_form"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Styles, ZoomQuestionProbesTest,
                         ::testing::Values(ChatFormat::Completion, ChatFormat::Gemma),
                         [](const auto& info) {
                             return info.param == ChatFormat::Gemma ? "TurnFormat" : "Completion";
                         });
