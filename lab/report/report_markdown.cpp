// report.md from the aggregated report (report_markdown.h).
#include "lab/report/report_markdown.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace spanscope::report {

namespace {

const char* const kDash = "\u2013";  // en dash: an empty cell, and between CI bounds
const char* const kMinus = "\u2212"; // minus sign

/// Text for a table cell: '|' escaped, line breaks as spaces.
std::string cell(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '|')
            out += "\\|";
        else if (c == '\n' || c == '\r')
            out += ' ';
        else
            out += c;
    }
    return out;
}

/// Inline code: `s`, with a longer fence when s holds backticks.
std::string code(const std::string& s) {
    std::string fence = "`";
    while (s.find(fence) != std::string::npos)
        fence += '`';
    const bool pad = !s.empty() && (s.front() == '`' || s.back() == '`');
    return fence + (pad ? " " : "") + cell(s) + (pad ? " " : "") + fence;
}

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

/// "| a | b |" and the "|---|---|" line under a header.
std::string row(const std::vector<std::string>& cells) {
    std::string s = "|";
    for (const auto& c : cells)
        s += " " + c + " |";
    return s + "\n";
}
std::string rule(size_t columns) {
    std::string s = "|";
    for (size_t i = 0; i < columns; ++i)
        s += "---|";
    return s + "\n";
}

std::string optional_percent(const std::optional<double>& v) {
    return v ? percent(*v) + " %" : kDash;
}

void task_tables(std::ostringstream& md, const Report& report) {
    md << "## Accuracy per task\n\n"
       << "Each cell: accuracy % [95 % confidence interval, low" << kDash
       << "high] (number of samples). The interval is the Wilson score interval when every "
          "score is 0 or 1, else the normal approximation (mean ± 1.96·s/√n, clamped to "
          "[0, 100]). *all* pools every target length; *mean fast tier* is the mean fraction "
          "of the full KV cache kept in the fast tier; *over budget* counts the samples recorded "
          "with within_budget false.\n\n";
    for (const auto& t : report.tasks) {
        md << "### " << cell(t.task) << "\n\n";
        std::vector<std::string> header = {"configuration"};
        for (int len : t.lengths)
            header.push_back(std::to_string(len));
        header.insert(header.end(), {"all", "mean fast tier", "over budget"});
        md << row(header) << rule(header.size());
        for (const auto& r : t.rows) {
            std::vector<std::string> cells = {cell(r.config.label())};
            for (int len : t.lengths) {
                const auto it = r.by_length.find(len);
                cells.push_back(it == r.by_length.end() ? kDash : accuracy_cell(it->second));
            }
            cells.push_back(accuracy_cell(r.all));
            cells.push_back(optional_percent(r.mean_fast_tier));
            cells.push_back(std::to_string(r.over_budget));
            md << row(cells);
        }
        md << "\n";
    }
}

/// A difference of fractions in percentage points with its sign, one decimal: 0.123 → "+12.3";
/// a value that rounds to 0.0 has no sign.
std::string signed_points(double difference) {
    const double p = difference * 100.0;
    const std::string magnitude = fixed(std::fabs(p), 1);
    return (magnitude == "0.0" ? "" : (p < 0 ? kMinus : "+")) + magnitude;
}

/// "- sekv − X (label): **+1.0 points** [95 % CI −2.0 to +4.0] over 120 paired samples",
/// noting the tasks or samples that are not in the difference.
/// tail, when given, ends the line ("; …").
void difference_line(std::ostringstream& md, const std::string& minuend, const std::string& what,
                     const std::optional<Difference>& d, const char* none,
                     const std::string& tail = "") {
    md << "- " << minuend << " " << kMinus << " " << what;
    if (!d) {
        md << ": " << none << "\n";
        return;
    }
    if (what != d->other)
        md << " (" << cell(d->other) << ")";
    md << ": **" << points(d->value) << "** [95 % CI " << signed_points(d->ci.low) << " to "
       << signed_points(d->ci.high) << "] over " << d->paired_samples << " paired samples in "
       << d->common_tasks << (d->common_tasks == 1 ? " task" : " tasks");
    if (d->unpaired_samples > 0)
        md << "; left out: " << d->unpaired_samples
           << (d->unpaired_samples == 1 ? " sample" : " samples") << " without a partner";
    if (d->unshared_tasks > 0)
        md << "; left out: " << d->unshared_tasks << (d->unshared_tasks == 1 ? " task" : " tasks")
           << " only one of the two has";
    if (d->tasks_without_pairs > 0)
        md << "; left out: " << d->tasks_without_pairs
           << (d->tasks_without_pairs == 1 ? " task" : " tasks") << " without a sample in common";
    md << tail << "\n";
}

