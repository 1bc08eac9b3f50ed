// The trained router in a session (issue 8): a tiny model routes as its parameter file's
// thresholds say (θ → +∞: nothing expands; θ → −∞: everything, as expand_all), each head by
// its own threshold with the gate's rank, τ calibrated to the expand rate without learned
// thresholds, a file for another model or layers it does not cover are refused, and the router
// mode is chosen as documented (answering/router_choice.h). The file itself:
// test_router_params.cpp.
#include "answering/router_choice.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/router_params.h"
#include "engine/session/session.h"
#include "engine/text/prompt.h"
#include "router_params_refusal.h"
#include "storage/model_fingerprint.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

// A tiny model's SEKV session over a document, then the question: the question's logits, and
// per SEKV layer its memory (spans and the last zoom).
struct Routed {
    std::vector<float> logits;
    std::vector<const SekvMemory*> layers;
    std::unique_ptr<Session> session;
};

class TrainedZoom : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        TinyGemma3Config cfg;
        cfg.n_ctx = 1024;
        write_tiny_gemma3(dir_ + "/tiny.gguf", cfg);
        model_ = Model::load(dir_ + "/tiny.gguf");
        auto toks = model_->tokenizer().encode(sample_prose(5, 1200));
        toks.insert(toks.begin(), model_->tokenizer().bos());
        toks.resize(600);
        doc_.assign(toks.begin(), toks.end() - 8);
        question_.assign(toks.end() - 8, toks.end());
        base_.threads = 2;
        base_.n_ctx = 640;
        base_.ubatch = 64;
        base_.global_policy = "sekv";
        base_.sekv.rank = {32, 1.0, nullptr};
        base_.sekv.budget = 0;
    }
    void TearDown() override { fs::remove_all(dir_); }

    Routed run(const SessionOptions& so) const {
        Routed r;
        r.session = std::make_unique<Session>(*model_, so);
        auto& s = *r.session;
        std::vector<float> surprisal(doc_.size());
        s.prefill(doc_, nullptr, {}, surprisal.data(), question_[0]);
        const auto info = s.seal_context(surprisal.data(), 0, static_cast<int64_t>(doc_.size()));
        EXPECT_GT(info.segmentation.spans.size(), 3u);
        r.logits = s.prefill(question_);
        for (const int il : s.memory().sealing_layers())
            r.layers.push_back(dynamic_cast<const SekvMemory*>(&s.memory().layer(il)));
        return r;
    }
    // learned_tau: decide with the file's thresholds (SekvRouterOptions::learned_tau), else τ
    // calibrated to the expand rate on the question.
    SessionOptions trained(const RouterParams& p, bool learned_tau = true) const {
        auto so = base_;
        so.sekv.router_params = std::make_shared<const RouterParams>(p);
        so.sekv.router.learned_tau = learned_tau;
        return so;
    }

    std::string dir_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> doc_, question_;
    SessionOptions base_;
};

} // namespace

TEST_F(TrainedZoom, VeryNegativeThresholdsExpandEverySpanAsExpandAll) {
    auto all = base_;
    all.sekv.router.expand_all = true;
    const auto ref = run(all);
    const auto r = run(trained(tiny_router_params(*model_, -100.0f, 32)));
    ASSERT_EQ(r.layers.size(), ref.layers.size());
    ASSERT_FALSE(r.layers.empty());
    EXPECT_EQ(r.logits, ref.logits) << "the same spans at the same ranks, all expanded";
    for (const auto* m : r.layers) {
        ASSERT_NE(m, nullptr);
        ASSERT_NE(m->options().router.trained, nullptr);
        for (const auto& z : *m->last_zoom())
            EXPECT_EQ(z.spans.size(), m->spans().size());
        EXPECT_EQ(m->tau(), std::vector<double>(m->tau().size(), 1.0 / (1.0 + std::exp(100.0))));
    }
}

