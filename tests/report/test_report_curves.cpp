// spanscope-report's zoom-in training curves (issue 8): loading the lines of `spanscope-cli
// zoom-train --curves` (duplicates, malformed lines), the moving average and the axis ticks on
// values worked out by hand, the Markdown table of held-out changes on a small hand-written
// file, and the built program with --curves: report.md, one PNG per component with the
// expected name and size, and the held-out series drawn where it should be.
#include "lab/report/report_curves.h"
#include "lab/report/report_curves_plot.h"
#include "lab/report/report_data.h"
#include "lab/report/report_paint.h"
#include "report_loading.h"
#include "report_program.h"

#include <QColor>
#include <QImage>
#include <QString>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

using namespace spanscope::report;
using namespace report_test;
namespace fs = std::filesystem;

namespace {

/// The values of one line, in the order of curve_components().
struct Values {
    double zoom, distill, recon, budget, total, expansion_rate, mean_rank, recon_hard, budget_soft;
};

std::string curve_line(long long step, const std::string& split, const Values& v,
                       const std::string& extra = "") {
    std::ostringstream s;
    s << R"({"step":)" << step << R"(,"split":")" << split << '"';
    if (split == "train")
        s << R"(,"lr":0.0012,"grad_norm":0.83)";
    s << R"(,"loss":{"zoom":)" << v.zoom << R"(,"distill":)" << v.distill << R"(,"recon":)"
      << v.recon << R"(,"budget":)" << v.budget << R"(,"total":)" << v.total
      << R"(,"expansion_rate":)" << v.expansion_rate << R"(,"label_rate":0.09,"mean_rank":)"
      << v.mean_rank << R"(,"recon_hard":)" << v.recon_hard << R"(,"budget_soft":)" << v.budget_soft
      << R"(,"examples":64)" << extra << "}}\n";
    return s.str();
}

// The held-out evaluations of the sample run. Step 100 is first written with other values and
// then again by the resumed run (the last line wins):
//   component       step 0   step 100   change   change %
//   zoom            0.8      0.5        −0.3     −0.3 / 0.8   = −37.5 %
//   distill         0.05     0.06       +0.01    +0.01 / 0.05 = +20.0 %
//   recon           0.4      0.3        −0.1     −0.1 / 0.4   = −25.0 %
//   budget          0.2      0.2        0        0.0 %
//   total           1.45     1.06       −0.39    −0.39 / 1.45 = −26.9 %
//   expansion_rate  0.25     0.2        −0.05    −0.05 / 0.25 = −20.0 %
//   mean_rank       20       16         −4       −4 / 20      = −20.0 %
//   recon_hard      0.02     0.01       −0.01    −0.01 / 0.02 = −50.0 %
//   budget_soft     0.18     0.21       +0.03    +0.03 / 0.18 = +16.7 %
// Lower: zoom, recon, total, expansion_rate, mean_rank, recon_hard; not lower: distill, budget,
// budget_soft; 3 of the 5
// loss components. Training: steps 1–100, every value apart from the held-out ones (so both
// series show in every plot), zoom falling from 0.9 by 0.004 a step.
const Values kHeldStart{0.8, 0.05, 0.4, 0.2, 1.45, 0.25, 20, 0.02, 0.18};
const Values kHeldMiddle{0.6, 0.055, 0.35, 0.2, 1.2, 0.22, 18, 0.015, 0.19};
const Values kHeldStale{0.9, 0.09, 0.5,  0.3, 1.8,
                        0.3, 25,   0.03, 0.3}; // replaced by the resumed run
const Values kHeldEnd{0.5, 0.06, 0.3, 0.2, 1.06, 0.2, 16, 0.01, 0.21};

Values train_values(int step) {
    const double s = step;
    return {0.9 - 0.004 * s,  0.07 - 0.0001 * s, 0.45 - 0.001 * s,
            0.3 - 0.0005 * s, 1.6 - 0.005 * s,   0.3 - 0.0005 * s,
            24 - 0.05 * s,    0.03 - 0.0001 * s, 0.2 + 0.0002 * s};
}

