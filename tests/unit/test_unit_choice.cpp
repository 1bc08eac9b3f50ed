// Choosing the sections that answer a question when not all fit the context (issue 7): the
// rank fusion and take-what-fits rule of choose_units on hand-made candidates, the SEKV
// relevance formula against a hand computation, the question's queries, and ask_project over
// documents longer than a tiny model's context (the section holding the question's rare word
// is used, the user's document order is kept, SEKV summaries join the ranking once stored).
#include "answering/project_answer.h"
#include "answering/sekv_relevance.h"
#include "answering/state_cache.h"
#include "engine/text/prompt.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

UnitCandidate cand(int64_t doc, int unit, int64_t tokens, std::optional<double> bm25 = {},
                   std::optional<double> sekv = {}) {
    return {doc, unit, tokens, bm25, sekv};
}

std::vector<std::pair<int64_t, int>> ids(const UnitChoice& c) {
    std::vector<std::pair<int64_t, int>> out;
    for (const auto& u : c.chosen)
        out.emplace_back(u.document_id, u.unit);
    return out;
}

using Ids = std::vector<std::pair<int64_t, int>>;

} // namespace

TEST(ChooseUnits, EverythingThatFitsIsTakenUnrankedInCandidateOrder) {
    const std::vector<UnitCandidate> c{cand(3, 0, 10, -1.0), cand(1, 0, 10), cand(1, 1, 5)};
    const auto r = choose_units(c, 25);
    EXPECT_FALSE(r.ranked);
    EXPECT_EQ(r.left_out, 0);
    EXPECT_EQ(ids(r), (Ids{{3, 0}, {1, 0}, {1, 1}}));
    for (const auto& u : r.chosen)
        EXPECT_EQ(u.rank, 0);
    EXPECT_THROW(choose_units({cand(1, 0, -1)}, 10), std::invalid_argument);
}

TEST(ChooseUnits, TheBestByBm25ThatFitReturnInTheUsersDocumentOrder) {
    // The user put document 7 before document 2. Best bm25 (lowest): (2,1), then (7,0), (2,0).
    const std::vector<UnitCandidate> c{cand(7, 0, 10, -2.0), cand(7, 1, 10), cand(2, 0, 10, -0.5),
                                       cand(2, 1, 10, -3.0)};
    const auto r = choose_units(c, 20);
    EXPECT_TRUE(r.ranked);
    EXPECT_EQ(r.left_out, 2);
    EXPECT_EQ(ids(r), (Ids{{7, 0}, {2, 1}})) << "document 7 first, as the user ordered";
    EXPECT_EQ(r.chosen[0].rank, 2);
    EXPECT_EQ(r.chosen[1].rank, 1);
    EXPECT_DOUBLE_EQ(r.chosen[1].fused, 1.0 / 61);
    EXPECT_DOUBLE_EQ(r.chosen[0].fused, 1.0 / 62);
}

TEST(ChooseUnits, AUnitThatDoesNotFitIsPassedOverForTheNextThatDoes) {
    const std::vector<UnitCandidate> c{cand(1, 0, 8, -1.0), cand(1, 1, 15, -5.0),
                                       cand(1, 2, 4, -0.1), cand(1, 3, 4)};
    // Budget 14: (1,1) is best but does not fit; then (1,0) 8, then (1,2) 4; (1,3) would too
    // (16 > 14: no).
    const auto r = choose_units(c, 14);
    EXPECT_EQ(ids(r), (Ids{{1, 0}, {1, 2}}));
    EXPECT_EQ(r.left_out, 2);
}

TEST(ChooseUnits, WithoutAnyScoreTheFirstThatFitAreTaken) {
    const std::vector<UnitCandidate> c{cand(4, 0, 6), cand(4, 1, 6), cand(5, 0, 6)};
    const auto r = choose_units(c, 13);
    EXPECT_TRUE(r.ranked);
    EXPECT_EQ(ids(r), (Ids{{4, 0}, {4, 1}}));
    EXPECT_EQ(r.chosen[0].fused, 0.0);
}