TEST_F(TrainedZoom, VeryLargeThresholdsExpandNothing) {
    auto none = base_;
    none.sekv.router.expand_rate = 0.0; // τ: the largest relevance, so none exceeds it
    const auto ref = run(none);
    const auto r = run(trained(tiny_router_params(*model_, 100.0f, 32)));
    EXPECT_EQ(r.logits, ref.logits) << "every span by its summary row";
    for (const auto* m : r.layers)
        for (const auto& z : *m->last_zoom())
            EXPECT_TRUE(z.spans.empty());
    // And the opposite does differ from it (the test can fail).
    const auto all = run(trained(tiny_router_params(*model_, -100.0f, 32)));
    EXPECT_NE(all.logits, r.logits);
}

TEST_F(TrainedZoom, EachHeadFollowsItsOwnThresholdAndTheGateSetsTheRank) {
    auto p = tiny_router_params(*model_, 100.0f, 2);
    for (auto& l : p.layers)
        l.theta[0] = -100.0f; // head 0 expands everything
    auto alone = trained(p);
    alone.sekv.router.share_group = false; // each query head decides alone, as trained
    const auto r = run(alone);
    for (const auto* m : r.layers) {
        const auto& zoom = *m->last_zoom();
        ASSERT_EQ(zoom.size(), 4u);
        const auto n = m->spans().size();
        EXPECT_EQ(zoom[0].spans.size(), n);
        EXPECT_TRUE(zoom[1].spans.empty()) << "head 0's choice is not shared";
        EXPECT_TRUE(zoom[2].spans.empty());
        EXPECT_TRUE(zoom[3].spans.empty());
        for (const auto& s : m->spans())
            for (size_t g = 0; g < s.k.size(); ++g) {
                EXPECT_EQ(s.k[g].rank, 2);
                EXPECT_EQ(s.v[g].rank, 2);
            }
    }
    // By default a KV group's heads expand the union of their choices (as the training-free
    // router): head 0's whole group zooms into every span, the other groups into none.
    const auto u = run(trained(p));
    const int group = model_->info().n_head / model_->info().n_head_kv;
    ASSERT_GE(group, 2) << "the union needs a KV group of several heads";
    for (const auto* m : u.layers) {
        const auto& zoom = *m->last_zoom();
        for (int h = 0; h < 4; ++h)
            EXPECT_EQ(zoom[static_cast<size_t>(h)].spans.size(), h < group ? m->spans().size() : 0u)
                << "head " << h;
    }
    // The training-free energy gate at energy 1 keeps more: the trained gate decided.
    const auto free = run(base_);
    EXPECT_GT(free.layers.front()->spans().front().k[0].rank, 2);
}

// Without learned_tau (the default) the trained router's τ is calibrated to the expand rate on
// the question with its own relevance: the learned thresholds are not read.
TEST_F(TrainedZoom, WithoutLearnedThresholdsTauIsCalibratedToTheExpandRate) {
    for (const double rate : {0.0, 1.0}) {
        // Learned thresholds at both extremes (θ = -100: everything, θ = 100: nothing) give the
        // same τ and the same decisions, those of the rate.
        std::vector<std::vector<double>> taus;
        std::vector<std::vector<size_t>> expanded;
        for (const float theta : {-100.0f, 100.0f}) {
            auto so = trained(tiny_router_params(*model_, theta, 32), false);
            so.sekv.router.expand_rate = rate;
            so.sekv.router.share_group = false;
            const auto r = run(so);
            std::vector<double> tau;
            std::vector<size_t> n_expanded;
            for (const auto* m : r.layers) {
                ASSERT_NE(m->options().router.trained, nullptr);
                const auto n = m->spans().size();
                for (const auto& z : *m->last_zoom()) {
                    EXPECT_EQ(z.spans.size(), rate == 0.0 ? 0u : n) << "θ " << theta;
                    n_expanded.push_back(z.spans.size());
                }
                tau.insert(tau.end(), m->tau().begin(), m->tau().end());
            }
            ASSERT_FALSE(tau.empty());
            taus.push_back(tau);
            expanded.push_back(n_expanded);
        }
        EXPECT_EQ(taus[0], taus[1]) << "τ does not depend on the learned thresholds";
        EXPECT_EQ(expanded[0], expanded[1]);
    }
    // And with learned_tau the thresholds are read: σ(θ) per head (θ = 2, far from both ends).
    const auto learned = run(trained(tiny_router_params(*model_, 2.0f, 32), true));
    for (const auto* m : learned.layers)
        for (const double t : m->tau())
            EXPECT_DOUBLE_EQ(t, 1.0 / (1.0 + std::exp(-2.0)));
}