/// The first run: steps 1–60 and held-out at 0, 50 and a stale 100; the resumed run repeats
/// steps 51–60 and writes 61–100 and held-out 100 again (11 repeated lines).
std::string first_run() {
    std::string s = curve_line(0, "held_out", kHeldStart);
    for (int step = 1; step <= 60; ++step) {
        s += curve_line(step, "train", train_values(step));
        if (step == 50)
            s += curve_line(50, "held_out", kHeldMiddle);
    }
    return s + curve_line(100, "held_out", kHeldStale);
}
std::string resumed_run() {
    std::string s;
    for (int step = 51; step <= 100; ++step)
        s += curve_line(step, "train", train_values(step));
    return s + curve_line(100, "held_out", kHeldEnd);
}

Curves load_text(const std::string& text, const std::string& name = "curves.jsonl") {
    return load_with<CurvesLoader>(text, name);
}

/// The InputError message of loading text as "bad.jsonl" ("" when it loads).
std::string load_error(const std::string& text) {
    return load_error_with<CurvesLoader>(text);
}

} // namespace

TEST(ReportCurves, ComponentsAndFileNames) {
    ASSERT_EQ(curve_components().size(), 10u);
    const char* const keys[] = {"zoom",        "distill",        "recon",     "budget",
                                "total",       "expansion_rate", "mean_rank", "recon_hard",
                                "budget_soft", "ranking"};
    for (size_t c = 0; c < 10; ++c) {
        EXPECT_STREQ(curve_components()[c].key, keys[c]);
        EXPECT_EQ(curve_components()[c].loss, c < 5);
        EXPECT_EQ(curve_components()[c].optional, c == 9);
    }
    EXPECT_EQ(curve_file(0), "zoom-train-zoom.png");
    EXPECT_EQ(curve_file(5), "zoom-train-expansion_rate.png");
}

TEST(ReportCurves, ParsesLinesAndKeepsTheLastOfARepeatedStep) {
    std::istringstream a(first_run()), b(resumed_run());
    CurvesLoader loader;
    loader.add_stream(a, "run.jsonl");
    loader.add_stream(b, "resumed.jsonl");
    const Curves c = loader.finish();
    EXPECT_EQ(c.lines, 1 + 60 + 1 + 1 + 50 + 1);
    EXPECT_EQ(c.duplicates, 11); // train 51–60 and held-out 100
    ASSERT_EQ(c.train.size(), 100u);
    ASSERT_EQ(c.held_out.size(), 3u);
    EXPECT_EQ(c.train.front().step, 1);
    EXPECT_EQ(c.train.back().step, 100);
    EXPECT_EQ(c.held_out[0].step, 0);
    EXPECT_EQ(c.held_out[1].step, 50);
    EXPECT_EQ(c.held_out[2].step, 100);
    // Held-out 100 is the resumed run's line (zoom 0.5, not the stale 0.9), at resumed.jsonl:51.
    EXPECT_DOUBLE_EQ(c.held_out[2].values[0], 0.5);
    EXPECT_DOUBLE_EQ(c.held_out[2].values[6], 16);
    EXPECT_EQ(c.held_out[2].source, "resumed.jsonl:51");
    EXPECT_EQ(c.train[54].step, 55);
    EXPECT_EQ(c.train[54].source, "resumed.jsonl:5");
    EXPECT_DOUBLE_EQ(c.train[9].values[0], 0.9 - 0.004 * 10);
    EXPECT_DOUBLE_EQ(*c.train[9].lr, 0.0012);
    EXPECT_DOUBLE_EQ(*c.train[9].grad_norm, 0.83);
    EXPECT_DOUBLE_EQ(*c.train[9].label_rate, 0.09);
    EXPECT_EQ(*c.train[9].examples, 64);
    EXPECT_FALSE(c.held_out[0].lr.has_value());

    // Lines out of order are sorted by step; blank lines, CRLF and unknown keys are fine.
    const Curves d = load_text(curve_line(7, "train", kHeldEnd) + "\n  \n" +
                               curve_line(3, "train", kHeldStart, R"(,"new_key":[1])") + "\r\n");
    ASSERT_EQ(d.train.size(), 2u);
    EXPECT_EQ(d.train[0].step, 3);
    EXPECT_EQ(d.train[1].step, 7);
    EXPECT_TRUE(d.held_out.empty());
    EXPECT_EQ(d.duplicates, 0);
}