TEST(ChooseUnits, Bm25AndSekvRankingsAreFusedByReciprocalRank) {
    // bm25 ranks: X 1, Y 2 (Z none); sekv ranks: Y 1, Z 2, X 3. Fused (k = 60):
    // X = 1/61 + 1/63, Y = 1/62 + 1/61, Z = 1/62. Y > X > Z.
    const std::vector<UnitCandidate> c{cand(1, 0, 10, -3.0, 0.1), cand(1, 1, 10, -2.0, 0.9),
                                       cand(1, 2, 10, std::nullopt, 0.8)};
    auto r = choose_units(c, 10);
    ASSERT_EQ(ids(r), (Ids{{1, 1}}));
    EXPECT_NEAR(r.chosen[0].fused, 1.0 / 62 + 1.0 / 61, 1e-15);
    EXPECT_EQ(r.chosen[0].rank, 1);
    r = choose_units(c, 20);
    EXPECT_EQ(ids(r), (Ids{{1, 0}, {1, 1}}));
    EXPECT_NEAR(r.chosen[0].fused, 1.0 / 61 + 1.0 / 63, 1e-15);
    // SEKV alone decides when no word matched.
    const std::vector<UnitCandidate> s{cand(1, 0, 10, std::nullopt, 0.2),
                                       cand(1, 1, 10, std::nullopt, 0.7)};
    EXPECT_EQ(ids(choose_units(s, 10)), (Ids{{1, 1}}));
}

// A section whose SEKV summaries are not stored yet (never prefilled under this model) is not
// outranked for it by every section that has them: its bm25 term stands in for the missing one.
TEST(ChooseUnits, ASectionWithoutSekvSummariesCountsItsBm25RankTwice) {
    // A matches the text less well than B but has summaries; B has none.
    // bm25 ranks: B 1, A 2; sekv: A 1. A = 1/62 + 1/61; B = 1/61 + 1/61 (a 0 would lose).
    std::vector<UnitCandidate> c{cand(1, 0, 10, -1.0, 0.9), cand(2, 0, 10, -3.0)};
    auto r = choose_units(c, 10);
    ASSERT_EQ(ids(r), (Ids{{2, 0}})) << "B, the better match by text";
    EXPECT_DOUBLE_EQ(r.chosen[0].fused, 2.0 / 61);
    // Once B's summaries are stored they count: sekv A 1 (0.9), B 2 (0.2).
    c[1].sekv = 0.2;
    r = choose_units(c, 10);
    ASSERT_EQ(ids(r), (Ids{{1, 0}})) << "a tie (1/61 + 1/62 each) goes to candidate order";
    EXPECT_NEAR(r.chosen[0].fused, 1.0 / 61 + 1.0 / 62, 1e-15);
    // Without any SEKV score the ranking is bm25's alone, one term each.
    c[0].sekv.reset();
    c[1].sekv.reset();
    r = choose_units(c, 10);
    EXPECT_DOUBLE_EQ(r.chosen[0].fused, 1.0 / 61);
}

// s = log Σ_S |S| exp(scale q·k̄_S) − log Σ_S |S|, mean over heads and tokens, written out here
// from the formula in sekv_relevance.h.
TEST(SekvRelevance, MatchesTheFormulaComputedByHand) {
    ModelInfo info;
    info.layers.resize(2);
    info.layers[1].attn = {2, 1, 4, 0.5f, 0};
    info.layers[1].rope = 10000.0;
    QuestionQueries q;
    q.n_tokens = 2;
    q.layers = {1};
    q.q = {{1, 0, 2, 0, /**/ 0, 1, 0, -1, /**/ 0.5f, 0.5f, 0, 0, /**/ -1, 0, 0, 3}};
    SekvUnitState st;
    st.n_tokens = 1; // queries move by n_tokens - 1 = 0: no rotation
    SekvLayerState l;
    l.layer = 1;
    SekvSpan a, b;
    a.size = 3;
    a.summary_k = {1, 1, 0, 0};
    b.size = 5;
    b.summary_k = {0, 0, 1, 2};
    l.spans = {a, b};
    st.layers = {l};
    double expect = 0;
    for (int t = 0; t < 2; ++t)
        for (int h = 0; h < 2; ++h) {
            const float* qv = q.q[0].data() + (t * 2 + h) * 4;
            double da = 0, db = 0;
            for (int e = 0; e < 4; ++e) {
                da += qv[e] * a.summary_k[static_cast<size_t>(e)];
                db += qv[e] * b.summary_k[static_cast<size_t>(e)];
            }
            expect += std::log(3 * std::exp(0.5 * da) + 5 * std::exp(0.5 * db)) - std::log(8.0);
        }
    expect /= 4;
    const auto got = sekv_relevance(q, st, info);
    ASSERT_TRUE(got.has_value());
    EXPECT_NEAR(*got, expect, 1e-9);
    // A key whose dot product with every query is larger scores higher (2, -2, 0, 6 become
    // 3, -0.5, 1.5, 6.5).
    auto closer = st;
    closer.layers[0].spans[1].summary_k = {1, 2, 1, 2.5f};
    EXPECT_GT(*sekv_relevance(q, closer, info), *got);
    // Nothing to score: no span, or not the question's layer.
    auto empty = st;
    empty.layers[0].spans.clear();
    EXPECT_FALSE(sekv_relevance(q, empty, info).has_value());
    auto other = st;
    other.layers[0].layer = 0;
    EXPECT_FALSE(sekv_relevance(q, other, info).has_value());
}