TEST_F(TrainedZoom, LayersTheFileDoesNotCoverOrAnotherShapeAreRefused) {
    const auto p = tiny_router_params(*model_, 0.0f, 32);
    ASSERT_GE(p.layers.size(), 2u);
    auto missing = p;
    const int last = missing.layers.back().layer;
    missing.layers.pop_back();
    SekvOptions so;
    so.router_params = std::make_shared<const RouterParams>(missing);
    try {
        make_memory(model_->info(), 64, 64, "sekv", &so);
        ADD_FAILURE() << "a layer without parameters was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("SEKV layer " + std::to_string(last)),
                  std::string::npos)
            << e.what();
    }
    auto shape = p;
    auto& l = shape.layers.front();
    l.n_head = 2;
    l.w.resize(static_cast<size_t>(2 * l.d_out * l.head_dim));
    l.theta.resize(2);
    so.router_params = std::make_shared<const RouterParams>(shape);
    try {
        make_memory(model_->info(), 64, 64, "sekv", &so);
        ADD_FAILURE() << "parameters for another shape were accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("SEKV layer " + std::to_string(l.layer)),
                  std::string::npos);
        EXPECT_NE(std::string(e.what()).find("2 query heads"), std::string::npos) << e.what();
    }
    // chunk_summary neither routes nor keeps factors: the parameters do not concern it.
    EXPECT_NO_THROW(make_memory(model_->info(), 64, 64, "chunk_summary", &so));
    so.router_params = std::make_shared<const RouterParams>(p);
    EXPECT_NO_THROW(make_memory(model_->info(), 64, 64, "sekv", &so));
}

TEST_F(TrainedZoom, AFileForAnotherModelIsRefused) {
    TinyGemma3Config other_cfg;
    other_cfg.n_ctx = 1024;
    other_cfg.seed = 2;
    write_tiny_gemma3(dir_ + "/other.gguf", other_cfg);
    const auto other = Model::load(dir_ + "/other.gguf");
    const std::string mine = fingerprint_hex(model_fingerprint(*model_));
    const std::string theirs = fingerprint_hex(model_fingerprint(*other));
    ASSERT_NE(mine, theirs);
    const std::string file = dir_ + "/other.zoom.gguf";
    save_router_params(tiny_router_params(*other, 0.0f, 32), file);
    expect_router_params_refused([&] { load_router_params(file, mine, "tiny.gguf"); },
                                 {file, mine, theirs, "other.gguf", "tiny.gguf"});
    // Chosen explicitly, in any mode but training-free: refused, never ignored.
    expect_router_params_refused([&] { choose_router("", file, model_->path(), mine); },
                                 {file, theirs});
    expect_router_params_refused([&] { choose_router(kRouterTrained, file, model_->path(), mine); },
                                 {file});
    EXPECT_THROW(choose_router(kRouterTrainingFree, file, model_->path(), mine),
                 std::invalid_argument);
    EXPECT_THROW(choose_router(kRouterOracle, file, model_->path(), mine), std::invalid_argument);
    // Its own model takes it.
    const auto c = choose_router("", file, other->path(), theirs);
    EXPECT_EQ(c.mode, kRouterTrained);
    EXPECT_EQ(c.params->model_fingerprint, theirs);
}

