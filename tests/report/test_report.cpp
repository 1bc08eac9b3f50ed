// spanscope-report: loading and aggregating evaluation results (JSON Lines) on hand-written
// input whose numbers are worked out below, and the built program on a small file: report.md
// with the expected cells, PNGs that load, have the expected size and are not one colour, and
// the exit codes of bad input and bad arguments.
#include "lab/report/report_data.h"
#include "lab/report/report_markdown.h"
#include "report_loading.h"
#include "report_program.h"

#include <QImage>
#include <QSet>
#include <QString>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

using namespace spanscope::report;
using namespace report_test;
namespace fs = std::filesystem;

namespace {

/// One result line; score and the optional parts as given.
std::string result(const std::string& task, const std::string& policy, double budget, int length,
                   double depth, int index, double score, const std::string& extra = "") {
    std::ostringstream s;
    s << R"({"task":")" << task << R"(","haystack":"prose","target_length":)" << length
      << R"(,"length":)" << length + 27 << R"(,"depth":)" << depth << R"(,"index":)" << index
      << R"(,"seed":1,"policy":")" << policy << R"(","budget":)" << budget
      << R"(,"question":"q","answer":"a","expected":["1"],"metric":"string_match_all","score":)"
      << score << extra << "}\n";
    return s.str();
}

std::string fast(double fraction, bool within = true) {
    std::ostringstream s;
    s << R"(,"fast_tier_fraction":)" << fraction << R"(,"within_budget":)"
      << (within ? "true" : "false");
    return s.str();
}

// The sample file. Task alpha:
//   full 4096: scores 1, 1, 0 → 2/3 = 66.7 %; Wilson (z = 1.96, z² = 3.8416):
//     centre = (p + z²/2n) / (1 + z²/n) = (0.6667 + 0.6403) / 2.2805 = 0.5731,
//     half = z / (1 + z²/n) · √(p(1−p)/n + z²/4n²) = 0.8594 · √(0.0741 + 0.1067) = 0.3654
//     → [20.8 %, 93.9 %].
//   full 8192: 1/1 → 100 %, Wilson [20.7 %, 100 %]; full, all lengths: 3/4 → 75 % [30.1, 95.4].
//   sekv@35% 4096: 1, 1, then the sample at depth 1.0 twice (0, then 1: the last wins) → 3/3,
//     Wilson [43.8 %, 100 %]; 8192: 0/1 → [0.0 %, 79.3 %]; fast tier 0.24, 0.26, 0.28, 0.30 →
//     mean 27.0 %; one sample over budget.
// Task beta (scores that are not 0 or 1): full 4096: 0.5, 1, 0.75 → mean 75 %, s = 0.25,
//   normal approximation 0.75 ± 1.96 · 0.25 / √3 = 0.75 ± 0.2829 → [46.7 %, 100 %] (clamped).
std::string sample_jsonl() {
    std::string s =
        R"({"command":"spanscope-lab eval niah --lengths 4096,8192","started":"2026-11-30T17:00:00Z","machine":"m1","threads":2,"commit":"abc123"})"
        "\n";
    s += result("alpha", "full", 1.0, 4096, 0.0, 0, 1, fast(1.0));
    s += result("alpha", "full", 1.0, 4096, 0.5, 1, 1, fast(1.0));
    s += result("alpha", "full", 1.0, 4096, 1.0, 2, 0, fast(1.0));
    s += result("alpha", "full", 1.0, 8192, 0.5, 0, 1, fast(1.0));
    const std::string fid =
        R"(,"fidelity":{"greedy_agreement":0.9,"top1_agreement":0.8,"kl":0.002})";
    s += result("alpha", "sekv", 0.35, 4096, 0.0, 0, 1, fast(0.24) + fid);
    s += result("alpha", "sekv", 0.35, 4096, 0.5, 1, 1, fast(0.26, false) + fid);
    s += result("alpha", "sekv", 0.35, 4096, 1.0, 2, 0, fast(0.99) + fid); // replaced below
    s += result("alpha", "sekv", 0.35, 8192, 0.5, 0, 0, fast(0.30) + fid);
    s += result("beta", "full", 1.0, 4096, 0.0, 0, 0.5, fast(1.0) + R"(,"unknown_key":[1,2])");
    s += result("beta", "full", 1.0, 4096, 0.5, 1, 1.0, fast(1.0));
    s += result("beta", "full", 1.0, 4096, 1.0, 2, 0.75, fast(1.0));
    s +=
        R"({"command":"spanscope-lab eval niah --lengths 4096,8192","started":"2026-12-01T09:00:00Z"})"
        "\n";
    s += result("alpha", "sekv", 0.35, 4096, 1.0, 2, 1, fast(0.28) + fid); // the resumed run
    return s;
}

LoadedResults load_text(const std::string& text, const std::string& name = "sample.jsonl") {
    return load_with<ResultLoader>(text, name);
}

/// The InputError message of loading text as "bad.jsonl" ("" when it loads).
std::string load_error(const std::string& text) {
    return load_error_with<ResultLoader>(text);
}

const Config kFull{"full", 1.0};
const Config kSekv35{"sekv", 0.35};

} // namespace

TEST(ReportData, WilsonIntervalMatchesHandComputedValues) {
    const Interval two_of_three = spanscope::eval::wilson_interval(2, 3);
    EXPECT_NEAR(two_of_three.low, 0.2077, 1e-4);
    EXPECT_NEAR(two_of_three.high, 0.9385, 1e-4);
    const Interval zero_of_one = spanscope::eval::wilson_interval(0, 1);
    EXPECT_DOUBLE_EQ(zero_of_one.low, 0.0);
    EXPECT_NEAR(zero_of_one.high, 0.7935, 1e-4);
    EXPECT_DOUBLE_EQ(spanscope::eval::wilson_interval(3, 3).high, 1.0);
    EXPECT_EQ(accuracy_cell(accuracy_of({1, 1, 0})), "66.7 % [20.8\u201393.9] (3)");
}

TEST(ReportData, NonBinaryScoresUseTheNormalApproximation) {
    const Accuracy a = accuracy_of({0.5, 1.0, 0.75});
    EXPECT_FALSE(a.binary);
    EXPECT_DOUBLE_EQ(a.mean, 0.75);
    EXPECT_NEAR(a.ci.low, 0.75 - 1.96 * 0.25 / std::sqrt(3.0), 1e-12);
    EXPECT_DOUBLE_EQ(a.ci.high, 1.0); // 1.0329 clamped
    const Accuracy one = accuracy_of({0.5});
    EXPECT_DOUBLE_EQ(one.ci.low, 0.0);
    EXPECT_DOUBLE_EQ(one.ci.high, 1.0);
}