TEST(SekvRelevance, QuestionQueriesAreCausalAndShaped) {
    const auto dir = temp_dir();
    TinyGemma3Config cfg;
    write_tiny_gemma3(dir + "/m.gguf", cfg);
    const auto model = Model::load(dir + "/m.gguf");
    const auto& info = model->info();
    const auto layers = sekv_layers(info, SekvOptions{});
    ASSERT_FALSE(layers.empty());
    ThreadPool pool(1);
    const std::vector<int32_t> two = model->tokenizer().encode("river stone"),
                               one(two.begin(), two.begin() + 1);
    ASSERT_GE(two.size(), 2u);
    const auto q2 = question_queries(*model, two, layers, pool);
    const auto q1 = question_queries(*model, one, layers, pool);
    EXPECT_EQ(q2.n_tokens, std::ssize(two));
    for (size_t i = 0; i < layers.size(); ++i) {
        const auto& s = info.layers[static_cast<size_t>(layers[i])].attn;
        const size_t row = static_cast<size_t>(s.n_head * s.head_dim);
        ASSERT_EQ(q2.q[i].size(), two.size() * row);
        ASSERT_EQ(q1.q[i].size(), row);
        // The first question token's queries do not depend on what follows it.
        for (size_t e = 0; e < row; ++e)
            EXPECT_NEAR(q2.q[i][e], q1.q[i][e], 1e-5f) << "layer " << layers[i] << " element " << e;
    }
    int sliding = 0;
    while (!info.layers[static_cast<size_t>(sliding)].sliding())
        ++sliding;
    EXPECT_THROW(question_queries(*model, two, {sliding}, pool), std::invalid_argument);
    EXPECT_THROW(question_queries(*model, {}, layers, pool), std::invalid_argument);
    fs::remove_all(dir);
}

namespace {

class RankedAnswer : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        TinyGemma3Config c;
        c.n_ctx = 1024;
        c.sliding_window = 16;
        write_tiny_gemma3(dir_ + "/m.gguf", c);
        model_ = Model::load(dir_ + "/m.gguf");
        chunking_.target_tokens = 64;
        chunking_.max_unit_tokens = 256;
        full_.threads = 2;
        full_.ubatch = 64;
        sekv_ = full_;
        sekv_.global_policy = "sekv";
        sekv_.sekv.budget = 0;
    }
    void TearDown() override { fs::remove_all(dir_); }

    ProjectAnswer ask(Project& p, const std::vector<int64_t>& docs, const SessionOptions& so,
                      int64_t chat = 0, const ProjectAskHooks& hooks = {}) {
        StateCache cache(p, *model_, chunking_);
        Session scratch(*model_, full_);
        ProjectQuestion q;
        q.question = question_;
        q.document_ids = docs;
        q.chat_id = chat;
        q.max_tokens = 4;
        q.sampling.temperature = 0;
        return ask_project(p, *model_, cache, scratch, so, q, hooks);
    }

    /// Two documents, the second holding the question's rare word once: [first, second].
    static std::vector<int64_t> two_documents(Project& p) {
        const std::string rare = "Zeppelin, zeppelin: a silver zeppelin drifts.\n\n";
        const auto d1 = p.add_document("/one.txt", text_document(sample_prose(11, 2500)));
        const auto d2 = p.add_document(
            "/two.txt", text_document(sample_prose(21, 1500) + rare + sample_prose(22, 1500)));
        return {d1, d2};
    }

    std::string dir_, question_ = "Where does the zeppelin drift beside the river?";
    std::unique_ptr<Model> model_;
    ChunkingOptions chunking_;
    SessionOptions full_, sekv_;
};

} // namespace

