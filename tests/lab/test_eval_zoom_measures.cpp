// What `spanscope-lab eval` reads from a sekv answer's zoom trace (lab/evaluation/
// eval_zoom_measures.h) and where it finds the asked needle in the session
// (eval_needle_positions.h): the measures on a hand-built trace whose answers are worked out
// below by hand, and the needle's positions checked against the tokens the session holds there.
#include "engine/gguf/gguf_reader.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"
#include "lab/evaluation/eval_corpus.h"
#include "lab/evaluation/eval_needle_positions.h"
#include "lab/evaluation/eval_tasks.h"
#include "lab/evaluation/eval_zoom_measures.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <memory>

using namespace spanscope;
using namespace spanscope::eval;

namespace {

ZoomHead head(std::vector<int32_t> spans, std::vector<float> mass) {
    ZoomHead h;
    h.spans = std::move(spans);
    h.relevance.assign(h.spans.size(), 0.5f);
    h.mass = std::move(mass);
    return h;
}

// 8 spans; 2 answer tokens; SEKV layers 5 and 11; 2 query heads each.
//
//   token 0, layer 5:   head 0 spans {1, 3} mass {.30, .10};  head 1 {3, 4} {.20, .05}
//   token 0, layer 11:  head 0 nothing;                       head 1 {6} {.40}
//   token 1, layer 5:   head 0 {1} {.25};                     head 1 {1} {.15}
//   token 1, layer 11:  head 0 {2, 6, 7} {.05, .35, .01};     head 1 {6, 7} {.30, .02}
//
// Distinct spans per (token, layer): 3, 1, 1, 3 of 8, i.e. .375 .125 .125 .375: median .25.
// Mass per span: 0: 0, 1: .70, 2: .05, 3: .30, 4: .05, 5: 0, 6: 1.05, 7: .03, so the ranks are
// 6 → 1, 1 → 2, 3 → 3, 2 and 4 → 5 (tied: both count the other), 7 → 6, 0 and 5 → 8.
ZoomTrace hand_built_trace() {
    ZoomTrace t;
    t.n_spans = 8;
    ZoomStep s0;
    s0.layers = {{5, {head({1, 3}, {0.30f, 0.10f}), head({3, 4}, {0.20f, 0.05f})}},
                 {11, {head({}, {}), head({6}, {0.40f})}}};
    ZoomStep s1;
    s1.layers = {{5, {head({1}, {0.25f}), head({1}, {0.15f})}},
                 {11, {head({2, 6, 7}, {0.05f, 0.35f, 0.01f}), head({6, 7}, {0.30f, 0.02f})}}};
    t.steps = {s0, s1};
    return t;
}

// Span i holds positions [10 + 10 i, 18 + 10 i): 8 tokens, then two full-resolution rows.
std::vector<TokenSpan> hand_built_spans() {
    std::vector<TokenSpan> spans;
    for (int64_t i = 0; i < 8; ++i)
        spans.push_back({10 + 10 * i, 18 + 10 * i});
    return spans;
}

} // namespace

TEST(EvalZoomMeasures, ExpandedShareIsTheMedianOverTokensAndLayersOfTheHeadsUnion) {
    const auto t = hand_built_trace();
    ASSERT_TRUE(expanded_share_median(t).has_value());
    EXPECT_DOUBLE_EQ(*expanded_share_median(t), 0.25);
    // An odd count: the first token alone gives .375 and .125, the median of those and the
    // second token's layer 5 (.125) is .125.
    auto odd = t;
    odd.steps[1].layers.pop_back();
    EXPECT_DOUBLE_EQ(*expanded_share_median(odd), 0.125);
    // Every head of every layer expanding every span: 1.
    ZoomTrace all;
    all.n_spans = 3;
    all.steps.resize(2);
    for (auto& s : all.steps)
        s.layers = {{5, {head({0, 1, 2}, {}), head({1}, {})}}};
    EXPECT_DOUBLE_EQ(*expanded_share_median(all), 1.0);
    // Undefined without spans or without steps.
    ZoomTrace no_spans = t;
    no_spans.n_spans = 0;
    EXPECT_FALSE(expanded_share_median(no_spans).has_value());
    ZoomTrace no_steps;
    no_steps.n_spans = 8;
    EXPECT_FALSE(expanded_share_median(no_steps).has_value());
    // A span id outside the context is refused.
    auto bad = t;
    bad.steps[0].layers[0].heads[0].spans[1] = 8;
    EXPECT_THROW(expanded_share_median(bad), std::invalid_argument);
}