TEST(ReportData, AggregatesPerTaskConfigurationAndLength) {
    const LoadedResults loaded = load_text(sample_jsonl());
    EXPECT_EQ(loaded.result_lines, 12);
    EXPECT_EQ(loaded.rows.size(), 11u);
    EXPECT_EQ(loaded.duplicates, 1);
    ASSERT_EQ(loaded.runs.size(), 1u); // the same command twice
    EXPECT_EQ(loaded.runs[0].occurrences, 2);
    EXPECT_EQ(loaded.runs[0].commit, "abc123");

    const Report report = aggregate(loaded);
    ASSERT_EQ(report.tasks.size(), 2u);
    const TaskTable& alpha = report.tasks[0];
    EXPECT_EQ(alpha.task, "alpha");
    EXPECT_EQ(alpha.lengths, (std::vector<int>{4096, 8192}));
    EXPECT_EQ(alpha.depths, (std::vector<int>{0, 50, 100}));
    ASSERT_EQ(alpha.rows.size(), 2u);
    EXPECT_EQ(alpha.rows[0].config.label(), "full");
    EXPECT_EQ(alpha.rows[1].config.label(), "sekv@35%");

    const ConfigRow& full = alpha.rows[0];
    EXPECT_EQ(accuracy_cell(full.by_length.at(4096)), "66.7 % [20.8\u201393.9] (3)");
    EXPECT_EQ(accuracy_cell(full.by_length.at(8192)), "100.0 % [20.7\u2013100.0] (1)");
    EXPECT_EQ(accuracy_cell(full.all), "75.0 % [30.1\u201395.4] (4)");
    const ConfigRow& sekv = alpha.rows[1];
    // The duplicate counted once, with the last line's score.
    EXPECT_EQ(accuracy_cell(sekv.by_length.at(4096)), "100.0 % [43.8\u2013100.0] (3)");
    EXPECT_EQ(accuracy_cell(sekv.by_length.at(8192)), "0.0 % [0.0\u201379.3] (1)");
    ASSERT_TRUE(sekv.mean_fast_tier);
    EXPECT_NEAR(*sekv.mean_fast_tier, 0.27, 1e-12);
    EXPECT_EQ(sekv.over_budget, 1);
    EXPECT_EQ(sekv.by_cell.at({4096, 100}).n, 1);
    EXPECT_DOUBLE_EQ(sekv.by_cell.at({4096, 100}).mean, 1.0);

    EXPECT_EQ(accuracy_cell(report.tasks[1].rows[0].all), "75.0 % [46.7\u2013100.0] (3)");

    ASSERT_EQ(report.fidelity.size(), 1u); // full has none
    EXPECT_EQ(report.fidelity[0].config, kSekv35);
    EXPECT_EQ(report.fidelity[0].n, 4);
    EXPECT_DOUBLE_EQ(*report.fidelity[0].kl, 0.002);
}

/// One pic-eval line.
std::string pic(int length, int docs, int index, const std::string& selector, double ratio,
                double score, double cold, double ttft_ratio, const std::string& extra = "") {
    std::ostringstream s;
    s << R"({"task":"niah","target_length":)" << length << R"(,"documents":)" << docs
      << R"(,"depth":0.5,"index":)" << index << R"(,"seed":1,"selector":")" << selector
      << R"(","ratio":)" << ratio << R"(,"score":)" << score << R"(,"score_cold":)" << cold
      << R"(,"ttft_ratio":)" << ttft_ratio << extra << "}\n";
    return s.str();
}

// 4096 tokens, 2 documents: cold 1, 1; none 0, 1 → 50 % of cold's 100 % recovered; epic@20%
// 1 (ttft 0.2), then sample 1 at 0 (ttft 0.4) replaced by 1 (ttft 0.3): 100 % recovered at
// 0.25 of the cold time to first token, recompute share (0.2 + 0.2) / 2; cacheblend@20% 0 at
// 0.1: nothing recovered. 8192 tokens, 4 documents: cold 0, none 0: no quality to recover.
// Pooled: none 0, 1, 0 → 33.3 % against cold 2/3: 50 % recovered.
TEST(ReportData, PositionIndependentCachingRowsAreAggregatedAgainstTheColdPrefill) {
    const std::string share = R"(,"recompute_share":0.2,"fidelity":{"top1_agreement":1,"kl":0})";
    const std::string text =
        pic(4096, 2, 0, "cold", 0, 1, 1, 1) + pic(4096, 2, 1, "cold", 0, 1, 1, 1) +
        pic(4096, 2, 0, "none", 0, 0, 1, 0.05) + pic(4096, 2, 1, "none", 0, 1, 1, 0.05) +
        pic(4096, 2, 0, "epic", 0.2, 1, 1, 0.2, share) +
        pic(4096, 2, 1, "epic", 0.2, 0, 1, 0.4, share) +
        pic(4096, 2, 1, "epic", 0.2, 1, 1, 0.3, share) +
        pic(4096, 2, 0, "cacheblend", 0.2, 0, 1, 0.1) + pic(8192, 4, 0, "cold", 0, 0, 0, 1) +
        pic(8192, 4, 0, "none", 0, 0, 0, 0.02);
    const LoadedResults loaded = load_text(text);
    EXPECT_TRUE(loaded.rows.empty());
    EXPECT_EQ(loaded.pic_rows.size(), 9u);
    EXPECT_EQ(loaded.duplicates, 1);
    const Report report = aggregate(loaded);
    ASSERT_EQ(report.pic.groups.size(), 2u);
    const auto& g = report.pic.groups[0];
    EXPECT_EQ(g.target_length, 4096);
    EXPECT_EQ(g.documents, 2);
    ASSERT_EQ(g.cells.size(), 4u);
    EXPECT_EQ(pic_label(g.cells[0].selector, g.cells[0].ratio), "cold");
    EXPECT_EQ(pic_label(g.cells[1].selector, g.cells[1].ratio), "none");
    EXPECT_EQ(pic_label(g.cells[2].selector, g.cells[2].ratio), "epic@20%");
    EXPECT_EQ(pic_label(g.cells[3].selector, g.cells[3].ratio), "cacheblend@20%");
    EXPECT_DOUBLE_EQ(*g.cells[1].recovered, 0.5);
    const auto& epic = g.cells[2];
    EXPECT_EQ(epic.n, 2);
    EXPECT_DOUBLE_EQ(*epic.recovered, 1.0);
    EXPECT_DOUBLE_EQ(epic.ttft_ratio, 0.25);
    EXPECT_DOUBLE_EQ(*epic.recompute_share, 0.2);
    EXPECT_DOUBLE_EQ(*epic.kl, 0.0);
    EXPECT_DOUBLE_EQ(*g.cells[3].recovered, 0.0);
    EXPECT_FALSE(report.pic.groups[1].cells[1].recovered); // the cold prefill scored 0
    const auto& pooled_none = report.pic.pooled[1];
    EXPECT_EQ(pooled_none.n, 3);
    EXPECT_NEAR(*pooled_none.recovered, 0.5, 1e-12);

    const std::string md = render_markdown(loaded, report, "T", {});
    EXPECT_NE(md.find("## Position-independent caching (LinearKV)"), std::string::npos);
    EXPECT_NE(md.find("| epic@20% | 100.0 % [34.2\u2013100.0] (2) | 100.0 % | 100.0 % | 0.25 | "
                      "20.0 % | \u2013 | 100.0 % | 0.000 | met |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| cacheblend@20% | 0.0 % [0.0\u201379.3] (1) | 100.0 % | 0.0 % | 0.10 |"),
              std::string::npos);
    EXPECT_NE(md.find("missed (quality) |"), std::string::npos);

    EXPECT_EQ(
        load_error(pic(4096, 2, 0, "epic", 1.5, 1, 1, 0.2)).rfind("bad.jsonl:1: \"ratio\"", 0), 0u);
    EXPECT_EQ(
        load_error(pic(4096, 0, 0, "epic", 0.2, 1, 1, 0.2)).rfind("bad.jsonl:1: \"documents\"", 0),
        0u);
}