TEST_F(RankedAnswer, TheSectionWithTheRareWordIsUsedInTheUsersDocumentOrder) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::string rare = "Zeppelin, zeppelin: a silver zeppelin drifts.\n\n";
    const std::string t2 = sample_prose(21, 1500) + rare + sample_prose(22, 1500);
    const auto d1 = p->add_document("/one.txt", text_document(sample_prose(11, 2500)));
    const auto d2 = p->add_document("/two.txt", text_document(t2));
    const auto d3 = p->add_document("/three.txt", text_document(sample_prose(31, 2500)));
    // The user's order, descending: any two documents used come in an order that is not
    // ascending ids.
    const std::vector<int64_t> order{d3, d2, d1};

    // What the test knows independently: each unit's size, and which holds the rare word.
    StateCache cache(*p, *model_, chunking_);
    int64_t total = 0;
    int units = 0;
    std::set<std::pair<int64_t, int>> rare_units;
    for (const auto id : order)
        for (const auto& u : cache.units(id)) {
            total += u.n_tokens();
            ++units;
            const auto text = p->document_text(id).substr(
                static_cast<size_t>(u.char_begin), static_cast<size_t>(u.char_end - u.char_begin));
            if (text.find("eppelin") != std::string::npos)
                rare_units.insert({id, u.index});
        }
    ASSERT_GT(total, 2 * model_->info().n_ctx_train) << "the documents must exceed the context";
    ASSERT_EQ(rare_units.size(), 1u);
    {
        Session scratch(*model_, full_);
        for (const auto id : order)
            cache.ingest(id, scratch);
    }

    const auto a = ask(*p, order, full_);
    EXPECT_GT(a.units_left_out, 0);
    EXPECT_EQ(a.units + a.units_left_out, units);
    EXPECT_EQ(a.ranking, "bm25");
    ASSERT_EQ(a.units_used.size(), static_cast<size_t>(a.units));
    // The rare word's section is ranked first and used.
    bool found = false;
    int64_t used = 0;
    for (const auto& u : a.units_used) {
        used += u.tokens;
        if (rare_units.count({u.document_id, u.unit})) {
            found = true;
            EXPECT_EQ(u.rank, 1);
            EXPECT_TRUE(u.bm25.has_value());
        }
    }
    EXPECT_TRUE(found) << a.stats.dump();
    EXPECT_LE(used, model_->info().n_ctx_train);
    EXPECT_EQ(a.answer.stats.tokens_reused, used);
    // Order: the user's document order, a document's units ascending.
    auto place = [&](int64_t id) {
        return std::find(order.begin(), order.end(), id) - order.begin();
    };
    for (size_t i = 1; i < a.units_used.size(); ++i) {
        const auto &x = a.units_used[i - 1], &y = a.units_used[i];
        EXPECT_TRUE(place(x.document_id) < place(y.document_id) ||
                    (x.document_id == y.document_id && x.unit < y.unit))
            << a.stats.dump();
    }
    // The answer's documents in the order used; a continued chat keeps that order.
    std::vector<int64_t> used_docs;
    for (const auto& u : a.units_used)
        if (std::find(used_docs.begin(), used_docs.end(), u.document_id) == used_docs.end())
            used_docs.push_back(u.document_id);
    EXPECT_EQ(a.documents, used_docs);
    ASSERT_GE(used_docs.size(), 2u)
        << "the order test needs sections of several documents: " << a.stats["units_used"].dump();
    EXPECT_FALSE(std::is_sorted(used_docs.begin(), used_docs.end()));
    const auto cont = ask(*p, {}, full_, a.chat_id);
    std::vector<int64_t> cont_docs;
    for (const auto& u : cont.units_used)
        if (std::find(cont_docs.begin(), cont_docs.end(), u.document_id) == cont_docs.end())
            cont_docs.push_back(u.document_id);
    EXPECT_EQ(cont_docs, used_docs) << "the same question ranks the same sections in";
    // The chat continues from the documents it was asked about, all of them, ranked again.
    const auto msgs = p->messages(a.chat_id);
    const auto asked = nlohmann::json::parse(msgs[1].stats_json)["documents_asked"];
    EXPECT_EQ(asked.get<std::vector<int64_t>>(), order) << msgs[1].stats_json;
    EXPECT_EQ(cont.units + cont.units_left_out, units) << "every section was a candidate again";
    // The statistics name the same units.
    const auto& j = a.stats["units_used"];
    ASSERT_EQ(j.size(), a.units_used.size());
    for (size_t i = 0; i < j.size(); ++i) {
        EXPECT_EQ(j[i]["document_id"], a.units_used[i].document_id);
        EXPECT_EQ(j[i]["unit"], a.units_used[i].unit);
        EXPECT_EQ(j[i]["tokens"], a.units_used[i].tokens);
    }
    EXPECT_EQ(a.stats["ranking"], "bm25");
    EXPECT_EQ(a.stats["ranking_query_tokens"], 0) << "no SEKV summaries: no forward pass";
    ASSERT_FALSE(a.notes.empty());
    EXPECT_NE(a.notes[0].find("of " + std::to_string(units) + " sections, those ranked"),
              std::string::npos)
        << a.notes[0];
    // The note names the sections used by their documents' names: the rare word's among them,
    // with its number as users count (from 1).
    const auto& rare_unit = *rare_units.begin();
    const auto named = a.notes[0].find(p->document(rare_unit.first)->name + " (section");
    ASSERT_NE(named, std::string::npos) << a.notes[0];
    const auto close = a.notes[0].find(')', named);
    const auto listed = a.notes[0].substr(named, close - named);
    EXPECT_NE((listed + ",").find(" " + std::to_string(rare_unit.second + 1) + ","),
              std::string::npos)
        << a.notes[0];
    const auto text = units_used_text(a);
    EXPECT_EQ(text.rfind(std::to_string(a.units) + " of " + std::to_string(units) +
                             " sections used: document ",
                         0),
              0u)
        << text;

    // SEKV: the first SEKV answer stores summaries of the sections it used; the next ranks by
    // them too, and only those sections have a SEKV score.
    const auto s1 = ask(*p, order, sekv_);
    std::set<std::pair<int64_t, int>> stored;
    for (const auto& u : s1.units_used)
        stored.insert({u.document_id, u.unit});
    const auto s2 = ask(*p, order, sekv_);
    EXPECT_EQ(s2.ranking.rfind("bm25+sekv (reciprocal rank fusion, k = 60; ", 0), 0u) << s2.ranking;
    EXPECT_NE(s2.ranking.find(" sections without SEKV summaries count their bm25 rank twice)"),
              std::string::npos)
        << s2.ranking;
    const int64_t question_tokens = static_cast<int64_t>(
        spanscope::question_tokens(model_->tokenizer(),
                                   spanscope::chat_format_of(model_->info(), model_->tokenizer()),
                                   question_)
            .size());
    EXPECT_EQ(s2.stats["ranking_query_tokens"], question_tokens + 1);
    int with_sekv = 0;
    for (const auto& u : s2.units_used)
        if (u.sekv) {
            ++with_sekv;
            EXPECT_TRUE(stored.count({u.document_id, u.unit}))
                << "a SEKV score without stored summaries: " << u.document_id << "/" << u.unit;
        }
    EXPECT_GT(with_sekv, 0) << s2.stats.dump();
}

