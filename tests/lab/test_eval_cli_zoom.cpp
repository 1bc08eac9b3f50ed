// The zoom measures of `spanscope-lab eval`'s sekv lines (lab/evaluation/eval_zoom_measures.h)
// on a tiny model: every sekv line that expanded something says which share of the spans it
// expanded, every needle line says where the asked needle stood by attention mass, and the
// summary condenses both.
#include "cli_runner.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace spanscope;

namespace {

nlohmann::json run_eval_json(const std::string& dir, const std::vector<std::string>& args) {
    std::vector<std::string> all{"eval"};
    all.insert(all.end(), args.begin(), args.end());
    const auto run = test::run_cli(dir, {}, all);
    EXPECT_EQ(run.status, 0) << run.err;
    return nlohmann::json::parse(run.out, nullptr, false);
}

} // namespace

TEST(EvalCli, SekvLinesCarryTheExpandedShareAndTheNeedlesMass) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = test::temp_dir();
    test::TinyGemma3Config cfg;
    cfg.n_ctx = 2048;
    test::write_tiny_gemma3(dir + "/tiny.gguf", cfg);
    // Five samples: one of each needle variant (niah takes variant index % 5).
    const auto out =
        run_eval_json(dir, {"niah", "--model", dir + "/tiny.gguf", "--lengths", "900", "--samples",
                            "5", "--max-tokens", "4", "--threads", "2", "--policy", "full,sekv",
                            "--budget", "0.5", "--json", "--quiet"});
    ASSERT_TRUE(out.is_object());
    ASSERT_EQ(out["results"].size(), 10u);
    int expanded = 0, ranked = 0, in_spans = 0;
    for (const auto& j : out["results"]) {
        SCOPED_TRACE(j.dump());
        if (j["policy"] == "full") {
            EXPECT_FALSE(j.contains("expanded_share_median"));
            EXPECT_FALSE(j.contains("needle_mass"));
            continue;
        }
        ASSERT_GT(j.value("spans", int64_t{0}), 0);
        if (j["expansions"].get<double>() > 0) {
            ++expanded;
            ASSERT_TRUE(j.contains("expanded_share_median"));
            const double share = j["expanded_share_median"];
            EXPECT_GT(share, 0.0);
            EXPECT_LE(share, 1.0);
        }
        ASSERT_TRUE(j.contains("needle_mass"));
        const auto& m = j["needle_mass"];
        const int64_t tokens = m["tokens"], inside = m["in_spans"];
        EXPECT_GT(tokens, 0);
        EXPECT_GE(inside, 0);
        EXPECT_LE(inside, tokens);
        if (m["rank"].is_null()) {
            EXPECT_TRUE(m["top3"].is_null()); // unknown, not false, where nothing is ranked
        } else {
            ++ranked;
            const int64_t rank = m["rank"];
            EXPECT_GE(rank, 1);
            EXPECT_LE(rank, j["spans"].get<int64_t>());
            EXPECT_GT(inside, 0);
            EXPECT_EQ(m["top3"], rank <= 3);
        }
        in_spans += inside > 0;
    }
    EXPECT_GT(expanded, 0) << "the tiny model's sekv expanded nothing: the share is not checked";
    // On the CPU backend the mass is measured: a needle inside spans is ranked.
    EXPECT_EQ(ranked, in_spans);
    for (const auto& s : out["summaries"]) {
        if (s["policy"] != "sekv")
            continue;
        ASSERT_TRUE(s.contains("expanded_share_median")) << s.dump();
        EXPECT_GT(s["expanded_share_median"].get<double>(), 0.0);
        if (in_spans > 0) {
            EXPECT_EQ(s["needle_top3_samples"], in_spans);
            EXPECT_GE(s["needle_top3"].get<double>(), 0.0);
            EXPECT_LE(s["needle_top3"].get<double>(), 1.0);
        }
    }
    // Variable tracking has no asked needle: the share only.
    const auto vt =
        run_eval_json(dir, {"vt", "--model", dir + "/tiny.gguf", "--lengths", "900", "--samples",
                            "1", "--max-tokens", "4", "--threads", "2", "--policy", "sekv",
                            "--budget", "0.5", "--json", "--quiet"});
    ASSERT_TRUE(vt.is_object());
    for (const auto& j : vt["results"])
        EXPECT_FALSE(j.contains("needle_mass")) << j.dump();
    std::filesystem::remove_all(dir);
}
