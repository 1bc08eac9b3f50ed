// The one place that turns a user's memory settings into the engine's session options
// (answering/policy_settings.h): what each setting becomes, the combinations refused, the router
// chosen (searched or given, with a note for each file passed over), and the rule of two-stage
// routing that the desktop application's Settings asks.
#include "answering/policy_settings.h"
#include "engine/model/model.h"
#include "engine/sekv/router_params.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

class PolicySettingsTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        // No parameter file is found but those the tests put under this data directory.
        home_ = std::make_unique<ScopedEnv>("XDG_DATA_HOME", dir_ + "/data");
        dirs_ = std::make_unique<ScopedEnv>("XDG_DATA_DIRS", dir_ + "/none");
        TinyGemma3Config cfg;
        cfg.n_ctx = 1024;
        write_tiny_gemma3(dir_ + "/tiny.gguf", cfg);
        model_ = Model::load(dir_ + "/tiny.gguf");
    }
    void TearDown() override {
        dirs_.reset();
        home_.reset();
        fs::remove_all(dir_);
    }
    // `s` must be refused with a message that names `what`.
    void expect_refused(const PolicySettings& s, const std::string& what) {
        try {
            policy_setup(s, *model_, 1);
            ADD_FAILURE() << "accepted; expected a refusal naming " << what;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    }
    std::string dir_;
    std::unique_ptr<ScopedEnv> home_, dirs_;
    std::unique_ptr<Model> model_;
};

TEST_F(PolicySettingsTest, EverySettingReachesTheSessionOptions) {
    PolicySettings s;
    s.policy = "sekv";
    s.budget = 0.25;
    s.expand_rate = 0.1;
    s.alpha = 1.5;
    s.max_span = 24;
    s.layers = {5};
    s.tau_per_query = true;
    s.rerank = 4;
    const auto setup = policy_setup(s, *model_, 3);
    const auto& o = setup.options;
    EXPECT_EQ(o.threads, 3);
    EXPECT_EQ(o.global_policy, "sekv");
    EXPECT_EQ(o.sekv.budget, 0.25);
    EXPECT_EQ(o.eviction.budget, 0.25);
    EXPECT_EQ(o.sekv.router.expand_rate, 0.1);
    EXPECT_EQ(o.sekv.segmentation.alpha, 1.5);
    EXPECT_EQ(o.sekv.segmentation.max_span, 24);
    EXPECT_EQ(o.sekv.layers, std::vector<int>{5});
    EXPECT_TRUE(o.sekv.router.tau_per_query);
    EXPECT_EQ(o.sekv.router.rerank, 4);
    // No file for this model anywhere: the training-free router, W = 0 and τ calibrated.
    EXPECT_EQ(setup.router.mode, kRouterTrainingFree);
    EXPECT_EQ(o.sekv.router_params, nullptr);
    // A row budget instead of τ per query; the oracle router.
    PolicySettings rows;
    rows.policy = "sekv";
    rows.expand_rows = 64;
    EXPECT_EQ(policy_setup(rows, *model_, 1).options.sekv.router.budget_rows, 64);
    PolicySettings oracle;
    oracle.policy = "sekv";
    oracle.router = kRouterOracle;
    oracle.tau_per_query = true;
    const auto o2 = policy_setup(oracle, *model_, 1);
    EXPECT_EQ(o2.router.mode, kRouterOracle);
    EXPECT_TRUE(o2.options.sekv.router.oracle);
}

TEST_F(PolicySettingsTest, RouterSettingsWithoutASekvRunAreRefused) {
    const std::vector<void (*)(PolicySettings&)> router_settings = {
        [](PolicySettings& t) { t.router = kRouterTrainingFree; },
        [](PolicySettings& t) { t.router_params_file = "/nowhere/m.zoom.gguf"; },
        [](PolicySettings& t) { t.learned_tau = true; },
        [](PolicySettings& t) { t.tau_per_query = t.tau_per_query_given = true; },
        [](PolicySettings& t) { t.full_rank = true; },
        [](PolicySettings& t) {
            t.rerank = 4;
            t.rerank_given = true;
        },
    };
    for (const auto set : router_settings)
        for (const char* policy : {"full", "snapkv", "chunk_summary"}) {
            PolicySettings t;
            t.policy = policy;
            set(t);
            expect_refused(t, "--policy sekv");
        }
    PolicySettings s;
    s.policy = "full";
    s.tau_per_query = true;
    s.rerank = 4;
    // An evaluation that runs sekv among other policies routes, whatever the settings' own
    // policy (the lab keeps its list of policies apart): two-stage routing included.
    const auto setup = policy_setup_for_runs(s, *model_, 1, /*routes=*/true);
    EXPECT_EQ(setup.router.mode, kRouterTrainingFree);
    EXPECT_EQ(setup.options.global_policy, "full");
    EXPECT_EQ(setup.options.sekv.router.rerank, 4);
    // Without router settings a full run has no router at all.
    PolicySettings full;
    full.policy = "full";
    EXPECT_EQ(policy_setup(full, *model_, 1).router.mode, "");
}