TEST(ReportData, MalformedLinesNameFileAndLine) {
    const std::string good = result("t", "full", 1.0, 4096, 0.5, 0, 1);
    EXPECT_EQ(load_error(good + good), "");
    std::string e = load_error(good + "\n" + "{\"task\": \"t\", \"policy\": \n");
    EXPECT_EQ(e.rfind("bad.jsonl:3: not valid JSON", 0), 0u) << e;
    e = load_error(good + R"({"task":"t","policy":"full","budget":1})" + "\n");
    EXPECT_EQ(e.rfind("bad.jsonl:2: result line without \"haystack\"", 0), 0u) << e;
    e = load_error(result("t", "full", 1.0, 4096, 0.5, 0, 1.5));
    EXPECT_EQ(e, "bad.jsonl:1: \"score\" 1.5 is outside [0, 1]");
    e = load_error(good + "[1, 2]\n");
    EXPECT_EQ(e, "bad.jsonl:2: not a JSON object");
    e = load_error(good + R"({"started":"x"})" + "\n");
    EXPECT_EQ(e.rfind("bad.jsonl:2: neither a result", 0), 0u) << e;
    e = load_error(result("t", "sekv", 0.35, 4096, 0.5, 0, 1, R"(,"within_budget":"yes")"));
    EXPECT_EQ(e, "bad.jsonl:1: \"within_budget\" is not true or false");
    e = load_error(R"({"command":"spanscope-lab eval"})"
                   "\n");
    EXPECT_EQ(e, "no result rows in the input");
}

TEST(ReportData, ConfigurationsAreOrderedFullThenBudgetThenPolicy) {
    std::vector<Config> cs = {{"streaming", 0.2},      {"zeta", 0.35},   {"h2o", 0.35},
                              {"sekv", 0.2},           {"snapkv", 0.35}, {"full", 1.0},
                              {"chunk_summary", 0.35}, {"sekv", 0.35}};
    std::sort(cs.begin(), cs.end(), config_before);
    std::vector<std::string> labels;
    for (const auto& c : cs)
        labels.push_back(c.label());
    EXPECT_EQ(labels,
              (std::vector<std::string>{"full", "sekv@35%", "chunk_summary@35%", "snapkv@35%",
                                        "h2o@35%", "zeta@35%", "sekv@20%", "streaming@20%"}));
    EXPECT_EQ((Config{"snapkv", 0.125}).label(), "snapkv@12.5%");
}

// Two tasks, one sample per (task, configuration), scores as accuracies:
//           full  sekv@35  snapkv@35  h2o@35 | sekv@20  streaming@20
//   A       1.0   0.8      0.6        0.4    | 0.5      0.3
//   B       0.9   0.6      0.2        0.5    | —        0.1
// Macro at 35 %: full 0.95, sekv 0.70, snapkv 0.40, h2o 0.45 → best baseline h2o,
// sekv − h2o = +25.0 points, sekv − full = −25.0 points. At 20 % sekv has task A only: the
// differences are over A: sekv − streaming = 0.5 − 0.3 = +20.0, sekv − full = 0.5 − 1.0 = −50.0.
TEST(ReportData, SummaryMacroAverageAndSekvAgainstBestBaseline) {
    std::string s;
    auto add = [&](const std::string& task, const std::string& policy, double budget, double v) {
        s += result(task, policy, budget, 4096, 0.5, 0, v, fast(budget));
    };
    add("A", "full", 1.0, 1.0), add("A", "sekv", 0.35, 0.8), add("A", "snapkv", 0.35, 0.6);
    add("A", "h2o", 0.35, 0.4), add("A", "sekv", 0.2, 0.5), add("A", "streaming", 0.2, 0.3);
    add("B", "full", 1.0, 0.9), add("B", "sekv", 0.35, 0.6), add("B", "snapkv", 0.35, 0.2);
    add("B", "h2o", 0.35, 0.5), add("B", "streaming", 0.2, 0.1);
    const Report report = aggregate(load_text(s));
    ASSERT_EQ(report.budgets.size(), 2u);

    const BudgetSummary& b35 = report.budgets[0];
    EXPECT_DOUBLE_EQ(b35.budget, 0.35);
    ASSERT_EQ(b35.entries.size(), 4u);
    EXPECT_EQ(b35.entries[0].config, kFull);
    EXPECT_NEAR(b35.entries[0].macro_accuracy, 0.95, 1e-12);
    EXPECT_NEAR(b35.entries[1].macro_accuracy, 0.70, 1e-12);
    EXPECT_NEAR(b35.entries[2].macro_accuracy, 0.40, 1e-12); // snapkv
    EXPECT_NEAR(b35.entries[3].macro_accuracy, 0.45, 1e-12); // h2o
    ASSERT_TRUE(b35.sekv_minus_best_baseline);
    EXPECT_EQ(b35.sekv_minus_best_baseline->other, "h2o@35%");
    EXPECT_EQ(points(b35.sekv_minus_best_baseline->value), "+25.0 points");
    ASSERT_TRUE(b35.sekv_minus_full);
    EXPECT_EQ(points(b35.sekv_minus_full->value), "\u221225.0 points");

    const BudgetSummary& b20 = report.budgets[1];
    EXPECT_DOUBLE_EQ(b20.budget, 0.2);
    EXPECT_EQ(b20.sekv_minus_best_baseline->other, "streaming@20%");
    EXPECT_EQ(b20.sekv_minus_best_baseline->common_tasks, 1);
    EXPECT_TRUE(b20.sekv_minus_best_baseline->partial); // streaming has B too
    EXPECT_FALSE(b35.sekv_minus_best_baseline->partial);
    EXPECT_EQ(points(b20.sekv_minus_best_baseline->value), "+20.0 points");
    EXPECT_EQ(points(b20.sekv_minus_full->value), "\u221250.0 points");

    // The accuracy-vs-memory points over all tasks: macro averages of x and y.
    const auto pts = macro_memory_points(report);
    ASSERT_FALSE(pts.empty());
    EXPECT_EQ(pts[0].config, kFull);
    EXPECT_NEAR(pts[0].accuracy, 0.95, 1e-12);
    EXPECT_NEAR(pts[0].fast_tier, 1.0, 1e-12);
}

