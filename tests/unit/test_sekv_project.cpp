// SEKV in a project: the unit SEKV state round-trips through its blob and refuses damage; a
// reopened project answers with the stored SEKV state (not rebuilt) and gives the identical
// answer and zoom trace; the zoom trace blob round-trips and refuses damage; a unit's stored
// spans moved to an offset equal the spans built from its rows restored (re-rotated) there;
// spans built by the trained rank gate are stored apart from the training-free ones.
#include "answering/document_spans.h"
#include "answering/project_answer.h"
#include "answering/sekv_unit.h"
#include "answering/state_cache.h"
#include "storage/zoom_trace_blob.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

class SekvProjectTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        config_.n_ctx = 2048;
        config_.sliding_window = 16;
        config_.n_layer = 4;
        write_tiny_gemma3(dir_ + "/a.gguf", config_);
        model_ = Model::load(dir_ + "/a.gguf");
        chunking_.target_tokens = 64;
        chunking_.max_unit_tokens = 1500;
        options_.threads = 2;
        options_.ubatch = 32;
        sekv_ = options_;
        sekv_.global_policy = "sekv";
        sekv_.sekv.router.expand_rate = 0.2;
        sekv_.sekv.budget = 0; // these short documents could not meet a budget (no spans then)
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::unique_ptr<Project> project() { return Project::open(dir_ + "/p.spanscope", true); }

    TinyGemma3Config config_;
    std::string dir_;
    std::unique_ptr<Model> model_;
    ChunkingOptions chunking_;
    SessionOptions options_, sekv_;
};

ProjectAnswer ask(Project& p, const Model& m, const ChunkingOptions& c, const SessionOptions& full,
                  const SessionOptions& so, const std::string& question) {
    StateCache cache(p, m, c);
    Session scratch(m, full);
    ProjectQuestion q;
    q.question = question;
    q.max_tokens = 12;
    q.sampling.temperature = 0;
    return ask_project(p, m, cache, scratch, so, q);
}

void expect_same_trace(const StoredZoomTrace& a, const StoredZoomTrace& b) {
    ASSERT_EQ(a.trace.steps.size(), b.trace.steps.size());
    EXPECT_EQ(a.trace.n_spans, b.trace.n_spans);
    EXPECT_EQ(a.tokens, b.tokens);
    for (size_t s = 0; s < a.trace.steps.size(); ++s) {
        const auto &x = a.trace.steps[s], &y = b.trace.steps[s];
        ASSERT_EQ(x.layers.size(), y.layers.size());
        EXPECT_EQ(x.fast_tier_bytes, y.fast_tier_bytes);
        for (size_t l = 0; l < x.layers.size(); ++l) {
            ASSERT_EQ(x.layers[l].heads.size(), y.layers[l].heads.size());
            for (size_t h = 0; h < x.layers[l].heads.size(); ++h) {
                EXPECT_EQ(x.layers[l].heads[h].spans, y.layers[l].heads[h].spans);
                EXPECT_EQ(x.layers[l].heads[h].relevance, y.layers[l].heads[h].relevance);
            }
        }
    }
}

} // namespace