// The defaults are sekv's measured configuration; a default that a given setting rules out
// gives way, a given setting is checked (the refusals above and below).
TEST_F(PolicySettingsTest, TheDefaultsAreSekvsAndGiveWayToWhatIsGiven) {
    const auto d = policy_setup(PolicySettings{}, *model_, 1);
    EXPECT_EQ(d.options.global_policy, "sekv");
    EXPECT_EQ(d.router.mode, kRouterTrainingFree);
    EXPECT_TRUE(d.options.sekv.router.tau_per_query);
    EXPECT_EQ(d.options.sekv.router.expand_rate, 0.0125);
    EXPECT_EQ(d.options.sekv.router.rerank, 4);
    EXPECT_EQ(d.options.sekv.rank.right_type, TensorType::Q8_0);
    // A row budget decides on the question: τ per query (a default) gives way, and with it
    // two-stage routing.
    PolicySettings rows;
    rows.expand_rows = 64;
    const auto r = policy_setup(rows, *model_, 1);
    EXPECT_FALSE(r.options.sekv.router.tau_per_query);
    EXPECT_EQ(r.options.sekv.router.rerank, 0);
    // τ on the question, asked for: one stage.
    PolicySettings question;
    question.tau_per_query = false;
    question.tau_per_query_given = true;
    EXPECT_EQ(policy_setup(question, *model_, 1).options.sekv.router.rerank, 0);
    // The oracle scores every span already: one stage.
    PolicySettings oracle;
    oracle.router = kRouterOracle;
    const auto o = policy_setup(oracle, *model_, 1);
    EXPECT_EQ(o.router.mode, kRouterOracle);
    EXPECT_EQ(o.options.sekv.router.rerank, 0);
    // A model without a layer SEKV serves (Granite 4.0-H: no global attention layer with
    // full-head RoPE) answers with full by default, with a note, whatever routing defaults came
    // along; sekv asked for stays sekv (the session refuses it: test_cli.cpp), and an
    // evaluation keeps the policies it names.
    write_tiny_granite_hybrid(dir_ + "/hybrid.gguf", TinyGraniteHybridConfig{});
    const auto hybrid = Model::load(dir_ + "/hybrid.gguf");
    std::vector<std::string> notes;
    const auto h = policy_setup(PolicySettings{}, *hybrid, 1,
                                [&](const std::string& n) { notes.push_back(n); });
    EXPECT_EQ(h.options.global_policy, "full");
    EXPECT_EQ(h.router.mode, "");
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("answering with full memory"), std::string::npos) << notes[0];
    PolicySettings asked;
    asked.policy = "sekv";
    asked.policy_given = true;
    EXPECT_EQ(policy_setup(asked, *hybrid, 1).options.global_policy, "sekv"); // the session
                                                                              // refuses it
    PolicySettings eval_settings; // the policy list is the evaluation's own
    eval_settings.tau_per_query = eval_settings.tau_per_query_given = true;
    EXPECT_EQ(policy_setup_for_runs(eval_settings, *hybrid, 1, /*routes=*/true).router.mode,
              kRouterTrainingFree);
    // The desktop application sends its routing settings along with the default policy: on
    // such a model they are left out, named in the note, not refused.
    PolicySettings gui;
    gui.router = kRouterTrainingFree;
    gui.rerank = 8;
    gui.rerank_given = true;
    gui.tau_per_query_given = true;
    notes.clear();
    const auto g = policy_setup(gui, *hybrid, 1, [&](const std::string& n) { notes.push_back(n); });
    EXPECT_EQ(g.options.global_policy, "full");
    EXPECT_EQ(g.router.mode, "");
    EXPECT_EQ(g.options.sekv.router.rerank, 0);
    EXPECT_FALSE(g.options.sekv.router.tau_per_query);
    ASSERT_EQ(notes.size(), 1u);
    for (const char* flag :
         {"answering with full memory", "--router", "--rerank", "--tau-per-query"})
        EXPECT_NE(notes[0].find(flag), std::string::npos) << flag << " in " << notes[0];
}

// A LinearKV selector recomputes rows of the full policy: it takes the default policy's place,
// with a note; a given sekv is kept (the answering service refuses it with a selector).
TEST_F(PolicySettingsTest, ASelectorMakesTheDefaultPolicyFull) {
    std::vector<std::string> notes;
    const auto note = [&](const std::string& n) { notes.push_back(n); };
    EXPECT_EQ(policy_setup(PolicySettings{}, *model_, 1, note, "none").options.global_policy,
              "sekv");
    EXPECT_TRUE(notes.empty());
    PolicySettings s;
    s.rerank = 8;
    s.rerank_given = true;
    const auto f = policy_setup(s, *model_, 1, note, "full");
    EXPECT_EQ(f.options.global_policy, "full");
    EXPECT_EQ(f.router.mode, "");
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("the full selector recomputes rows"), std::string::npos) << notes[0];
    EXPECT_NE(notes[0].find("--rerank"), std::string::npos) << notes[0];
    EXPECT_EQ(full_memory_reason(PolicySettings{}, *model_, "none"), "");
    PolicySettings asked;
    asked.policy = "sekv";
    asked.policy_given = true;
    EXPECT_EQ(full_memory_reason(asked, *model_, "full"), "");
    EXPECT_EQ(policy_setup(asked, *model_, 1, {}, "full").options.global_policy, "sekv");
}