// Differences pair the samples. Task A, samples at depths 0, 0.5, 1 (one length, one seed):
//   full      1    1    1
//   sekv      1    0    1
//   snapkv    0    0    —   (no line at depth 1: unpaired)
// Task B, depths 0 and 0.5: full 1 1, sekv 1 1, snapkv 0 0.
// sekv − snapkv: A differences 1, 0 → mean 0.5, s² = 0.5, n 2; B differences 1, 1 → mean 1,
//   no spread seen: s² = 1/n = 0.5, n 2. Macro (0.5 + 1) / 2 = +75.0 points, half-width
//   1.96 · √(0.5/2 + 0.5/2) / 2 = 0.69296 → [+5.7, +144.3] clamped to [+5.7, +100.0]; one
//   unpaired sample. (Pooled accuracies would give A 2/3 − 0 instead of 0.5.)
// sekv − full: A differences 0, −1, 0 → −1/3, s² = 1/3, n 3; B 0, 0 → s² = 1/2, n 2.
//   Macro −1/6, half-width 1.96 · √(1/9 + 1/4) / 2 = 0.58891.
TEST(ReportData, DifferencesArePairedBySampleWithAnInterval) {
    std::string s;
    auto add = [&](const std::string& task, const std::string& policy, double depth, double v) {
        const double budget = policy == "full" ? 1.0 : 0.35;
        s += result(task, policy, budget, 4096, depth, 0, v, fast(policy == "full" ? 1.0 : 0.3));
    };
    add("A", "full", 0, 1), add("A", "full", 0.5, 1), add("A", "full", 1, 1);
    add("A", "sekv", 0, 1), add("A", "sekv", 0.5, 0), add("A", "sekv", 1, 1);
    add("A", "snapkv", 0, 0), add("A", "snapkv", 0.5, 0);
    add("B", "full", 0, 1), add("B", "full", 0.5, 1), add("B", "sekv", 0, 1);
    add("B", "sekv", 0.5, 1), add("B", "snapkv", 0, 0), add("B", "snapkv", 0.5, 0);
    const Report report = aggregate(load_text(s));
    ASSERT_EQ(report.budgets.size(), 1u);
    const auto& base = report.budgets[0].sekv_minus_best_baseline;
    ASSERT_TRUE(base);
    EXPECT_EQ(base->other, "snapkv@35%");
    EXPECT_NEAR(base->value, 0.75, 1e-12);
    EXPECT_NEAR(base->ci.low, 0.75 - 1.96 * std::sqrt(0.5) / 2, 1e-12);
    EXPECT_EQ(base->ci.high, 1.0) << "clamped";
    EXPECT_EQ(base->paired_samples, 4);
    EXPECT_EQ(base->unpaired_samples, 1);
    EXPECT_EQ(base->common_tasks, 2);
    EXPECT_TRUE(base->partial);
    const auto& full = report.budgets[0].sekv_minus_full;
    ASSERT_TRUE(full);
    EXPECT_NEAR(full->value, -1.0 / 6.0, 1e-12);
    EXPECT_NEAR(full->ci.high - full->value, 1.96 * std::sqrt(1.0 / 9.0 + 0.25) / 2.0, 1e-12);
    EXPECT_EQ(full->paired_samples, 5);
    EXPECT_FALSE(full->partial);
    const std::string md = render_markdown(load_text(s), report, "t", {});
    EXPECT_NE(md.find("- sekv \u2212 best baseline (snapkv@35%): **+75.0 points** [95 % CI +5.7 to "
                      "+100.0] over 4 paired samples in 2 tasks; left out: 1 sample without a "
                      "partner\n"),
              std::string::npos)
        << md;
}

// The best baseline is chosen among the baselines measured on every task sekv was: h2o, on
// task A only, where sekv is weak, does not win over streaming, measured on A and B.
//   A: sekv 0, h2o 1, streaming 0;  B: sekv 1, streaming 0.
// sekv − h2o = −1 (A only), sekv − streaming = (0 + 1) / 2 = +0.5.
TEST(ReportData, TheBestBaselineCoversSekvsTasks) {
    std::string s;
    auto add = [&](const std::string& task, const std::string& policy, double v) {
        s += result(task, policy, 0.35, 4096, 0.5, 0, v, fast(0.3));
    };
    add("A", "sekv", 0), add("A", "h2o", 1), add("A", "streaming", 0);
    add("B", "sekv", 1), add("B", "streaming", 0);
    const Report report = aggregate(load_text(s));
    ASSERT_EQ(report.budgets.size(), 1u);
    const auto& base = report.budgets[0].sekv_minus_best_baseline;
    ASSERT_TRUE(base);
    EXPECT_EQ(base->other, "streaming@35%");
    EXPECT_NEAR(base->value, 0.5, 1e-12);
}