TEST(EvalZoomMeasures, SpanMassIsSummedOverTokensLayersAndHeads) {
    const auto m = span_mass_totals(hand_built_trace());
    const std::vector<double> want{0, 0.70, 0.05, 0.30, 0.05, 0, 1.05, 0.03};
    ASSERT_EQ(m.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(m[i], want[i], 1e-6) << "span " << i;
    // Nothing measured (the GPU backend keeps no mass): no totals.
    auto unmeasured = hand_built_trace();
    for (auto& s : unmeasured.steps)
        for (auto& l : s.layers)
            for (auto& h : l.heads)
                h.mass.clear();
    EXPECT_TRUE(span_mass_totals(unmeasured).empty());
    auto ragged = hand_built_trace();
    ragged.steps[0].layers[0].heads[0].mass.pop_back();
    EXPECT_THROW(span_mass_totals(ragged), std::invalid_argument);
}

TEST(EvalZoomMeasures, NeedleMassRanksTheBestSpanOverlappingTheNeedle) {
    const auto t = hand_built_trace();
    const auto spans = hand_built_spans();
    // [36, 43): 36, 37 in span 2, 38, 39 full resolution, 40–42 in span 3. Span 3 ranks 3rd.
    auto m = needle_mass(t, spans, {36, 43});
    EXPECT_EQ(m.tokens, 7);
    EXPECT_EQ(m.in_spans, 5);
    ASSERT_TRUE(m.rank.has_value());
    EXPECT_EQ(*m.rank, 3);
    EXPECT_EQ(m.top3, std::optional<bool>(true));
    EXPECT_EQ(to_json(m),
              nlohmann::json::parse(R"({"tokens": 7, "in_spans": 5, "rank": 3, "top3": true})"));
    // [48, 52): 48, 49 full resolution, 50, 51 in span 4, tied with span 2: rank 5.
    m = needle_mass(t, spans, {48, 52});
    EXPECT_EQ(m.in_spans, 2);
    EXPECT_EQ(m.rank, std::optional<int64_t>(5));
    EXPECT_EQ(m.top3, std::optional<bool>(false));
    // A span never expanded ranks last (ties with the other one never expanded count).
    m = needle_mass(t, spans, {12, 14});
    EXPECT_EQ(m.rank, std::optional<int64_t>(8));
    EXPECT_EQ(m.top3, std::optional<bool>(false));
    // The needle over every span: the first.
    EXPECT_EQ(needle_mass(t, spans, {0, 100}).rank, std::optional<int64_t>(1));
    EXPECT_EQ(needle_mass(t, spans, {0, 100}).in_spans, 64);
    // [88, 90): all full resolution, exact: no rank, top3 undefined.
    m = needle_mass(t, spans, {88, 90});
    EXPECT_EQ(m.tokens, 2);
    EXPECT_EQ(m.in_spans, 0);
    EXPECT_FALSE(m.rank.has_value());
    EXPECT_FALSE(m.top3.has_value());
    EXPECT_EQ(to_json(m),
              nlohmann::json::parse(R"({"tokens": 2, "in_spans": 0, "rank": null, "top3": null})"));
    // No mass measured: in spans, but rank and top3 unknown (not counted as a miss).
    auto unmeasured = t;
    for (auto& s : unmeasured.steps)
        for (auto& l : s.layers)
            for (auto& h : l.heads)
                h.mass.clear();
    m = needle_mass(unmeasured, spans, {36, 43});
    EXPECT_EQ(m.in_spans, 5);
    EXPECT_FALSE(m.rank.has_value());
    EXPECT_FALSE(m.top3.has_value());
    // A trace of another context is refused.
    auto fewer = spans;
    fewer.pop_back();
    EXPECT_THROW(needle_mass(t, fewer, {36, 43}), std::invalid_argument);
}

TEST(EvalZoomMeasures, ResultLineGetsTheMeasuresThatAreDefined) {
    nlohmann::json line = nlohmann::json::object();
    put_zoom_measures(line, hand_built_trace(), hand_built_spans(), TokenSpan{36, 43});
    EXPECT_DOUBLE_EQ(line["expanded_share_median"].get<double>(), 0.25);
    EXPECT_EQ(line["needle_mass"]["rank"], 3);
    nlohmann::json other = nlohmann::json::object();
    ZoomTrace empty;
    put_zoom_measures(other, empty, {}, std::nullopt);
    EXPECT_EQ(other, nlohmann::json::object());
}

namespace {

// The tokens a session holds at [begin, end) after prefilling `units` one after another.
std::string held_text(const Tokenizer& tok, const std::vector<DocumentUnit>& units,
                      const TokenSpan& range) {
    std::vector<int32_t> ids;
    for (const auto& u : units)
        for (const auto& c : u.chunks)
            ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    std::string out;
    for (int64_t p = range.begin; p < range.end; ++p)
        out += tok.token_bytes(ids.at(static_cast<size_t>(p)));
    return out;
}

// For every needle variant on both haystacks: the positions of the asked needle hold its
// statement and no token more (the first and the last token each hold part of it), and they are
// where the needle's placement put it, the context's offset behind the unit's header. Returns
// the largest distance between the two, in tokens.
int64_t check_needle_positions(const Tokenizer& tok, const Corpus& corpus, ChatFormat format,
                               int64_t length) {
    ChunkingOptions co;
    co.chat_format = format;
    co.max_unit_tokens = INT64_MAX / 4; // as spanscope-lab eval: one unit
    const auto header = document_unit_header(tok, format, "notes.txt", 1, 1);
    int64_t worst = 0;
    for (const std::string haystack : {"prose", "noise"})
        for (int64_t index = 0; index < 5; ++index) {
            const auto s = make_sample(tok, {"niah", haystack, length, 0.4, 3, index}, corpus);
            SCOPED_TRACE(s.meta["variant"].get<std::string>() + " on " + haystack);
            const auto units = build_document_units(tok, "notes.txt", s.context, co);
            const auto bytes = asked_needle_bytes(s);
            EXPECT_TRUE(bytes.has_value());
            if (!bytes)
                continue;
            const size_t asked = s.meta.contains("asked") ? s.meta["asked"][0].get<size_t>() : 0;
            const std::string needle = s.meta["needles"][asked];
            EXPECT_EQ(s.context.substr(static_cast<size_t>(bytes->begin),
                                       static_cast<size_t>(bytes->end - bytes->begin)),
                      needle);
            const auto range = text_positions(units, *bytes);
            EXPECT_LT(range.begin, range.end);
            if (range.begin >= range.end)
                continue;
            const std::string held = held_text(tok, units, range);
            EXPECT_NE(held.find(needle), std::string::npos) << held;
            EXPECT_EQ(held_text(tok, units, {range.begin + 1, range.end}).find(needle),
                      std::string::npos);
            EXPECT_EQ(held_text(tok, units, {range.begin, range.end - 1}).find(needle),
                      std::string::npos);
            const int64_t placed = static_cast<int64_t>(header.size()) +
                                   s.meta["needle_offsets"][asked].get<int64_t>();
            worst = std::max(worst, std::abs(range.begin - placed));
        }
    return worst;
}

class EvalNeedlePositions : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = test::temp_dir();
        test::write_tiny_gemma3(dir_ + "/tiny.gguf", test::TinyGemma3Config{});
        gguf_ = GgufFile::open(dir_ + "/tiny.gguf");
        tok_ = Tokenizer::from_gguf(*gguf_);
        try {
            corpus_ =
                std::make_unique<Corpus>(load_corpus(test::data_dir() + "/qa/questions.json"));
        } catch (const std::runtime_error& e) {
            GTEST_SKIP() << "no prose haystack: " << e.what();
        }
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string dir_;
    std::unique_ptr<GgufFile> gguf_;
    std::unique_ptr<Tokenizer> tok_;
    std::unique_ptr<Corpus> corpus_;
};

} // namespace