// A second chunking of the same documents (another model, or another chunk size, read them)
// leaves the first one's ranking as it was: the same sections, the same BM25 scores. With
// FTS5's table-wide statistics every word would be counted in both chunkings' rows.
TEST_F(RankedAnswer, AnotherChunkingOfTheDocumentsLeavesTheRankingAsItWas) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::vector<int64_t> order = two_documents(*p);
    const auto before = ask(*p, order, full_);
    ASSERT_EQ(before.ranking, "bm25");
    ASSERT_GT(before.units_left_out, 0);

    ChunkingOptions other = chunking_;
    other.target_tokens = 96;
    other.max_unit_tokens = 512;
    StateCache cache(*p, *model_, other);
    ASSERT_NE(cache.chunking_key(), StateCache(*p, *model_, chunking_).chunking_key());
    for (const auto id : order)
        ASSERT_FALSE(cache.units(id).empty());

    const auto after = ask(*p, order, full_);
    ASSERT_EQ(after.units_used.size(), before.units_used.size());
    for (size_t i = 0; i < after.units_used.size(); ++i) {
        const auto &x = before.units_used[i], &y = after.units_used[i];
        EXPECT_EQ(y.document_id, x.document_id) << i;
        EXPECT_EQ(y.unit, x.unit) << i;
        EXPECT_EQ(y.rank, x.rank) << i;
        EXPECT_EQ(y.bm25, x.bm25) << i;
    }
}