TEST(ReportCurves, MalformedLinesNameFileAndLine) {
    const std::string good = curve_line(1, "train", kHeldStart);
    EXPECT_EQ(load_error(good + good), "");
    std::string e = load_error(good + "{\"step\": 2, \"split\": \n");
    EXPECT_EQ(e.rfind("bad.jsonl:2: not valid JSON", 0), 0u) << e;
    EXPECT_EQ(load_error(good + "[1]\n"), "bad.jsonl:2: not a JSON object");
    EXPECT_EQ(load_error(R"({"step":1,"loss":{}})"
                         "\n"),
              "bad.jsonl:1: curve line without \"split\"");
    EXPECT_EQ(load_error(R"({"step":1,"split":"valid","loss":{}})"
                         "\n"),
              "bad.jsonl:1: \"split\" is \"valid\", not \"train\" or \"held_out\"");
    EXPECT_EQ(load_error(R"({"split":"train","loss":{}})"
                         "\n"),
              "bad.jsonl:1: curve line without \"step\"");
    EXPECT_EQ(load_error(curve_line(-1, "train", kHeldStart)),
              "bad.jsonl:1: \"step\" -1 is negative");
    EXPECT_EQ(load_error(R"({"step":1.5,"split":"train"})"
                         "\n"),
              "bad.jsonl:1: \"step\" is not an integer");
    EXPECT_EQ(load_error(R"({"step":1,"split":"train"})"
                         "\n"),
              "bad.jsonl:1: curve line without \"loss\"");
    EXPECT_EQ(load_error(R"({"step":1,"split":"train","loss":[1]})"
                         "\n"),
              "bad.jsonl:1: \"loss\" is not an object");
    std::string no_rank = curve_line(1, "held_out", kHeldStart);
    no_rank.replace(no_rank.find("\"mean_rank\""), 11, "\"rank\"");
    EXPECT_EQ(load_error(good + no_rank), "bad.jsonl:2: \"loss\" has no \"mean_rank\"");
    std::string text_zoom = curve_line(1, "train", kHeldStart);
    text_zoom.replace(text_zoom.find("\"zoom\":0.8"), 10, "\"zoom\":\"0.8\"");
    EXPECT_EQ(load_error(text_zoom), "bad.jsonl:1: \"loss.zoom\" is not a number");
    std::string bad_examples = curve_line(1, "train", kHeldStart);
    bad_examples.replace(bad_examples.find("64"), 2, "2.5");
    EXPECT_EQ(load_error(bad_examples), "bad.jsonl:1: \"loss.examples\" 2.5 is not a count");
    EXPECT_EQ(load_error("\n\n"), "no training-curve lines in the input");
}