TEST_F(PolicySettingsTest, CombinationsTheRouterCannotRunAreRefused) {
    PolicySettings s;
    s.policy = "sekv";
    auto with = [&](auto change) {
        PolicySettings t = s;
        change(t);
        return t;
    };
    expect_refused(with([](PolicySettings& t) {
                       t.tau_per_query = true;
                       t.rerank = 1;
                   }),
                   "--rerank 1");
    expect_refused(with([](PolicySettings& t) {
                       t.tau_per_query = false;
                       t.tau_per_query_given = true;
                       t.rerank = 2;
                       t.rerank_given = true;
                   }),
                   "give --tau-per-query");
    expect_refused(with([](PolicySettings& t) {
                       t.tau_per_query = t.tau_per_query_given = true;
                       t.expand_rows = 64;
                   }),
                   "--expand-rows");
    expect_refused(with([](PolicySettings& t) { t.learned_tau = true; }), "--learned-tau");
    expect_refused(with([](PolicySettings& t) { t.full_rank = true; }), "--full-rank");
    expect_refused(with([](PolicySettings& t) {
                       t.router = kRouterOracle;
                       t.tau_per_query = false;
                       t.tau_per_query_given = true;
                   }),
                   "--tau-per-query");
    // Trained asked for and no file for the model: refused, never a silent fallback.
    EXPECT_THROW(
        policy_setup(with([](PolicySettings& t) { t.router = kRouterTrained; }), *model_, 1),
        RouterParamsError);
}

TEST_F(PolicySettingsTest, AGivenParameterFileIsTheTrainedRouter) {
    auto p = tiny_router_params(*model_, 0.0f, 3);
    p.share_group = false; // trained for each query head alone (the options default to the union)
    const std::string file = dir_ + "/mine.zoom.gguf";
    save_router_params(p, file);
    PolicySettings s;
    s.policy = "sekv";
    s.router_params_file = file;
    const auto calibrated = policy_setup(s, *model_, 1);
    EXPECT_EQ(calibrated.router.mode, kRouterTrained);
    EXPECT_EQ(calibrated.router.path, file);
    ASSERT_NE(calibrated.options.sekv.router_params, nullptr);
    EXPECT_EQ(calibrated.options.sekv.router_params->digest(), p.digest());
    EXPECT_FALSE(calibrated.options.sekv.router.learned_tau);
    EXPECT_TRUE(calibrated.options.sekv.trained_rank_gate);
    EXPECT_TRUE(calibrated.options.sekv.router.share_group);
    // --full-rank: the energy gate instead of the trained one.
    s.full_rank = true;
    EXPECT_FALSE(policy_setup(s, *model_, 1).options.sekv.trained_rank_gate);
    s.full_rank = false;
    // --learned-tau: the file's thresholds, deciding as trained (each query head alone here).
    s.learned_tau = true;
    const auto setup = policy_setup(s, *model_, 1);
    EXPECT_TRUE(setup.options.sekv.router.learned_tau);
    EXPECT_FALSE(setup.options.sekv.router.share_group);
    // With --expand-rate the learned thresholds would not read it.
    s.expand_rate_given = true;
    expect_refused(s, "--expand-rate");
}

TEST_F(PolicySettingsTest, AFileForAnotherModelIsPassedOverWithANote) {
    auto p = tiny_router_params(*model_, 0.0f, 3);
    p.model_fingerprint = std::string(p.model_fingerprint.size(), '0');
    fs::create_directories(dir_ + "/data/spanscope/zoom");
    save_router_params(p, dir_ + "/data/spanscope/zoom/" + router_file_name(model_->path()));
    PolicySettings s;
    s.policy = "sekv";
    std::vector<std::string> notes;
    const auto setup =
        policy_setup(s, *model_, 1, [&](const std::string& n) { notes.push_back(n); });
    EXPECT_EQ(setup.router.mode, kRouterTrainingFree);
    EXPECT_EQ(setup.options.sekv.router_params, nullptr);
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("passed over"), std::string::npos) << notes[0];
    // The note comes before a refusal too, so that the user sees why no file was taken.
    notes.clear();
    s.learned_tau = true;
    EXPECT_THROW(policy_setup(s, *model_, 1, [&](const std::string& n) { notes.push_back(n); }),
                 std::invalid_argument);
    EXPECT_EQ(notes.size(), 1u);
}

TEST(TwoStageRouting, AppliesOnlyUnderSekvWithTauPerQueryOnTheCpu) {
    EXPECT_TRUE(two_stage_routing_applies("sekv", true, "cpu"));
    EXPECT_FALSE(two_stage_routing_applies("sekv", false, "cpu"));
    EXPECT_FALSE(two_stage_routing_applies("sekv", true, "cuda"));
    EXPECT_FALSE(two_stage_routing_applies("full", true, "cpu"));
    EXPECT_FALSE(two_stage_routing_applies("chunk_summary", true, "cpu"));
}

} // namespace