// The first answer under a model that has read none of the documents computes the sections
// its ranking chose and nothing else: those left out stay uncomputed until an answer chooses
// them. Its prefill rate is over every prompt token it computed, the sections' included.
TEST_F(RankedAnswer, TheFirstAnswerComputesOnlyTheSectionsItChose) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::vector<int64_t> order = two_documents(*p);
    const int64_t d1 = order[0], d2 = order[1];
    StateCache cache(*p, *model_, chunking_);
    std::map<std::pair<int64_t, int>, int64_t> chunks_of; // (document, unit) → chunks
    for (const auto id : order)
        for (const auto& u : cache.units(id))
            chunks_of[{id, u.index}] = static_cast<int64_t>(u.chunks.size());
    for (const auto id : order)
        ASSERT_EQ(cache.status(id).chunks_stored, 0);

    // The notes as the user gets them, in order, with the moment the first section's
    // computing began (its first progress report).
    std::vector<std::string> said_in_order;
    ProjectAskHooks hooks;
    hooks.on_note = [&](const std::string& n) { said_in_order.push_back(n); };
    hooks.on_ingest_progress = [&](const IngestProgress&) {
        if (said_in_order.empty() || said_in_order.back() != "(computing)")
            said_in_order.push_back("(computing)");
    };
    const auto a = ask(*p, order, full_, 0, hooks);
    ASSERT_GT(a.units_left_out, 0) << "the test needs sections left out";
    int64_t used_tokens = 0, used_chunks = 0;
    for (const auto& u : a.units_used) {
        used_tokens += u.tokens;
        used_chunks += chunks_of.at({u.document_id, u.unit});
    }
    EXPECT_EQ(a.units_recomputed, a.units);
    EXPECT_EQ(a.tokens_recomputed, used_tokens);
    // Said before the wait: how many sections and tokens are computed first; a note on the
    // wait, not among the answer's notes.
    const std::string computing = std::to_string(a.units) + " of the " + std::to_string(a.units) +
                                  " sections used have no stored states for this model";
    const auto said = std::find_if(said_in_order.begin(), said_in_order.end(),
                                   [&](const std::string& n) { return n.starts_with(computing); });
    ASSERT_NE(said, said_in_order.end()) << ::testing::PrintToString(said_in_order);
    EXPECT_TRUE(said->ends_with("computing " + std::to_string(used_tokens) + " tokens first"))
        << *said;
    const auto began = std::find(said_in_order.begin(), said_in_order.end(), "(computing)");
    ASSERT_NE(began, said_in_order.end()) << "no progress was reported";
    EXPECT_LT(said - said_in_order.begin(), began - said_in_order.begin())
        << ::testing::PrintToString(said_in_order);
    for (const auto& n : a.notes)
        EXPECT_EQ(n.find("no stored states"), std::string::npos) << n;
    EXPECT_EQ(cache.status(d1).chunks_stored + cache.status(d2).chunks_stored, used_chunks)
        << "only the chosen sections' chunks are stored";
    const auto& st = a.answer.stats;
    const auto question = spanscope::question_tokens(
        model_->tokenizer(), spanscope::chat_format_of(model_->info(), model_->tokenizer()),
        question_);
    EXPECT_EQ(st.tokens_computed, used_tokens + std::ssize(question))
        << "the sections and the question";
    // The rate covers every computed token: the time it stands for is the sections' and the
    // question's, at most the time to the first token.
    ASSERT_GT(st.prefill_tokens_per_s, 0);
    EXPECT_NEAR(st.prefill_tokens_per_s * st.prefill_ms / 1000.0,
                static_cast<double>(st.tokens_computed), 1e-6 * st.tokens_computed);
    EXPECT_LE(st.prefill_ms, st.ttft_ms);

    // With on_wait set (the window's way), the note goes there and not to on_note.
    {
        auto other = Project::open(dir_ + "/other.spanscope", true);
        const auto docs = two_documents(*other);
        std::vector<std::string> waits, notes;
        ProjectAskHooks h;
        h.on_wait = [&](const std::string& n) { waits.push_back(n); };
        h.on_note = [&](const std::string& n) { notes.push_back(n); };
        const auto b = ask(*other, docs, full_, 0, h);
        ASSERT_EQ(waits.size(), 1u) << ::testing::PrintToString(notes);
        EXPECT_TRUE(waits[0].starts_with(std::to_string(b.units) + " of the ")) << waits[0];
        for (const auto& n : notes)
            EXPECT_EQ(n.find("no stored states"), std::string::npos) << n;
    }

    // Asked again, nothing is computed but the question, and nothing is said of a wait.
    said_in_order.clear();
    const auto again = ask(*p, order, full_, 0, hooks);
    for (const auto& n : said_in_order)
        EXPECT_EQ(n.find("no stored states"), std::string::npos) << n;
    EXPECT_EQ(again.units_recomputed, 0);
    EXPECT_EQ(again.answer.stats.tokens_reused, used_tokens);
    EXPECT_EQ(again.answer.stats.tokens_computed, std::ssize(question));
}