TEST(ReportCurves, MovingAverageOverAWindowOfSteps) {
    // Window 3 over steps 1–5 with values 1–5: 1, (1+2)/2, (1+2+3)/3, (2+3+4)/3, (3+4+5)/3.
    const auto a = moving_average({{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}, 3);
    ASSERT_EQ(a.size(), 5u);
    const double expected[] = {1, 1.5, 2, 3, 4};
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(a[i].first, static_cast<long long>(i) + 1);
        EXPECT_DOUBLE_EQ(a[i].second, expected[i]) << i;
    }
    // Window 25 over steps 0, 10, 20, 30 (values 4, 8, 0, 2): the window of step 30 is
    // (5, 30], so step 0 has left it: 4, 6, 4, (8+0+2)/3.
    const auto b = moving_average({{0, 4}, {10, 8}, {20, 0}, {30, 2}}, kTrainWindowSteps);
    ASSERT_EQ(b.size(), 4u);
    EXPECT_DOUBLE_EQ(b[0].second, 4);
    EXPECT_DOUBLE_EQ(b[1].second, 6);
    EXPECT_DOUBLE_EQ(b[2].second, 4);
    EXPECT_DOUBLE_EQ(b[3].second, 10.0 / 3.0);
    EXPECT_TRUE(moving_average({}, 25).empty());
    EXPECT_DOUBLE_EQ(moving_average({{1, 1}, {2, 3}}, 0)[1].second, 3); // window taken as 1
}

TEST(ReportCurves, NiceTicksCoverTheRange) {
    // (0.71 − 0.13) / 5 = 0.116 → step 0.2 → 0, 0.2, …, 0.8.
    const Ticks t = nice_ticks(0.13, 0.71, 6);
    ASSERT_EQ(t.values.size(), 5u);
    EXPECT_DOUBLE_EQ(t.step, 0.2);
    EXPECT_NEAR(t.low(), 0.0, 1e-12);
    EXPECT_NEAR(t.high(), 0.8, 1e-12);
    EXPECT_EQ(t.decimals, 1);
    EXPECT_EQ(t.label(t.values[3]), "0.6");
    EXPECT_EQ(nice_ticks(0.71, 0.13, 6).values.size(), 5u); // swapped bounds
    // 0–100 in 7 ticks: 100 / 6 = 16.7 → step 20 → 0, 20, …, 100.
    const Ticks s = nice_ticks(0, 100, 7);
    EXPECT_DOUBLE_EQ(s.step, 20);
    EXPECT_EQ(s.values.size(), 6u);
    EXPECT_EQ(s.label(100), "100");
    // One value: ±10 % around it, 4.5–5.5 → step 0.2 → 4.4 … 5.6.
    const Ticks one = nice_ticks(5, 5, 6);
    EXPECT_DOUBLE_EQ(one.step, 0.2);
    EXPECT_NEAR(one.low(), 4.4, 1e-12);
    EXPECT_NEAR(one.high(), 5.6, 1e-12);
    const Ticks tenth{{0.1, 0.2, 0.30000000000000004}, 0.1, 1};
    EXPECT_EQ(tenth.label(0.30000000000000004), "0.3");
    EXPECT_GE(nice_ticks(std::nan(""), 1, 6).values.size(), 2u); // no crash on NaN
}