TEST_F(EvalNeedlePositions, TheAskedNeedleIsWhereThePlacementPutItBehindTheHeader) {
    // The tiny tokenizer counts block by block exactly (eval_tasks' tests): the positions are
    // the header's length plus the recorded offset, in both prompt formats.
    EXPECT_EQ(check_needle_positions(*tok_, *corpus_, ChatFormat::Completion, 1200), 0);
    EXPECT_EQ(check_needle_positions(*tok_, *corpus_, ChatFormat::Gemma, 1200), 0);
    // Not a needle task: nothing to find.
    EXPECT_FALSE(asked_needle_bytes(make_sample(*tok_, {"vt", "prose", 600, 0.5, 1, 0}, *corpus_))
                     .has_value());
    // Bytes no token holds.
    const auto units = build_document_units(*tok_, "d", "some text\n", ChunkingOptions{64, 1000});
    EXPECT_THROW(text_positions(units, {500, 510}), std::invalid_argument);
    // The header's tokens are before the text: its first byte is at the header's length.
    const auto header = document_unit_header(*tok_, ChatFormat::Completion, "d", 1, 1);
    EXPECT_EQ(text_positions(units, {0, 1}).begin, static_cast<int64_t>(header.size()));
}

// Gemma 3's own tokenizer (skipped without the model) counts block by block within about 1 %
// (eval_tasks' tests; on the noise haystack header + needle_offsets falls one token before the
// needle at 4K): the positions follow the tokens, so they still hold the needle exactly.
TEST_F(EvalNeedlePositions, RealTokenizerHoldsTheNeedleAtItsPositions) {
    const auto path = test::real_model_path();
    if (!path)
        GTEST_SKIP() << "the default model is not installed (bash scripts/setup.sh model)";
    const auto gguf = GgufFile::open(*path);
    const auto tok = Tokenizer::from_gguf(*gguf);
    const int64_t off = check_needle_positions(*tok, *corpus_, ChatFormat::Completion, 4096);
    EXPECT_LE(off, 41) << "1 % of the context";
    std::cout << "largest distance from header + needle_offsets: " << off << " tokens\n";
}