// One configuration measured with two settings (another model, another answer length) is
// refused: pooled, its samples would be counted twice.
TEST(ReportData, OneConfigurationWithTwoSettingsIsRefused) {
    const std::string a = result("A", "sekv", 0.35, 4096, 0, 0, 1, R"(,"settings":"m1")");
    const std::string b = result("A", "sekv", 0.35, 4096, 0, 0, 0, R"(,"settings":"m2")");
    try {
        load_text(a + b);
        FAIL() << "two settings were pooled";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(":2: sekv@35% measured with other settings"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_NO_THROW(load_text(a + result("A", "sekv", 0.2, 4096, 0, 0, 0, R"(,"settings":"m2")")));
}

// SEKV's trained router (issue 8) is its own configuration: it is never the best baseline, it
// is compared with the training-free sekv, and its expansions per token are averaged.
TEST(ReportData, TrainedRouterIsComparedWithTheTrainingFreeOne) {
    std::string s;
    auto add = [&](const std::string& task, const std::string& policy, double v,
                   const std::string& extra) {
        s += result(task, policy, policy == "full" ? 1.0 : 0.35, 4096, 0.5, 0, v,
                    fast(policy == "full" ? 1.0 : 0.3) + extra);
    };
    const std::string trained =
        R"(,"router":"trained","zoom_digest":"0123456789abcdef","tau":"calibrated")";
    add("A", "full", 1.0, ""), add("A", "sekv", 0.6, R"(,"expansions":4.0)");
    add("A", "sekv", 0.9, trained + R"(,"expansions":2.0)");
    add("A", "snapkv", 0.2, "");
    add("B", "full", 1.0, ""),
        add("B", "sekv", 0.5, R"(,"router":"training-free","expansions":6.0)");
    add("B", "sekv", 0.6, trained + R"(,"expansions":3.0)");
    const Report report = aggregate(load_text(s));
    ASSERT_EQ(report.budgets.size(), 1u);
    const BudgetSummary& b = report.budgets[0];
    // Macro accuracy: sekv (0.6 + 0.5) / 2 = 0.55, sekv-trained (0.9 + 0.6) / 2 = 0.75.
    ASSERT_EQ(b.router_comparisons.size(), 1u);
    EXPECT_EQ(b.router_comparisons[0].training_free.label(), "sekv@35%");
    EXPECT_EQ(points(b.router_comparisons[0].accuracy.value), "+20.0 points");
    // Paired expansions: (2 + 3) / 2 = 2.5 against (4 + 6) / 2 = 5.
    EXPECT_EQ(b.router_comparisons[0].paired_expansions, 2);
    EXPECT_DOUBLE_EQ(b.router_comparisons[0].trained_expansions, 2.5);
    EXPECT_DOUBLE_EQ(b.router_comparisons[0].training_free_expansions, 5.0);
    ASSERT_TRUE(b.sekv_minus_best_baseline);
    EXPECT_EQ(b.sekv_minus_best_baseline->other, "snapkv@35%");
    // Expansions per token: sekv (4 + 6) / 2 = 5, sekv-trained (2 + 3) / 2 = 2.5.
    std::map<std::string, double> expansions;
    for (const auto& f : report.fidelity)
        if (f.expansions)
            expansions[f.config.label()] = *f.expansions;
    EXPECT_EQ(expansions,
              (std::map<std::string, double>{{"sekv@35%", 5.0}, {"sekv-trained@35%", 2.5}}));
    const std::string md = render_markdown(load_text(s), report, "t", {});
    EXPECT_NE(md.find("- sekv-trained \u2212 training-free sekv (sekv@35%): **+20.0 points**"),
              std::string::npos)
        << md;
    EXPECT_NE(
        md.find("; expansions per token 2.50 against 5.00 (\u221250.0 %) on 2 paired samples"),
        std::string::npos)
        << md;
    EXPECT_NE(md.find("| 2.50 |"), std::string::npos);

    // Lines of a second parameter file would be averaged into the same configuration: refused,
    // naming both digests.
    add("B", "sekv", 0.7, R"(,"router":"trained","zoom_digest":"fedcba9876543210")");
    try {
        load_text(s);
        ADD_FAILURE() << "two parameter files were mixed";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("fedcba9876543210"), std::string::npos) << what;
        EXPECT_NE(what.find("0123456789abcdef"), std::string::npos) << what;
    }

    // The learned thresholds (--learned-tau; a line without "tau" had them) are another
    // configuration, not averaged into sekv-trained; an unknown rule is refused.
    std::string t;
    auto line = [&](const std::string& tau) {
        return result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                      fast(0.3) + R"(,"router":"trained","zoom_digest":"0123456789abcdef")" + tau);
    };
    std::set<std::string> policies;
    for (const auto& r :
         load_text(line(R"(,"tau":"calibrated")") + line(R"(,"tau":"learned")") + line("")).rows)
        policies.insert(r.policy);
    EXPECT_EQ(policies, (std::set<std::string>{"sekv-trained", "sekv-trained-learned-tau"}));
    EXPECT_EQ(load_text(line("")).rows.at(0).policy, "sekv-trained-learned-tau");
    EXPECT_THROW(load_text(line(R"(,"tau":"guessed")")), InputError);
    // τ per query (either router) and the trained router without its rank gate: their own
    // configurations too.
    policies.clear();
    const std::string free_pq =
        result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
               fast(0.3) + R"(,"router":"training-free","tau":"per_query")");
    for (const auto& r : load_text(line(R"(,"tau":"per_query")") +
                                   line(R"(,"tau":"calibrated","rank_gate":"energy")") + free_pq)
                             .rows)
        policies.insert(r.policy);
    EXPECT_EQ(policies, (std::set<std::string>{"sekv-trained-tau-per-query",
                                               "sekv-trained-full-rank", "sekv-tau-per-query"}));
    EXPECT_THROW(load_text(line(R"(,"tau":"calibrated","rank_gate":"trained")")), InputError);
    // The oracle router: its own configuration, with τ per query only.
    const std::string oracle = R"(,"router":"oracle")";
    EXPECT_EQ(load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                               fast(0.3) + oracle + R"(,"tau":"per_query")"))
                  .rows.at(0)
                  .policy,
              "sekv-oracle-tau-per-query");
    EXPECT_THROW(load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0, fast(0.3) + oracle)),
                 InputError);
    // A router the report does not know is refused, not pooled with the training-free one.
    EXPECT_THROW(load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                                  fast(0.3) + R"(,"router":"learned","tau":"per_query")")),
                 InputError);
    // Lines measured before "tau" and "rank_gate" said so: their settings do. A full line of
    // the same run (the settings are shared) stays full.
    policies.clear();
    const std::string pq_settings = R"(,"settings":"m.gguf max_tokens=0 tau=per_query")";
    for (const auto& r :
         load_text(line(R"(,"tau":"calibrated")" + pq_settings) +
                   line(R"(,"tau":"calibrated","settings":"m.gguf max_tokens=0 rank=full")") +
                   result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                          fast(0.3) + R"(,"router":"training-free")" + pq_settings) +
                   result("A", "full", 1.0, 4096, 0.5, 0, 1.0, pq_settings))
             .rows)
        policies.insert(r.policy);
    EXPECT_EQ(policies,
              (std::set<std::string>{"sekv-trained-tau-per-query", "sekv-trained-full-rank",
                                     "sekv-tau-per-query", "full"}));
    // Plain-mean summary rows (eval --summary-weights uniform): the spans' policies only are
    // another configuration; a full line of the same run stays full.
    policies.clear();
    const std::string uniform =
        R"(,"settings":"m.gguf max_tokens=0 tau=per_query summary=uniform")";
    for (const auto& r :
         load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                          fast(0.3) + R"(,"router":"training-free")" + uniform) +
                   result("A", "chunk_summary", 0.35, 4096, 0.5, 0, 1.0, fast(0.3) + uniform) +
                   result("A", "full", 1.0, 4096, 0.5, 0, 1.0, uniform))
             .rows)
        policies.insert(r.policy);
    EXPECT_EQ(policies, (std::set<std::string>{"sekv-tau-per-query-uniform-summary",
                                               "chunk_summary-uniform-summary", "full"}));
    // Two-stage routing (eval --rerank N): the sekv lines only, one configuration for each N.
    policies.clear();
    auto rerank = [](const std::string& n) {
        return R"(,"settings":"m.gguf max_tokens=0 tau=per_query rerank=)" + n + R"(")";
    };
    for (const auto& r :
         load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                          fast(0.3) + R"(,"router":"training-free")" + rerank("4")) +
                   result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                          fast(0.3) + R"(,"router":"training-free")" + rerank("16")) +
                   result("A", "full", 1.0, 4096, 0.5, 0, 1.0, rerank("4")))
             .rows)
        policies.insert(r.policy);
    EXPECT_EQ(policies, (std::set<std::string>{"sekv-tau-per-query-rerank4",
                                               "sekv-tau-per-query-rerank16", "full"}));
    // A malformed or out-of-range N is refused, as is an oracle line with it.
    for (const std::string bad : {"1", "65", "x", "4x", ""})
        EXPECT_THROW(load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                                      fast(0.3) + R"(,"router":"training-free")" + rerank(bad))),
                     InputError)
            << bad;
    EXPECT_THROW(
        load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                         fast(0.3) + R"(,"router":"oracle","tau":"per_query")" + rerank("4"))),
        InputError);
    // Two-stage routing takes its candidates by τ per query: a line without it is refused.
    EXPECT_THROW(load_text(result("A", "sekv", 0.35, 4096, 0.5, 0, 1.0,
                                  fast(0.3) + R"(,"router":"training-free","settings":"m.gguf )"
                                              R"(max_tokens=0 rerank=4")")),
                 InputError);
}