TEST(ReportCurves, MarkdownTableHasTheHandComputedChanges) {
    std::istringstream a(first_run()), b(resumed_run());
    CurvesLoader loader;
    loader.add_stream(a, "run.jsonl");
    loader.add_stream(b, "resumed.jsonl");
    const Curves c = loader.finish();

    const std::vector<HeldOutChange> changes = held_out_changes(c);
    ASSERT_EQ(changes.size(), 9u);
    EXPECT_EQ(changes[0].first_step, 0);
    EXPECT_EQ(changes[0].last_step, 100);
    EXPECT_NEAR(changes[0].change, -0.3, 1e-12);
    EXPECT_NEAR(*changes[0].relative, -0.375, 1e-12);
    EXPECT_NEAR(*changes[4].relative, -0.39 / 1.45, 1e-12);
    EXPECT_FALSE(changes[3].lower()); // budget 0.2 → 0.2

    const std::string md = render_curves_markdown(c);
    EXPECT_EQ(md.rfind("## Zoom-in training curves\n", 0), 0u);
    EXPECT_NE(md.find("100 training steps and 3 held-out evaluations (steps 0\u2013100)."),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("11 lines repeated a split and step"), std::string::npos) << md;
    EXPECT_NE(md.find("| component | first (step 0) | last (step 100) | change | change % |"),
              std::string::npos)
        << md;
    const char* const rows[] = {
        "| zoom | 0.8 | 0.5 | \u22120.3 | \u221237.5 % |",
        "| distill | 0.05 | 0.06 | +0.01 | +20.0 % |",
        "| recon | 0.4 | 0.3 | \u22120.1 | \u221225.0 % |",
        "| budget | 0.2 | 0.2 | 0 | 0.0 % |",
        "| total | 1.45 | 1.06 | \u22120.39 | \u221226.9 % |",
        "| expansion_rate | 0.25 | 0.2 | \u22120.05 | \u221220.0 % |",
        "| mean_rank | 20 | 16 | \u22124 | \u221220.0 % |",
        "| recon_hard | 0.02 | 0.01 | \u22120.01 | \u221250.0 % |",
        "| budget_soft | 0.18 | 0.21 | +0.03 | +16.7 % |",
    };
    size_t previous = 0;
    for (const char* row : rows) {
        const size_t at = md.find(row);
        EXPECT_NE(at, std::string::npos) << row << "\n" << md;
        EXPECT_GT(at, previous) << row; // in component order
        previous = at == std::string::npos ? previous : at;
    }
    EXPECT_NE(md.find("Lower at the last held-out evaluation than at the first: zoom, recon, "
                      "total, expansion_rate, mean_rank and recon_hard; not lower: distill, "
                      "budget and budget_soft. Loss components lower: 3 of 5 (issue 8 asks for "
                      "all; expansion_rate, mean_rank, recon_hard and budget_soft are "
                      "diagnostics, not losses)."),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("- [zoom-train-mean_rank.png](zoom-train-mean_rank.png)"), std::string::npos);

    // A first value of 0 has no relative change; a single evaluation has nothing to compare.
    const Curves one =
        load_text(curve_line(0, "held_out", {0, 0.05, 0.4, 0.2, 0.65, 0.25, 20, 0.02, 0.18}));
    const std::string md1 = render_curves_markdown(one);
    EXPECT_NE(md1.find("| zoom | 0 | 0 | 0 | \u2013 |"), std::string::npos) << md1;
    EXPECT_NE(md1.find("Only one held-out evaluation (step 0)"), std::string::npos) << md1;
    const Curves train_only = load_text(curve_line(1, "train", kHeldStart));
    EXPECT_NE(render_curves_markdown(train_only).find("No held-out evaluation in the input."),
              std::string::npos);
}