TEST_F(SekvProjectTest, ReopenedProjectGivesIdenticalSekvAnswersAndTraces) {
    ProjectAnswer first;
    std::vector<uint8_t> first_trace;
    {
        auto p = project();
        p->add_document("/a.txt", text_document(sample_prose(3, 2500)));
        first = ask(*p, *model_, chunking_, options_, sekv_, "what about the river");
        ASSERT_EQ(first.stats["policy"], "sekv");
        EXPECT_GE(first.stats["sekv_states_built"].get<int>(), 1);
        const auto blob = p->zoom_trace(first.message_id);
        ASSERT_TRUE(blob.has_value());
        first_trace = *blob;
    }
    auto p = project(); // reopened: a new connection, cache and sessions
    const auto again = ask(*p, *model_, chunking_, options_, sekv_, "what about the river");
    EXPECT_EQ(again.stats["sekv_states_built"], 0) << "the stored SEKV state was used";
    EXPECT_EQ(again.answer.tokens, first.answer.tokens);
    EXPECT_EQ(again.answer.text, first.answer.text);
    const auto a = decode_zoom_trace(first_trace);
    const auto b = decode_zoom_trace(*p->zoom_trace(again.message_id));
    ASSERT_FALSE(a.trace.steps.empty());
    ASSERT_EQ(a.sources.size(), 1u);
    expect_same_trace(a, b);
    // The statistics name the SEKV memory, smaller in the fast tier than full.
    const auto& mem = again.stats["memory"];
    EXPECT_LT(mem["fast_tier_bytes"].get<int64_t>(), mem["full_kv_bytes"].get<int64_t>());
    EXPECT_GT(mem["host_tier_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(again.stats["memory_per_layer"].size(), 2u); // the tiny model's global layers
    for (const auto& l : again.stats["memory_per_layer"])
        EXPECT_GT(l["disk_tier_bytes"].get<int64_t>(), 0);
}

TEST_F(SekvProjectTest, FullPolicyKeepsNoTraceAndSekvStatesAreKeyedByOptions) {
    auto p = project();
    p->add_document("/a.txt", text_document(sample_prose(4, 1200)));
    const auto full = ask(*p, *model_, chunking_, options_, options_, "the hill");
    EXPECT_EQ(full.stats["policy"], "full");
    EXPECT_FALSE(p->zoom_trace(full.message_id).has_value());
    auto other = sekv_;
    other.sekv.budget = 0.2; // another budget: another state, built once
    const auto a = ask(*p, *model_, chunking_, options_, other, "the hill");
    EXPECT_GE(a.stats["sekv_states_built"].get<int>(), 1);
    // Measured after the answer, against the budget (this short document may not meet it).
    EXPECT_EQ(a.stats["budget"], 0.2);
    EXPECT_EQ(a.stats["within_budget"].get<bool>(),
              a.stats["fast_tier_fraction"].get<double>() <= 0.2);
    // The whole cache against full: what the full answer held, every layer, for as many tokens.
    ASSERT_EQ(a.stats["prompt_tokens"].get<int64_t>() + a.stats["generated_tokens"].get<int64_t>(),
              full.stats["prompt_tokens"].get<int64_t>() +
                  full.stats["generated_tokens"].get<int64_t>());
    EXPECT_NEAR(a.stats["cache_fraction"].get<double>(),
                (a.stats["memory_fast_tier_bytes"].get<double>() +
                 a.stats["memory_host_tier_bytes"].get<double>()) /
                    full.stats["memory_fast_tier_bytes"].get<double>(),
                1e-12);
    EXPECT_EQ(full.stats["memory_host_tier_bytes"], 0);
    const auto b = ask(*p, *model_, chunking_, options_, sekv_, "the hill");
    EXPECT_GE(b.stats["sekv_states_built"].get<int>(), 1);
    const auto c = ask(*p, *model_, chunking_, options_, other, "the hill");
    EXPECT_EQ(c.stats["sekv_states_built"], 0);
}

TEST_F(SekvProjectTest, SekvStateBlobRoundTripsAndRefusesDamage) {
    auto p = project();
    const auto id = p->add_document("/a.txt", text_document(sample_prose(5, 900)));
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    cache.ingest(id, scratch);
    std::vector<std::vector<int64_t>> ids;
    const auto units = cache.units(id, &ids);
    const auto states = cache.load_unit(units[0], ids[0]);
    const auto st = build_sekv_unit(units[0], states, model_->info(), sekv_.sekv);
    ASSERT_FALSE(st.segmentation.spans.empty());
    const auto fp = model_fingerprint(*model_);
    const auto blob = encode_sekv_state(st, fp);
    SekvExpectation e;
    e.fingerprint = fp;
    e.options_key = st.options_key;
    e.n_tokens = st.n_tokens;
    e.layers = sekv_layers(model_->info(), sekv_.sekv);
    e.n_kv_head = model_->info().n_head_kv;
    e.head_dim = model_->info().head_dim;
    const auto back = decode_sekv_state(blob.data(), blob.size(), e);
    EXPECT_EQ(back.segmentation.anchors, st.segmentation.anchors);
    EXPECT_EQ(back.segmentation.full_resolution, st.segmentation.full_resolution);
    EXPECT_EQ(back.span_chars, st.span_chars);
    ASSERT_EQ(back.layers.size(), st.layers.size());
    for (size_t l = 0; l < st.layers.size(); ++l)
        for (size_t s = 0; s < st.layers[l].spans.size(); ++s) {
            EXPECT_EQ(back.layers[l].spans[s].summary_k, st.layers[l].spans[s].summary_k);
            EXPECT_EQ(back.layers[l].spans[s].k[0].right, st.layers[l].spans[s].k[0].right);
            EXPECT_EQ(back.layers[l].spans[s].v[1].left, st.layers[l].spans[s].v[1].left);
        }
    // Every flipped byte, a cut blob and other expectations are refused.
    for (size_t i = 0; i < blob.size(); i += std::max<size_t>(1, blob.size() / 500)) {
        auto bad = blob;
        bad[i] ^= 0x5a;
        EXPECT_THROW(decode_sekv_state(bad.data(), bad.size(), e), StateError) << "byte " << i;
    }
    EXPECT_THROW(decode_sekv_state(blob.data(), blob.size() / 2, e), StateError);
    auto other = e;
    other.options_key = "another";
    EXPECT_THROW(decode_sekv_state(blob.data(), blob.size(), other), StateError);
    other = e;
    other.layers = {1};
    EXPECT_THROW(decode_sekv_state(blob.data(), blob.size(), other), StateError);
    // A damaged stored state is logged and rebuilt, identical to the first.
    cache.sekv_state(units[0], ids[0], states, sekv_.sekv);
    p->db().prepare("UPDATE segmentations SET data = zeroblob(length(data))").run();
    bool built = false;
    const auto rebuilt = cache.sekv_state(units[0], ids[0], states, sekv_.sekv, &built);
    EXPECT_TRUE(built);
    EXPECT_EQ(rebuilt.segmentation.anchors, st.segmentation.anchors);
    bool logged = false;
    for (const auto& [kind, msg] : p->events())
        logged = logged || (kind == "recomputed" && msg.find("SEKV") != std::string::npos);
    EXPECT_TRUE(logged);
    // The display data follows the state: one entry per span, ranges inside the text.
    const auto shown = unit_spans(st, id, 0);
    ASSERT_EQ(shown.spans.size(), st.segmentation.spans.size());
    const auto text_bytes = static_cast<int64_t>(p->document_text(id).size());
    for (const auto& s : shown.spans) {
        EXPECT_GE(s.rank, 1);
        if (s.char_begin >= 0) {
            EXPECT_LT(s.char_begin, s.char_end);
            EXPECT_LE(s.char_end, text_bytes);
        }
    }
}

TEST_F(SekvProjectTest, TwoDocumentsAssembleTheirSpansInOrder) {
    auto p = project();
    const auto a = p->add_document("/a.txt", text_document(sample_prose(6, 700)));
    const auto b = p->add_document("/b.txt", text_document(sample_prose(7, 600)));
    const auto ans = ask(*p, *model_, chunking_, options_, sekv_, "which hill");
    const auto t = decode_zoom_trace(*p->zoom_trace(ans.message_id));
    ASSERT_EQ(t.sources.size(), 2u);
    EXPECT_EQ(t.sources[0].document_id, a);
    EXPECT_EQ(t.sources[1].document_id, b);
    EXPECT_EQ(t.sources[0].first_span, 0);
    EXPECT_EQ(t.sources[1].first_span, t.sources[0].n_spans);
    EXPECT_EQ(t.trace.n_spans, t.sources[0].n_spans + t.sources[1].n_spans);
    EXPECT_GT(t.sources[1].offset, 0);
    // Each source's spans are its document's SEKV spans.
    StateCache cache(*p, *model_, chunking_);
    EXPECT_EQ(static_cast<int>(document_sekv_spans(cache, b, sekv_.sekv)[0].spans.size()),
              t.sources[1].n_spans);
    // The span ids of the trace lie in the context, and token texts decode the answer.
    std::string text;
    for (const auto& piece : t.token_texts)
        text += piece;
    EXPECT_NE(text.find(ans.answer.text.substr(0, 3)), std::string::npos);
}

TEST_F(SekvProjectTest, StoredSpansMovedToAnOffsetEqualSpansBuiltThere) {
    auto p = project();
    const auto a = p->add_document("/a.txt", text_document(sample_prose(6, 700)));
    const auto b = p->add_document("/b.txt", text_document(sample_prose(7, 600)));
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    cache.ingest(a, scratch);
    cache.ingest(b, scratch);
    std::vector<std::vector<int64_t>> ia, ib;
    const auto ua = cache.units(a, &ia);
    const auto ub = cache.units(b, &ib);
    const auto sa = cache.load_unit(ua[0], ia[0]);
    const auto sb = cache.load_unit(ub[0], ib[0]);
    const auto stb = cache.sekv_state(ub[0], ib[0], sb, sekv_.sekv);
    const int64_t off = ua[0].n_tokens();
    // Moved: b's stored spans (built at unit-local positions) held at offset `off`.
    Session moved(*model_, sekv_), built(*model_, sekv_);
    for (auto* s : {&moved, &built}) {
        cache.restore_unit(sa, *s, 0);
        cache.restore_unit(sb, *s, off); // keys re-rotated by `off`
        s->adopt_memory(off + ub[0].n_tokens());
    }
    hold_sekv_unit(moved, stb, off);
    // Built: the same segmentation sealed from b's rows as restored at `off`.
    built.seal_context(stb.segmentation, stb.token_surprisal, static_cast<int32_t>(off));
    for (const int layer : sekv_layers(model_->info(), sekv_.sekv)) {
        const auto& x = dynamic_cast<const SekvMemory&>(moved.memory().layer(layer)).spans();
        const auto& y = dynamic_cast<const SekvMemory&>(built.memory().layer(layer)).spans();
        ASSERT_EQ(x.size(), y.size());
        ASSERT_FALSE(x.empty());
        double worst = 0, scale = 0;
        for (size_t i = 0; i < x.size(); ++i) {
            EXPECT_EQ(x[i].begin, y[i].begin);
            EXPECT_GE(x[i].begin, off);
            for (size_t j = 0; j < x[i].summary_k.size(); ++j) {
                worst = std::max(
                    worst, static_cast<double>(std::fabs(x[i].summary_k[j] - y[i].summary_k[j])));
                scale = std::max(scale, static_cast<double>(std::fabs(y[i].summary_k[j])));
            }
            EXPECT_EQ(x[i].summary_v, y[i].summary_v);
        }
        // Rotating the summary equals averaging the rotated keys, up to the f16 rounding of
        // the restored (re-rotated) rows.
        EXPECT_LT(worst, 4e-3 * std::max(1.0, scale)) << "layer " << layer;
    }
    // And both answer alike: the logits after a question agree.
    const std::vector<int32_t> q{5, 6, 7};
    const auto lx = moved.prefill(q), ly = built.prefill(q);
    double d = 0, m = 0;
    for (size_t i = 0; i < lx.size(); ++i) {
        d = std::max(d, static_cast<double>(std::fabs(lx[i] - ly[i])));
        m = std::max(m, static_cast<double>(std::fabs(ly[i])));
    }
    EXPECT_LT(d, 1e-2 * std::max(1.0, m));
}

TEST(ZoomTraceBlob, RoundTripsAndRefusesDamage) {
    StoredZoomTrace t;
    t.trace.n_spans = 40;
    t.sources = {{3, 0, 0, 25, 0}, {4, 1, 25, 15, 900}};
    for (int s = 0; s < 5; ++s) {
        ZoomStep st;
        st.fast_tier_bytes = 1000 + s;
        st.host_tier_bytes = 5000;
        for (const int layer : {5, 11}) {
            LayerZoom lz{layer, {}};
            for (int h = 0; h < 4; ++h)
                lz.heads.push_back({{s, 10 + h, 39}, {0.9f, 0.8f, 0.7f}, {}});
            st.layers.push_back(lz);
        }
        t.trace.steps.push_back(st);
        t.tokens.push_back(100 + s);
        t.token_texts.push_back("tok" + std::to_string(s));
    }
    const auto blob = encode_zoom_trace(t);
    const auto back = decode_zoom_trace(blob);
    expect_same_trace(t, back);
    EXPECT_EQ(back.token_texts, t.token_texts);
    EXPECT_EQ(back.sources[1].offset, 900);
    for (size_t i = 0; i < blob.size(); ++i) {
        auto bad = blob;
        bad[i] ^= 0x21;
        EXPECT_THROW(decode_zoom_trace(bad), std::runtime_error) << "byte " << i;
    }
    EXPECT_THROW(decode_zoom_trace({}), std::runtime_error);
    auto wrong = t;
    wrong.trace.steps[0].layers[0].heads[0] = {{40}, {0.5f}, {}}; // outside the context
    EXPECT_THROW(decode_zoom_trace(encode_zoom_trace(wrong)), std::runtime_error);
}

// The same on the real model and real text (skipped without it): the reopened project answers
// from its stored SEKV state with the identical answer and zoom trace.
TEST(SekvProjectRealModel, ReopenedProjectGivesIdenticalSekvAnswersAndTraces) {
    const auto path = real_model_path();
    if (!path)
        GTEST_SKIP() << "the default model is not installed (run the set-up command)";
    std::string text = read_file("/usr/share/common-licenses/GPL-3");
    if (text.empty())
        GTEST_SKIP() << "/usr/share/common-licenses/GPL-3 is missing (package base-files)";
    text.resize(text.find("\n\n", 6000)); // about 1 500 tokens
    auto model = Model::load(*path);
    const std::string dir = temp_dir();
    ChunkingOptions co;
    co.target_tokens = 512;
    co.max_unit_tokens = model->info().n_ctx_train - 1024;
    SessionOptions full;
    full.threads = 2;
    SessionOptions so = full;
    so.global_policy = "sekv";
    const std::string q = "Which organization holds the copyright on the text of this license?";
    ProjectAnswer first;
    std::vector<uint8_t> trace;
    {
        auto p = Project::open(dir + "/p.spanscope", true);
        p->add_document("/GPL-3", text_document(text));
        first = ask(*p, *model, co, full, so, q);
        EXPECT_GE(first.stats["sekv_states_built"].get<int>(), 1);
        trace = *p->zoom_trace(first.message_id);
    }
    auto p = Project::open(dir + "/p.spanscope", false);
    const auto again = ask(*p, *model, co, full, so, q);
    EXPECT_EQ(again.stats["sekv_states_built"], 0);
    EXPECT_EQ(again.answer.tokens, first.answer.tokens);
    EXPECT_NE(again.answer.text.find("Free Software Foundation"), std::string::npos)
        << again.answer.text;
    const auto a = decode_zoom_trace(trace);
    ASSERT_FALSE(a.trace.steps.empty());
    expect_same_trace(a, decode_zoom_trace(*p->zoom_trace(again.message_id)));
    EXPECT_LE(again.stats["fast_tier_fraction"].get<double>(), 0.35);
    fs::remove_all(dir);
}

// Spans built by the trained rank gate keep other ranks than the energy gate's: they are stored
// under their own key, so a project never serves one router mode the other's spans (issue 8).
TEST_F(SekvProjectTest, SpansOfTheTrainedRankGateAreKeptApartFromTheTrainingFreeOnes) {
    auto p = project();
    const auto id = p->add_document("/a.txt", text_document(sample_prose(5, 900)));
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    cache.ingest(id, scratch);
    std::vector<std::vector<int64_t>> ids;
    const auto units = cache.units(id, &ids);
    const auto states = cache.load_unit(units[0], ids[0]);
    auto max_rank = [](const SekvUnitState& st) {
        int r = 0;
        for (const auto& l : st.layers)
            for (const auto& s : l.spans)
                for (size_t g = 0; g < s.k.size(); ++g)
                    r = std::max({r, s.k[g].rank, s.v[g].rank});
        return r;
    };
    auto state = [&](const SekvOptions& o, bool* built) {
        return cache.sekv_state(units[0], ids[0], states, o, built);
    };
    bool built = false;
    const auto free = state(sekv_.sekv, &built);
    EXPECT_TRUE(built);
    ASSERT_FALSE(free.segmentation.spans.empty());
    ASSERT_GT(max_rank(free), 1) << "the energy gate keeps more than one component here";

    auto trained = sekv_.sekv;
    const auto zp = tiny_router_params(*model_, 0.0f, 1); // a gate that keeps one component
    trained.router_params = std::make_shared<const RouterParams>(zp);
    const auto t = state(trained, &built);
    EXPECT_TRUE(built) << "the training-free spans were served to the trained router";
    EXPECT_EQ(max_rank(t), 1);
    EXPECT_EQ(t.options_key, free.options_key + "-g" + zp.rank_gate_digest());
    // Each mode is served its own spans from the store from now on.
    EXPECT_EQ(max_rank(state(trained, &built)), 1);
    EXPECT_FALSE(built);
    EXPECT_EQ(max_rank(state(sekv_.sekv, &built)), max_rank(free));
    EXPECT_FALSE(built);
    // Another rank gate: other spans. Other thresholds only (same gates): the same spans.
    auto gate3 = sekv_.sekv;
    gate3.router_params =
        std::make_shared<const RouterParams>(tiny_router_params(*model_, 0.0f, 3));
    EXPECT_EQ(max_rank(state(gate3, &built)), 3);
    EXPECT_TRUE(built);
    auto theta = zp;
    theta.layers.front().theta.assign(theta.layers.front().theta.size(), 4.0f);
    auto same_gate = sekv_.sekv;
    same_gate.router_params = std::make_shared<const RouterParams>(theta);
    EXPECT_EQ(max_rank(state(same_gate, &built)), 1);
    EXPECT_FALSE(built);
    // The trained router without its rank gate (--full-rank): the training-free spans, served
    // from the store as they are.
    auto router_only = trained;
    router_only.trained_rank_gate = false;
    EXPECT_EQ(max_rank(state(router_only, &built)), max_rank(free));
    EXPECT_FALSE(built);
    EXPECT_EQ(sekv_options_key(router_only, sekv_layers(model_->info(), router_only)),
              free.options_key);
    const auto layer = sekv_layers(model_->info(), router_only).front();
    const auto lo = sekv_layer_options(router_only, layer,
                                       model_->info().layers[static_cast<size_t>(layer)].attn);
    EXPECT_TRUE(lo.router.trained) << "the trained router still routes";
    EXPECT_FALSE(lo.rank.predictor);
    EXPECT_EQ(lo.rank.max_rank, sekv_.sekv.rank.max_rank);
    // The right factors' type is part of the key: states held in f16 are not served to a
    // session that holds Q8_0 (the default), nor the other way.
    auto f16 = sekv_.sekv;
    f16.rank.right_type = TensorType::F16;
    auto q8 = sekv_.sekv;
    q8.rank.right_type = TensorType::Q8_0;
    EXPECT_NE(sekv_options_key(f16, sekv_layers(model_->info(), f16)),
              sekv_options_key(q8, sekv_layers(model_->info(), q8)));
    // A rank gate that nothing identifies cannot be keyed for the store.
    auto anonymous = sekv_.sekv;
    anonymous.rank.predictor = trained_rank_gate(zp.layers.front());
    EXPECT_THROW(sekv_options_key(anonymous, sekv_layers(model_->info(), anonymous)),
                 std::invalid_argument);
    // Plain-mean summary rows (an evaluation setting) are never stored as the design's.
    auto uniform = sekv_.sekv;
    uniform.uniform_summary = true;
    EXPECT_THROW(sekv_options_key(uniform, sekv_layers(model_->info(), uniform)),
                 std::invalid_argument);
    // Nor are they given to the trained router, trained on the design's.
    auto trained_uniform = trained;
    trained_uniform.uniform_summary = true;
    EXPECT_THROW(sekv_layer_options(trained_uniform, layer,
                                    model_->info().layers[static_cast<size_t>(layer)].attn),
                 std::invalid_argument);

    // A question answered with the trained router says so, and builds nothing new.
    auto so = sekv_;
    so.sekv = trained;
    const auto a = ask(*p, *model_, chunking_, options_, so, "the hill");
    EXPECT_EQ(a.stats["router"], "trained");
    EXPECT_EQ(a.stats["sekv_states_built"], 0);
    const auto one_stage = ask(*p, *model_, chunking_, options_, sekv_, "the hill");
    EXPECT_EQ(one_stage.stats["router"], "training-free");
    EXPECT_FALSE(one_stage.stats.contains("rerank")); // one stage

    // With two-stage routing the statistics carry its N (what the session answered with).
    so = sekv_;
    so.sekv.router.tau_per_query = true;
    so.sekv.router.rerank = 4;
    EXPECT_EQ(ask(*p, *model_, chunking_, options_, so, "the hill").stats["rerank"], 4);
}

// The selectors a project offers are the engine's (recompute_selectors) less cacheblend, whose
// check layer needs sliding-window rows the store does not keep; ask_project refuses the others
// with the reason before it saves the question.
TEST_F(SekvProjectTest, ProjectSelectorsAreTheEnginesLessCacheblend) {
    const auto offered = project_selectors();
    EXPECT_EQ(offered, (std::vector<std::string>{"none", "epic", "full"}));
    EXPECT_EQ(project_selector_problem("cacheblend").rfind("cacheblend is not offered", 0), 0u);
    size_t refused = 0;
    for (const auto& s : recompute_selectors()) {
        const bool in = std::find(offered.begin(), offered.end(), s) != offered.end();
        EXPECT_EQ(project_selector_problem(s).empty(), in) << s;
        if (!in) {
            ++refused;
            EXPECT_NE(project_selector_problem(s).find("sliding-window"), std::string::npos);
        }
    }
    EXPECT_EQ(refused, 1u);
    EXPECT_EQ(offered.size() + refused, recompute_selectors().size());
    EXPECT_EQ(project_selector_problem("abc"), "'abc' is not one of none, epic or full");
    EXPECT_EQ(project_selector_problem(""), "'' is not one of none, epic or full");

    auto p = project();
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    ProjectQuestion q;
    q.question = "What is it?";
    for (const std::string s : {"cacheblend", "abc", ""}) {
        q.recompute.selector = s;
        try {
            ask_project(*p, *model_, cache, scratch, options_, q);
            ADD_FAILURE() << s << " was not refused";
        } catch (const std::invalid_argument& e) {
            EXPECT_EQ(std::string(e.what()), project_selector_problem(s));
        }
    }
    EXPECT_TRUE(p->chats().empty());
}