/// "; expansions per token 2.96 against 2.73 (+8.6 %), KL 0.2590 against 0.2450 nats (+5.7 %),
/// on 20 paired samples": what the trained router spent and kept against the training-free one.
std::string router_tail(const RouterComparison& c) {
    auto ratio = [](double a, double b) {
        if (!(b > 0))
            return std::string();
        return " (" + signed_points(a / b - 1.0) + " %)";
    };
    std::string t;
    if (c.paired_expansions > 0)
        t += "; expansions per token " + fixed(c.trained_expansions, 2) + " against " +
             fixed(c.training_free_expansions, 2) +
             ratio(c.trained_expansions, c.training_free_expansions) + " on " +
             std::to_string(c.paired_expansions) + " paired samples";
    if (c.paired_kl > 0)
        t += "; KL " + fixed(c.trained_kl, 4) + " against " + fixed(c.training_free_kl, 4) +
             " nats" + ratio(c.trained_kl, c.training_free_kl) + " on " +
             std::to_string(c.paired_kl) + " paired samples";
    return t;
}

bool has_comparison(const Report& report, const std::string& policy_part) {
    for (const auto& b : report.budgets)
        for (const auto& c : b.router_comparisons)
            if (c.trained.policy.find(policy_part) != std::string::npos)
                return true;
    return false;
}

void summary_tables(std::ostringstream& md, const Report& report) {
    md << "## Summary per budget\n\n"
       << "Macro average over tasks of each task's accuracy (all target lengths pooled). "
          "Differences are paired, in percentage points: in each task, the mean over the samples "
          "both configurations answered (same length, depth, index and seed) of the difference "
          "of their scores, then the mean over the tasks both have; the interval is the normal "
          "approximation over the paired differences (a task with one pair, or whose pairs all "
          "agree, counts a conservative variance; clamped to ±100 points). The best baseline is "
          "the compressed policy other than sekv with the smallest difference sekv − baseline at "
          "that budget, among those measured on every task sekv was. A trained router "
          "(sekv-trained…) "
          "is compared with the training-free sekv of the same τ rule on the samples both "
          "answered; its expansions per token and KL are the means over the samples both report "
          "them for (the percentage: trained / training-free − 1).";
    if (has_comparison(report, "sekv-oracle"))
        md << " The oracle router (sekv-oracle…) is compared in the same way: it expands, in "
              "each query head, as many spans as τ per query asks for, those of most attention "
              "mass scored against the keys rebuilt from every span's factors (a reference that "
              "reads every span, not a policy that saves work; it maximises the mass expanded, not "
              "the accuracy).";
    if (has_comparison(report, "-uniform-summary"))
        md << " Plain-mean summary rows (…-uniform-summary, eval --summary-weights uniform) are "
              "compared in the same way: the training-free router with the design's "
              "surprisal-weighted summary rows of the same τ rule, another router with the "
              "training-free one of plain-mean rows.";
    if (has_comparison(report, "-rerank"))
        md << " Two-stage routing (…-rerankN, eval --rerank N) is compared in the same way: the "
              "training-free router with it against the same router without it, a trained one "
              "with it against the training-free one with it. Its candidates are the spans the "
              "router ranks in the top N times a head's share; of them, it expands those of most "
              "attention on their keys rebuilt from the key factors, reading about N times the key "
              "factors of the spans it expands.";
    md << "\n\n";
    for (const auto& b : report.budgets) {
        md << "### Budget " << budget_percent(b.budget) << " %"
           << "\n\n";
        md << row({"policy", "accuracy (macro)", "tasks", "samples", "mean fast tier"}) << rule(5);
        bool has_sekv = false;
        for (const auto& e : b.entries) {
            md << row({cell(e.config.label()), percent(e.macro_accuracy) + " %",
                       std::to_string(e.tasks), std::to_string(e.samples),
                       optional_percent(e.mean_fast_tier)});
            has_sekv = has_sekv || e.config.policy == "sekv";
        }
        md << "\n";
        if (has_sekv) {
            difference_line(md, "sekv", "best baseline", b.sekv_minus_best_baseline,
                            "no other compressed policy at this budget");
            difference_line(md, "sekv", "full", b.sekv_minus_full,
                            "no full results on sekv's samples");
            md << "\n";
        }
        for (const auto& c : b.router_comparisons)
            difference_line(md, c.trained.policy, "training-free sekv", c.accuracy, "",
                            router_tail(c));
        if (!b.router_comparisons.empty())
            md << "\n";
    }
}