TEST(ReportCurves, TheRankingLossIsShownOnlyWhenEveryLineHasIt) {
    // Lines written before zoom-train reported the ranking loss lack it: the other components
    // are shown as before, and the ranking is left out of the table and the plots.
    const Curves old =
        load_text(curve_line(0, "held_out", kHeldStart) + curve_line(100, "held_out", kHeldEnd));
    EXPECT_EQ(old.components.size(), 9u);
    EXPECT_EQ(held_out_changes(old).size(), 9u);
    const std::string md_old = render_curves_markdown(old);
    EXPECT_EQ(md_old.find("ranking"), std::string::npos) << md_old;

    // Every line has it: its held-out change is in the table (1.0862 → 1.0513, shown to 4 digits:
    // −0.0349, −3.2 %), among the diagnostics, and in the plots' list.
    const Curves with = load_text(curve_line(0, "held_out", kHeldStart, R"(,"ranking":1.0862)") +
                                  curve_line(7, "train", kHeldMiddle, R"(,"ranking":1.07)") +
                                  curve_line(100, "held_out", kHeldEnd, R"(,"ranking":1.0513)"));
    ASSERT_EQ(with.components.size(), 10u);
    EXPECT_EQ(with.components.back(), 9u);
    const auto changes = held_out_changes(with);
    ASSERT_EQ(changes.size(), 10u);
    EXPECT_EQ(changes[9].component, 9u);
    EXPECT_NEAR(changes[9].change, -0.0349, 1e-12);
    const std::string md = render_curves_markdown(with);
    EXPECT_NE(md.find("| ranking | 1.086 | 1.051 | \u22120.0349 | \u22123.2 % |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("recon_hard, budget_soft and ranking are diagnostics"), std::string::npos)
        << md;
    EXPECT_NE(md.find("- [zoom-train-ranking.png](zoom-train-ranking.png)"), std::string::npos)
        << md;

    // One line without it (a run resumed by an older build): not shown, nothing else lost.
    const Curves mixed = load_text(curve_line(0, "held_out", kHeldStart, R"(,"ranking":1.0862)") +
                                   curve_line(100, "held_out", kHeldEnd));
    EXPECT_EQ(mixed.components.size(), 9u);
    // A value that is not a number is still an error naming the line.
    EXPECT_NE(load_error(curve_line(0, "held_out", kHeldStart, R"(,"ranking":"high")"))
                  .find("bad.jsonl:1"),
              std::string::npos);
}

// ---- The built program with --curves ----

namespace {

class ReportCurvesProgram : public ReportProgram {};

/// Pixels of exactly this colour in the plot area (left of the legend, below the titles).
std::vector<QPoint> pixels_of(const QImage& img, QColor colour) {
    std::vector<QPoint> found;
    for (int y = 70; y < img.height() - 60; ++y)
        for (int x = 0; x < img.width() - kCurveLegendWidth; ++x)
            if (img.pixel(x, y) == colour.rgb())
                found.emplace_back(x, y);
    return found;
}

} // namespace

TEST_F(ReportCurvesProgram, WritesTheSectionAndOnePngPerComponent) {
    const fs::path run1 = write("run.jsonl", first_run());
    const fs::path run2 = write("resumed.jsonl", resumed_run());
    const fs::path out = dir_ / "out";
    const ProgramRun r =
        run({"--out-dir", out.string(), "--curves", run1.string(), "--curves", run2.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("100 training steps, 3 held-out evaluations"), std::string::npos) << r.out;

    const std::string md = slurp(out / "report.md");
    EXPECT_EQ(md.rfind("# Training report\n\n## Zoom-in training curves\n", 0), 0u) << md;
    EXPECT_NE(md.find("| total | 1.45 | 1.06 | \u22120.39 | \u221226.9 % |"), std::string::npos)
        << md;
    EXPECT_EQ(md.find("## Accuracy per task"), std::string::npos);

    const std::vector<std::string> pngs = {
        "zoom-train-zoom.png",      "zoom-train-distill.png",    "zoom-train-recon.png",
        "zoom-train-budget.png",    "zoom-train-total.png",      "zoom-train-expansion_rate.png",
        "zoom-train-mean_rank.png", "zoom-train-recon_hard.png", "zoom-train-budget_soft.png"};
    for (const auto& name : pngs) {
        SCOPED_TRACE(name);
        const QImage img(QString::fromStdString((out / name).string()));
        ASSERT_FALSE(img.isNull());
        EXPECT_EQ(img.size(), QSize(900, 600));
        EXPECT_EQ(img.pixel(2, 2), qRgb(255, 255, 255));
        // Both series are drawn in the plot area, not only in the legend.
        EXPECT_GT(pixels_of(img, kHeldOutCurve).size(), 50u);
        EXPECT_GT(pixels_of(img, kTrainCurve).size(), 50u);
    }
    int written = 0;
    for (const auto& e : fs::directory_iterator(out))
        written += e.path().extension() == ".png";
    EXPECT_EQ(written, 9);

    // Held-out zoom falls from 0.8 to 0.5: its leftmost pixels (step 0) lie higher in the image
    // (smaller y) than its rightmost (step 100), which lie right of the middle of the area.
    const QImage zoom(QString::fromStdString((out / "zoom-train-zoom.png").string()));
    const std::vector<QPoint> held = pixels_of(zoom, kHeldOutCurve);
    ASSERT_FALSE(held.empty());
    const auto [leftmost, rightmost] = std::minmax_element(
        held.begin(), held.end(), [](const QPoint& a, const QPoint& b) { return a.x() < b.x(); });
    EXPECT_LT(leftmost->y(), rightmost->y() - 100);
    EXPECT_GT(rightmost->x() - leftmost->x(), 400);
}

TEST_F(ReportCurvesProgram, DrawsTheRankingLossWhenTheRunReportedIt) {
    std::string text;
    for (int step = 1; step <= 20; ++step)
        text += curve_line(step, "train", train_values(step),
                           ",\"ranking\":" + std::to_string(1.2 - 0.01 * step));
    text += curve_line(0, "held_out", kHeldStart, R"(,"ranking":1.1)") +
            curve_line(20, "held_out", kHeldEnd, R"(,"ranking":1.0)");
    const fs::path curves = write("ranked.jsonl", text);
    const fs::path out = dir_ / "out";
    const ProgramRun r = run({"--out-dir", out.string(), "--curves", curves.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    int written = 0;
    for (const auto& e : fs::directory_iterator(out))
        written += e.path().extension() == ".png";
    EXPECT_EQ(written, 10);
    const QImage img(QString::fromStdString((out / "zoom-train-ranking.png").string()));
    ASSERT_FALSE(img.isNull());
    EXPECT_GT(pixels_of(img, kHeldOutCurve).size(), 50u);
    EXPECT_GT(pixels_of(img, kTrainCurve).size(), 50u);
}

TEST_F(ReportCurvesProgram, CurvesFollowTheResultSections) {
    // One result line, so the evaluation sections are there too.
    const fs::path results = write(
        "results.jsonl",
        R"({"task":"t","haystack":"prose","target_length":4096,"depth":0.5,"index":0,"seed":1,)"
        R"("policy":"full","budget":1,"score":1})"
        "\n");
    const fs::path curves = write("curves.jsonl", first_run() + resumed_run());
    const fs::path out = dir_ / "out";
    const ProgramRun r = run({"--out-dir", out.string(), "--title", "Both", results.string(),
                              "--curves", curves.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string md = slurp(out / "report.md");
    EXPECT_EQ(md.rfind("# Both\n", 0), 0u);
    const size_t commands = md.find("## Commands"), plots = md.find("## Plots");
    const size_t section = md.find("## Zoom-in training curves");
    ASSERT_NE(commands, std::string::npos);
    ASSERT_NE(section, std::string::npos);
    EXPECT_GT(section, commands);
    EXPECT_GT(section, plots);
    EXPECT_TRUE(fs::exists(out / "heatmap-t-full.png"));
    EXPECT_TRUE(fs::exists(out / "zoom-train-total.png"));
}

TEST_F(ReportCurvesProgram, BadCurvesFileFailsWithOneLineNamingTheLine) {
    const fs::path bad =
        write("bad.jsonl", first_run() + R"({"step":3,"split":"test","loss":{}})" + "\n");
    const fs::path out = dir_ / "o";
    ProgramRun r = run({"--out-dir", out.string(), "--curves", bad.string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(bad.string() + ":64: \"split\" is \"test\""), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out / "report.md"));
    EXPECT_FALSE(fs::exists(out / "zoom-train-zoom.png"));

    r = run({"--out-dir", out.string(), "--curves", (dir_ / "missing.jsonl").string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("cannot open " + (dir_ / "missing.jsonl").string()), std::string::npos);
    r = run({"--out-dir", out.string(), "--curves"});
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(line_count(r.err), 1) << r.err;
}