// A chat's turns about other documents are not sent as history: an earlier answer about one
// document would otherwise answer a question about another (a new user saw "The Port Council."
// from a Word file answer a question about a scanned PDF). Turns about the same documents are.
TEST_F(RankedAnswer, TurnsAboutOtherDocumentsAreNotSentAsHistory) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const auto d1 = p->add_document("/one.txt", text_document(sample_prose(41, 300)));
    const auto d2 = p->add_document("/two.txt", text_document(sample_prose(42, 300)));
    const auto first = ask(*p, {d1}, full_);
    EXPECT_EQ(first.history_turns, 0u);
    std::vector<std::string> heard;
    ProjectAskHooks hooks;
    hooks.on_note = [&](const std::string& n) { heard.push_back(n); };
    const auto second = ask(*p, {d2}, full_, first.chat_id, hooks);
    EXPECT_EQ(second.history_turns, 0u);
    EXPECT_EQ(second.history_left_out, 1u);
    const std::string note = "the documents asked about changed: 1 earlier turn of this chat is "
                             "not sent as history";
    ASSERT_EQ(second.notes.size(), 1u);
    EXPECT_EQ(second.notes[0].rfind(note, 0), 0u) << second.notes[0];
    ASSERT_FALSE(heard.empty());
    EXPECT_EQ(heard[0], second.notes[0]); // as it is found, before the answer
    // The same documents again: the turn about them is sent, the one about d1 still is not,
    // and the note is not said again.
    const auto about_others = [](const ProjectAnswer& a) {
        for (const auto& n : a.notes)
            if (n.find("documents asked about changed") != std::string::npos)
                return true;
        return false;
    };
    const auto third = ask(*p, {d2}, full_, first.chat_id);
    EXPECT_EQ(third.history_turns, 1u);
    EXPECT_EQ(third.history_left_out, 1u);
    EXPECT_FALSE(about_others(third));
    // Without documents given, a continued chat answers from its last answer's: d2's turns.
    const auto fourth = ask(*p, {}, full_, first.chat_id);
    EXPECT_EQ(fourth.history_turns, 2u);
    EXPECT_FALSE(about_others(fourth));
}