TEST_F(TrainedZoom, TheDefaultIsTrainedWhenAFileForTheModelIsInstalled) {
    ScopedEnv home("XDG_DATA_HOME", dir_ + "/xdg");
    ScopedEnv dirs("XDG_DATA_DIRS", dir_ + "/none");
    const std::string fp = fingerprint_hex(model_fingerprint(*model_));
    EXPECT_EQ(router_file_name("/a/b/gemma-3-270m-q4_k_m.gguf"), "gemma-3-270m-q4_k_m.zoom.gguf");
    EXPECT_EQ(router_file_name("weights.bin"), "weights.bin.zoom.gguf");
    const auto paths = router_search_paths(model_->path());
    ASSERT_GE(paths.size(), 2u);
    const std::string installed = dir_ + "/xdg/spanscope/zoom/tiny.zoom.gguf";
    EXPECT_EQ(paths[0], installed);
    EXPECT_EQ(paths[1], dir_ + "/none/spanscope/zoom/tiny.zoom.gguf");

    // None installed: training-free by default; trained asked for is an error naming where it
    // looked.
    auto c = choose_router("", "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    EXPECT_EQ(c.params, nullptr);
    EXPECT_TRUE(c.notes.empty());
    expect_router_params_refused([&] { choose_router(kRouterTrained, "", model_->path(), fp); },
                                 {"none was found", installed});
    EXPECT_THROW(choose_router("fancy", "", model_->path(), fp), std::invalid_argument);

    // One for another model installed under this model's name: passed over with a note.
    fs::create_directories(dir_ + "/xdg/spanscope/zoom");
    auto foreign = tiny_router_params(*model_, 0.0f, 32);
    foreign.model_fingerprint = "00000000000000000000000000000000";
    save_router_params(foreign, installed);
    c = choose_router("", "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    ASSERT_EQ(c.notes.size(), 1u);
    EXPECT_NE(c.notes[0].find(installed), std::string::npos) << c.notes[0];
    expect_router_params_refused([&] { choose_router(kRouterTrained, "", model_->path(), fp); },
                                 {"none was found", "00000000000000000000000000000000"});

    // The model's own: trained by default, and when asked for; training-free when asked for.
    const auto own = tiny_router_params(*model_, 0.0f, 32);
    save_router_params(own, installed);
    for (const std::string mode : {"", "trained"}) {
        c = choose_router(mode, "", model_->path(), fp);
        EXPECT_EQ(c.mode, kRouterTrained);
        EXPECT_EQ(c.path, installed);
        ASSERT_NE(c.params, nullptr);
        EXPECT_EQ(c.params->digest(), own.digest());
    }
    c = choose_router(kRouterTrainingFree, "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    EXPECT_EQ(c.params, nullptr);
    // The oracle reads no parameter file, even with one installed.
    c = choose_router(kRouterOracle, "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterOracle);
    EXPECT_EQ(c.params, nullptr);
}

TEST_F(TrainedZoom, AnswersNameTheirRouter) {
    Session s(*model_, trained(tiny_router_params(*model_, 0.0f, 32)));
    s.prefill(doc_);
    const auto a = s.answer_after_context(question_, ChatFormat::Completion, 2, SamplingParams{});
    EXPECT_EQ(a.stats.router, "trained");
    Session f(*model_, base_);
    f.prefill(doc_);
    EXPECT_EQ(
        f.answer_after_context(question_, ChatFormat::Completion, 2, SamplingParams{}).stats.router,
        "training-free");
    SessionOptions full = base_;
    full.global_policy = "full";
    Session g(*model_, full);
    g.prefill(doc_);
    EXPECT_EQ(
        g.answer_after_context(question_, ChatFormat::Completion, 2, SamplingParams{}).stats.router,
        "");
}