void fidelity_table(std::ostringstream& md, const Report& report) {
    if (report.fidelity.empty())
        return;
    md << "## Fidelity\n\n"
       << "How close each configuration stays to the full model: the means of the fidelity "
          "values the eval command records (greedy_agreement, top1_agreement, kl), each over "
          "the samples that report it, and for sekv the spans expanded per generated token "
          "(mean over the SEKV layers and query heads).\n\n";
    md << row({"configuration", "samples", "greedy_agreement", "top1_agreement", "kl",
               "expansions/token"})
       << rule(6);
    for (const auto& f : report.fidelity) {
        md << row({cell(f.config.label()), std::to_string(f.n),
                   f.greedy_agreement ? fixed(*f.greedy_agreement, 3) : kDash,
                   f.top1_agreement ? fixed(*f.top1_agreement, 3) : kDash,
                   f.kl ? fixed(*f.kl, 4) : kDash, f.expansions ? fixed(*f.expansions, 2) : kDash});
    }
    md << "\n";
}

} // namespace

std::string percent(double fraction) {
    return fixed(fraction * 100.0, 1);
}

std::string accuracy_cell(const Accuracy& a) {
    if (a.n == 0)
        return kDash;
    return percent(a.mean) + " % [" + percent(a.ci.low) + kDash + percent(a.ci.high) + "] (" +
           std::to_string(a.n) + ")";
}

std::string points(double difference) {
    return signed_points(difference) + " points";
}

std::string render_markdown(const LoadedResults& loaded, const Report& report,
                            const std::string& title, const std::vector<PlotSpec>& plots) {
    std::ostringstream md;
    md << "# " << title << "\n\n";
    md << "Input: ";
    for (size_t i = 0; i < loaded.files.size(); ++i)
        md << (i ? ", " : "") << code(loaded.files[i]);
    md << (loaded.files.empty() ? "" : ". ") << loaded.rows.size() << " result rows over "
       << report.tasks.size() << (report.tasks.size() == 1 ? " task" : " tasks") << ".";
    if (!loaded.pic_rows.empty())
        md << " " << loaded.pic_rows.size()
           << " position-independent caching rows (pic-eval, their own section below).";
    if (loaded.duplicates > 0)
        md << " " << loaded.duplicates
           << (loaded.duplicates == 1 ? " duplicate line was" : " duplicate lines were")
           << " counted once (same task, haystack, settings, target length, depth, index, seed, "
              "policy "
              "and budget; the last line read wins).";
    else
        md << " No duplicate lines (a repeated sample would count once, the last line read "
              "winning).";
    md << "\n\n";

    if (!loaded.rows.empty()) {
        task_tables(md, report);
        summary_tables(md, report);
        fidelity_table(md, report);
    }
    md << render_pic_markdown(report.pic);

    md << "## Commands\n\n";
    if (loaded.runs.empty())
        md << "No metadata line names the command that produced these results.\n";
    for (const auto& r : loaded.runs) {
        md << "- " << code(r.command);
        std::vector<std::string> details;
        if (!r.started.empty())
            details.push_back("started " + cell(r.started));
        if (!r.machine.empty())
            details.push_back("machine " + cell(r.machine));
        if (!r.threads.empty())
            details.push_back("--threads " + cell(r.threads));
        if (!r.commit.empty())
            details.push_back("commit " + cell(r.commit));
        if (r.occurrences > 1)
            details.push_back(std::to_string(r.occurrences) + " runs");
        for (size_t i = 0; i < details.size(); ++i)
            md << (i ? ", " : " (") << details[i] << (i + 1 == details.size() ? ")" : "");
        md << "\n";
    }
    if (!plots.empty())
        md << "\n## Plots\n\n";
    for (const auto& p : plots)
        md << "- [" << p.file << "](" << p.file << "): " << cell(p.caption) << "\n";
    return md.str();
}

} // namespace spanscope::report