// The comparison of `policy` at the report's first budget, or nullptr.
const RouterComparison* comparison_of(const Report& report, const std::string& policy) {
    for (const auto& c : report.budgets.at(0).router_comparisons)
        if (c.trained.policy == policy)
            return &c;
    return nullptr;
}

// Each trained configuration is compared with the training-free one of its τ rule, on the
// samples both answered; expansions and KL are paired too (a sample only one of them answered
// is left out of both means).
TEST(ReportData, EachTrainedRouterIsComparedWithTheTrainingFreeOneOfItsTauRule) {
    const std::string pq = R"(,"tau":"per_query")";
    const std::string trained = R"(,"router":"trained","zoom_digest":"0123456789abcdef")";
    auto line = [&](int index, double score, const std::string& router, double exp, double kl) {
        std::ostringstream extra;
        extra << fast(0.3) << router << R"(,"expansions":)" << exp << R"(,"fidelity":{"kl":)" << kl
              << "}";
        return result("A", "sekv", 0.35, 4096, 0.5, index, score, extra.str());
    };
    std::string s;
    // τ per query: trained 1, 1, 0 on samples 0–2 (sample 2 unpaired); training-free 0, 1 and 1
    // on sample 3 (unpaired).
    s += line(0, 1.0, trained + R"(,"tau":"per_query")", 3.0, 0.2);
    s += line(1, 1.0, trained + R"(,"tau":"per_query")", 5.0, 0.4);
    s += line(2, 0.0, trained + R"(,"tau":"per_query")", 100.0, 9.0);
    s += line(0, 0.0, R"(,"router":"training-free")" + pq, 2.0, 0.1);
    s += line(1, 1.0, R"(,"router":"training-free")" + pq, 2.0, 0.3);
    s += line(3, 1.0, R"(,"router":"training-free")" + pq, 50.0, 5.0);
    // τ on the question: trained 0 and training-free 1 on sample 0.
    s += line(0, 0.0, trained + R"(,"tau":"calibrated")", 8.0, 0.5);
    s += line(0, 1.0, R"(,"router":"training-free")", 4.0, 0.25);
    const Report report = aggregate(load_text(s));
    ASSERT_EQ(report.budgets.size(), 1u);
    const auto& cmp = report.budgets[0].router_comparisons;
    ASSERT_EQ(cmp.size(), 2u);
    std::map<std::string, const RouterComparison*> by;
    for (const auto& c : cmp)
        by[c.trained.policy] = &c;
    ASSERT_TRUE(by.count("sekv-trained") && by.count("sekv-trained-tau-per-query"));
    const RouterComparison& q = *by["sekv-trained-tau-per-query"];
    EXPECT_EQ(q.training_free.policy, "sekv-tau-per-query");
    EXPECT_EQ(q.accuracy.paired_samples, 2);
    EXPECT_EQ(q.accuracy.unpaired_samples, 2);
    EXPECT_EQ(points(q.accuracy.value), "+50.0 points"); // (1 − 0 + 1 − 1) / 2
    EXPECT_EQ(q.paired_expansions, 2);
    EXPECT_DOUBLE_EQ(q.trained_expansions, 4.0);       // (3 + 5) / 2
    EXPECT_DOUBLE_EQ(q.training_free_expansions, 2.0); // (2 + 2) / 2
    EXPECT_EQ(q.paired_kl, 2);
    EXPECT_DOUBLE_EQ(q.trained_kl, 0.3);
    EXPECT_DOUBLE_EQ(q.training_free_kl, 0.2);
    const RouterComparison& c = *by["sekv-trained"];
    EXPECT_EQ(c.training_free.policy, "sekv");
    EXPECT_EQ(points(c.accuracy.value), "\u2212100.0 points");
    EXPECT_DOUBLE_EQ(c.trained_expansions, 8.0);
    EXPECT_DOUBLE_EQ(c.training_free_expansions, 4.0);

    const std::string md = render_markdown(load_text(s), report, "t", {});
    EXPECT_NE(md.find("- sekv-trained-tau-per-query \u2212 training-free sekv "
                      "(sekv-tau-per-query@35%): **+50.0 points**"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("; expansions per token 4.00 against 2.00 (+100.0 %) on 2 paired samples; "
                      "KL 0.3000 against 0.2000 nats (+50.0 %) on 2 paired samples"),
              std::string::npos)
        << md;

    EXPECT_EQ(training_free_partner("sekv-trained-learned-tau"), "sekv");
    EXPECT_EQ(training_free_partner("sekv-trained-full-rank"), "sekv");
    EXPECT_EQ(training_free_partner("sekv-trained-full-rank-tau-per-query"), "sekv-tau-per-query");
    EXPECT_EQ(training_free_partner("sekv-tau-per-query"), std::nullopt);
    EXPECT_EQ(training_free_partner("sekv-oracle-tau-per-query"), "sekv-tau-per-query");
    EXPECT_EQ(md.find("The oracle router"), std::string::npos) << md; // none measured

    // The oracle router is compared with the training-free one of τ per query as well, and the
    // report says what it is.
    std::string o = s;
    o += line(0, 1.0, R"(,"router":"oracle")" + pq, 2.0, 0.05);
    o += line(1, 1.0, R"(,"router":"oracle")" + pq, 4.0, 0.15);
    const Report with_oracle = aggregate(load_text(o));
    const RouterComparison* oc = comparison_of(with_oracle, "sekv-oracle-tau-per-query");
    ASSERT_NE(oc, nullptr);
    EXPECT_EQ(oc->training_free.policy, "sekv-tau-per-query");
    EXPECT_EQ(oc->accuracy.paired_samples, 2);
    EXPECT_EQ(points(oc->accuracy.value), "+50.0 points"); // (1 − 0 + 1 − 1) / 2: not itself
    EXPECT_DOUBLE_EQ(oc->trained_kl, 0.1);
    EXPECT_DOUBLE_EQ(oc->trained_expansions, 3.0);
    EXPECT_DOUBLE_EQ(oc->training_free_kl, 0.2);
    const std::string omd = render_markdown(load_text(o), with_oracle, "t", {});
    EXPECT_NE(omd.find("The oracle router (sekv-oracle…) is compared"), std::string::npos) << omd;
    EXPECT_NE(omd.find("- sekv-oracle-tau-per-query \u2212 training-free sekv"), std::string::npos)
        << omd;
    EXPECT_EQ(training_free_partner("snapkv"), std::nullopt);

    // Plain-mean summary rows: the training-free router against the design's summary rows of
    // its τ rule, the oracle against the training-free router of plain-mean rows.
    EXPECT_EQ(training_free_partner("sekv-tau-per-query-uniform-summary"), "sekv-tau-per-query");
    EXPECT_EQ(training_free_partner("sekv-uniform-summary"), "sekv");
    EXPECT_EQ(training_free_partner("sekv-oracle-tau-per-query-uniform-summary"),
              "sekv-tau-per-query-uniform-summary");
    EXPECT_EQ(training_free_partner("chunk_summary-uniform-summary"), std::nullopt);
    // `s` with the training-free router of τ per query and `settings` right on samples 0 and 1,
    // with these expansions and KL.
    auto with_training_free = [&](const std::string& settings, double exp0, double kl0, double exp1,
                                  double kl1) {
        const std::string router = R"(,"router":"training-free")" + pq + settings;
        return s + line(0, 1.0, router, exp0, kl0) + line(1, 1.0, router, exp1, kl1);
    };
    const std::string us = R"(,"settings":"m.gguf max_tokens=0 tau=per_query summary=uniform")";
    const std::string u = with_training_free(us, 1.0, 0.1, 4.0, 0.5);
    const Report with_uniform = aggregate(load_text(u));
    const RouterComparison* uc = comparison_of(with_uniform, "sekv-tau-per-query-uniform-summary");
    ASSERT_NE(uc, nullptr);
    EXPECT_EQ(uc->training_free.policy, "sekv-tau-per-query");
    EXPECT_EQ(uc->accuracy.paired_samples, 2);
    EXPECT_EQ(points(uc->accuracy.value), "+50.0 points"); // (1 − 0 + 1 − 1) / 2
    EXPECT_DOUBLE_EQ(uc->trained_expansions, 2.5);         // (1 + 4) / 2
    EXPECT_DOUBLE_EQ(uc->training_free_expansions, 2.0);   // (2 + 2) / 2
    EXPECT_DOUBLE_EQ(uc->trained_kl, 0.3);                 // (0.1 + 0.5) / 2
    EXPECT_DOUBLE_EQ(uc->training_free_kl, 0.2);           // (0.1 + 0.3) / 2
    // A trained-router line with plain-mean rows (eval refuses to measure one) is refused.
    EXPECT_THROW(load_text(line(0, 1.0, trained + pq + us, 1.0, 0.1)), InputError);
    const std::string umd = render_markdown(load_text(u), with_uniform, "t", {});
    EXPECT_NE(umd.find("Plain-mean summary rows (…-uniform-summary"), std::string::npos) << umd;
    EXPECT_EQ(md.find("Plain-mean summary rows"), std::string::npos) << md; // none measured

    // Two-stage routing: the training-free router against itself without it, a trained router
    // with it against the training-free one with it.
    EXPECT_EQ(training_free_partner("sekv-tau-per-query-rerank4"), "sekv-tau-per-query");
    EXPECT_EQ(training_free_partner("sekv-trained-tau-per-query-rerank4"),
              "sekv-tau-per-query-rerank4");
    EXPECT_EQ(training_free_partner("sekv-tau-per-query-uniform-summary-rerank4"),
              "sekv-tau-per-query-uniform-summary");
    const std::string t = with_training_free(
        R"(,"settings":"m.gguf max_tokens=0 tau=per_query rerank=4")", 3.0, 0.1, 1.0, 0.1);
    const Report with_rerank = aggregate(load_text(t));
    const RouterComparison* tc = comparison_of(with_rerank, "sekv-tau-per-query-rerank4");
    ASSERT_NE(tc, nullptr);
    EXPECT_EQ(tc->training_free.policy, "sekv-tau-per-query");
    EXPECT_EQ(tc->accuracy.paired_samples, 2);
    EXPECT_EQ(points(tc->accuracy.value), "+50.0 points"); // (1 − 0 + 1 − 1) / 2
    EXPECT_DOUBLE_EQ(tc->trained_expansions, 2.0);         // (3 + 1) / 2
    EXPECT_DOUBLE_EQ(tc->trained_kl, 0.1);
    const std::string tmd = render_markdown(load_text(t), with_rerank, "t", {});
    EXPECT_NE(tmd.find("Two-stage routing (…-rerankN"), std::string::npos) << tmd;
    EXPECT_EQ(md.find("Two-stage routing"), std::string::npos) << md;
}

TEST(ReportData, PlotFileNamesAreSanitizedAndDistinct) {
    EXPECT_EQ(sanitize_file_part("sekv@35%"), "sekv-35");
    EXPECT_EQ(sanitize_file_part("snapkv@12.5%"), "snapkv-12-5");
    EXPECT_EQ(sanitize_file_part("niah single/ä"), "niah-single");
    EXPECT_EQ(sanitize_file_part("%%"), "x");
    std::string s = result("a b", "full", 1.0, 4096, 0.5, 0, 1) +
                    result("a/b", "full", 1.0, 4096, 0.5, 0, 1) +
                    result("all", "full", 1.0, 4096, 0.5, 0, 1);
    const auto plots = plan_plots(aggregate(load_text(s)));
    std::set<std::string> names;
    for (const auto& p : plots)
        EXPECT_TRUE(names.insert(p.file).second) << p.file;
    EXPECT_TRUE(names.count("heatmap-a-b-full.png"));
    EXPECT_TRUE(names.count("heatmap-a-b-full-2.png"));
    EXPECT_TRUE(names.count("accuracy-vs-memory-all.png"));
    EXPECT_TRUE(names.count("accuracy-vs-memory-all-2.png")); // the task named "all"
    EXPECT_EQ(plots.back().file, "accuracy-vs-memory-all.png");
    EXPECT_TRUE(plots.back().all_tasks);
}

// ---- The built program (report_program.h runs it) ----

TEST_F(ReportProgram, WritesTheReportAndThePlots) {
    const fs::path input = write("results.jsonl", sample_jsonl());
    const fs::path out = dir_ / "out";
    const ProgramRun r = run({"--out-dir", out.string(), "--title", "Sample run", input.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");

    const std::string md = slurp(out / "report.md");
    EXPECT_NE(md.find("# Sample run\n"), std::string::npos);
    EXPECT_NE(md.find("1 duplicate line was counted once"), std::string::npos);
    // The per-task tables, rows in order, every cell as worked out above.
    EXPECT_NE(md.find("| configuration | 4096 | 8192 | all | mean fast tier | over budget |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| full | 66.7 % [20.8\u201393.9] (3) | 100.0 % [20.7\u2013100.0] (1) | "
                      "75.0 % [30.1\u201395.4] (4) | 100.0 % | 0 |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("| sekv@35% | 100.0 % [43.8\u2013100.0] (3) | 0.0 % [0.0\u201379.3] (1) | "
                      "75.0 % [30.1\u201395.4] (4) | 27.0 % | 1 |"),
              std::string::npos)
        << md;
    EXPECT_LT(md.find("| full | 66.7"), md.find("| sekv@35% | 100.0"));
    EXPECT_NE(md.find("| full | 75.0 % [46.7\u2013100.0] (3) | 75.0 % [46.7\u2013100.0] (3) |"),
              std::string::npos);
    // Summary: full 75 % on both tasks, sekv 75 % on alpha, where full has 75 % too.
    EXPECT_NE(md.find("### Budget 35 %"), std::string::npos);
    EXPECT_NE(md.find("| sekv@35% | 75.0 % | 1 | 4 | 27.0 % |"), std::string::npos) << md;
    // Paired over alpha: differences 0, 0, 1, −1 → 0 ± 1.96 · √((2/3) / 4) = ±80.0 points.
    EXPECT_NE(md.find("- sekv \u2212 full: **0.0 points** [95 % CI \u221280.0 to +80.0] over 4 "
                      "paired samples in 1 task; left out: 1 task only one of the two has\n"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("- sekv \u2212 best baseline: no other compressed policy at this budget"),
              std::string::npos);
    EXPECT_NE(md.find("| sekv@35% | 4 | 0.900 | 0.800 | 0.0020 |"), std::string::npos) << md;
    EXPECT_NE(md.find("## Commands\n\n- `spanscope-lab eval niah --lengths 4096,8192` (started "
                      "2026-11-30T17:00:00Z, machine m1, --threads 2, commit abc123, 2 runs)"),
              std::string::npos)
        << md;

    const std::vector<std::string> pngs = {
        "heatmap-alpha-full.png",      "heatmap-alpha-sekv-35.png",
        "heatmap-beta-full.png",       "accuracy-vs-memory-alpha.png",
        "accuracy-vs-memory-beta.png", "accuracy-vs-memory-all.png"};
    for (const auto& name : pngs) {
        SCOPED_TRACE(name);
        EXPECT_NE(md.find("- [" + name + "](" + name + "): "), std::string::npos);
        const QImage img(QString::fromStdString((out / name).string()));
        ASSERT_FALSE(img.isNull());
        EXPECT_EQ(img.size(), QSize(900, 600));
        QSet<QRgb> colours;
        for (int y = 0; y < img.height(); y += 3)
            for (int x = 0; x < img.width(); x += 3)
                colours.insert(img.pixel(x, y));
        EXPECT_GT(colours.size(), 20); // text, axes, cells or series, not a blank page
        EXPECT_EQ(img.pixel(2, 2), qRgb(255, 255, 255)); // white background
    }
    // Every PNG written is listed, and nothing else.
    int written = 0;
    for (const auto& e : fs::directory_iterator(out))
        written += e.path().extension() == ".png";
    EXPECT_EQ(written, static_cast<int>(pngs.size()));
}

TEST_F(ReportProgram, BadInputFailsWithOneLineNamingTheLine) {
    const std::string good = result("t", "full", 1.0, 4096, 0.5, 0, 1);
    const fs::path bad = write("bad.jsonl", good + good + "{\"task\": oops}\n");
    ProgramRun r = run({"--out-dir", (dir_ / "o").string(), bad.string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(bad.string() + ":3: not valid JSON"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "o" / "report.md"));

    r = run({"--out-dir", (dir_ / "o").string(), (dir_ / "missing.jsonl").string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("cannot open " + (dir_ / "missing.jsonl").string()), std::string::npos);
    EXPECT_EQ(line_count(r.err), 1) << r.err;

    const fs::path meta = write("meta.jsonl", R"({"command":"spanscope-lab eval"})"
                                              "\n");
    r = run({"--out-dir", (dir_ / "o").string(), meta.string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("no result rows"), std::string::npos) << r.err;
}

TEST_F(ReportProgram, BadArgumentsExitWithTwo) {
    const fs::path input = write("results.jsonl", sample_jsonl());
    ProgramRun r = run({input.string()});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--out-dir"), std::string::npos);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    r = run({"--out-dir", (dir_ / "o").string()});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    r = run({"--out-dir", (dir_ / "o").string(), "--no-such-option", input.string()});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    r = run({"--help"});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("--out-dir"), std::string::npos);
}
