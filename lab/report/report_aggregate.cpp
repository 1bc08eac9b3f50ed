// Aggregation of loaded results (report_data.h): accuracy and its confidence interval, the
// per-task tables, the summary per budget, fidelity and the accuracy-vs-memory points.
#include "lab/report/report_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <tuple>

namespace spanscope::report {

namespace {

const char* const kPolicyOrder[] = {"full", "sekv", "chunk_summary", "snapkv", "h2o", "streaming"};

} // namespace

std::string budget_percent(double fraction) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.2f", fraction * 100.0);
    std::string s = buf;
    while (!s.empty() && s.back() == '0')
        s.pop_back();
    if (!s.empty() && s.back() == '.')
        s.pop_back();
    return s;
}

namespace {

double mean(const std::vector<double>& v) {
    double sum = 0;
    for (double x : v)
        sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

using ConfigKey = std::pair<std::string, double>;

/// The paired difference a − b (report_data.h Difference); nullopt when they share no sample.
std::optional<Difference> difference(const Report& report, const Config& a, const Config& b) {
    Difference d;
    d.other = b.label();
    double sum = 0, variance = 0;
    for (const auto& t : report.tasks) {
        const ConfigRow* ra = t.row(a);
        const ConfigRow* rb = t.row(b);
        if (!ra || !rb) {
            d.unshared_tasks += ra || rb;
            d.a_tasks_left_out += ra != nullptr;
            continue;
        }
        std::vector<double> diffs;
        for (const auto& [key, score] : ra->scores) {
            const auto it = rb->scores.find(key);
            if (it != rb->scores.end())
                diffs.push_back(score - it->second);
        }
        if (diffs.empty()) {
            ++d.tasks_without_pairs;
            ++d.a_tasks_left_out;
            continue;
        }
        d.unpaired_samples +=
            static_cast<int>(ra->scores.size() + rb->scores.size() - 2 * diffs.size());
        const double n = static_cast<double>(diffs.size());
        const double m = mean(diffs);
        sum += m;
        double ss = 0;
        for (const double x : diffs)
            ss += (x - m) * (x - m);
        // No spread seen is no certainty: a task with one pair counts the largest variance of a
        // difference in [−1, 1] (1), one whose pairs all agree the variance of one pair in n
        // differing by 1 (≈ 1/n).
        const double s2 = n < 2 ? 1.0 : (ss > 0 ? ss / (n - 1) : 1.0 / n);
        variance += s2 / n;
        ++d.common_tasks;
        d.paired_samples += static_cast<int>(diffs.size());
    }
    if (d.common_tasks == 0)
        return std::nullopt;
    const double tasks = d.common_tasks;
    d.value = sum / tasks;
    const double half = 1.96 * std::sqrt(variance) / tasks;
    d.ci = {std::max(-1.0, d.value - half), std::min(1.0, d.value + half)};
    d.partial = d.unshared_tasks > 0 || d.tasks_without_pairs > 0 || d.unpaired_samples > 0;
    return d;
}

/// The router comparison of trained against training_free (report_data.h RouterComparison);
/// nullopt when they share no sample.
std::optional<RouterComparison> router_comparison(const Report& report, const Config& trained,
                                                  const Config& training_free) {
    const auto d = difference(report, trained, training_free);
    if (!d)
        return std::nullopt;
    RouterComparison c;
    c.trained = trained;
    c.training_free = training_free;
    c.accuracy = *d;
    // Pooled over the samples both configurations report the value for.
    auto pair_means = [&](std::map<SampleKey, double> ConfigRow::*values, int& n, double& a,
                          double& b) {
        double sa = 0, sb = 0;
        for (const auto& t : report.tasks) {
            const ConfigRow* ra = t.row(trained);
            const ConfigRow* rb = t.row(training_free);
            if (!ra || !rb)
                continue;
            for (const auto& [key, x] : ra->*values) {
                const auto it = (rb->*values).find(key);
                if (it == (rb->*values).end())
                    continue;
                sa += x, sb += it->second, ++n;
            }
        }
        if (n > 0)
            a = sa / n, b = sb / n;
    };
    pair_means(&ConfigRow::expansions, c.paired_expansions, c.trained_expansions,
               c.training_free_expansions);
    pair_means(&ConfigRow::kl, c.paired_kl, c.trained_kl, c.training_free_kl);
    return c;
}

SummaryEntry summary_entry(const Report& report, const Config& c) {
    SummaryEntry e;
    e.config = c;
    std::vector<double> acc, fast;
    for (const auto& t : report.tasks) {
        const ConfigRow* row = t.row(c);
        if (!row)
            continue;
        acc.push_back(row->all.mean);
        e.samples += row->all.n;
        if (row->mean_fast_tier)
            fast.push_back(*row->mean_fast_tier);
    }
    e.tasks = static_cast<int>(acc.size());
    e.macro_accuracy = mean(acc);
    if (!fast.empty())
        e.mean_fast_tier = mean(fast);
    return e;
}

BudgetSummary budget_summary(const Report& report, double budget,
                             const std::vector<Config>& configs) {
    BudgetSummary s;
    s.budget = budget;
    std::optional<Config> full, sekv;
    for (const auto& c : configs) {
        const bool is_full_reference = c.is_full() && c.budget == 1.0;
        if (!is_full_reference && c.budget != budget)
            continue;
        s.entries.push_back(summary_entry(report, c));
        if (is_full_reference)
            full = c;
        else if (c.policy == "sekv")
            sekv = c;
    }
    for (const auto& e : s.entries)
        if (const auto partner = training_free_partner(e.config.policy))
            if (const auto cmp = router_comparison(report, e.config, {*partner, budget}))
                s.router_comparisons.push_back(*cmp);
    if (!sekv)
        return s;
    if (full)
        s.sekv_minus_full = difference(report, *sekv, *full);
    // The best baseline: the compressed policy (neither full nor a form of sekv) at this budget
    // with the smallest paired difference sekv − baseline, among those measured on every task
    // sekv was (all of them when none was).
    std::vector<Difference> candidates;
    for (const auto& e : s.entries) {
        if (e.config.is_full() || e.config.policy.rfind("sekv", 0) == 0)
            continue;
        if (const auto d = difference(report, *sekv, e.config))
            candidates.push_back(*d);
    }
    const bool any_covers =
        std::any_of(candidates.begin(), candidates.end(),
                    [](const Difference& d) { return d.a_tasks_left_out == 0; });
    for (const auto& d : candidates)
        if ((!any_covers || d.a_tasks_left_out == 0) &&
            (!s.sekv_minus_best_baseline || d.value < s.sekv_minus_best_baseline->value))
            s.sekv_minus_best_baseline = d;
    return s;
}

bool ends_with(const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

} // namespace

std::optional<std::string> training_free_partner(const std::string& policy) {
    static const std::string trained = "sekv-trained", oracle = "sekv-oracle";
    static const std::string per_query = "-tau-per-query", uniform = "-uniform-summary";
    // Two-stage routing (-rerankN, the last suffix report_data gives): the training-free router
    // with it against the same router without it, the trained router with it against the
    // training-free router with it.
    if (const auto at = policy.rfind("-rerank"); at != std::string::npos && at > 0) {
        const std::string rest = policy.substr(0, at), suffix = policy.substr(at);
        if (rest == "sekv" + per_query || rest == "sekv" + per_query + uniform)
            return rest;
        const auto partner = training_free_partner(rest);
        return partner ? std::optional<std::string>(*partner + suffix) : std::nullopt;
    }
    if (ends_with(policy, uniform)) {
        const std::string rest = policy.substr(0, policy.size() - uniform.size());
        if (rest == "sekv" || rest == "sekv" + per_query) // against the design's summary rows
            return rest;
        const auto partner = training_free_partner(rest);
        return partner ? std::optional<std::string>(*partner + uniform) : std::nullopt;
    }
    if (policy.rfind(trained, 0) != 0 && policy.rfind(oracle, 0) != 0)
        return std::nullopt;
    return ends_with(policy, per_query) ? "sekv" + per_query : std::string("sekv");
}

std::string Config::label() const {
    if (is_full() && budget == 1.0)
        return "full";
    return policy + "@" + budget_percent(budget) + "%";
}

int policy_rank(const std::string& policy) {
    const int known = static_cast<int>(std::size(kPolicyOrder));
    for (int i = 0; i < known; ++i)
        if (policy == kPolicyOrder[i])
            return i;
    return known;
}

bool config_before(const Config& a, const Config& b) {
    if (a.is_full() != b.is_full())
        return a.is_full();
    if (a.budget != b.budget)
        return a.budget > b.budget;
    return std::make_tuple(policy_rank(a.policy), a.policy) <
           std::make_tuple(policy_rank(b.policy), b.policy);
}

Accuracy accuracy_of(const std::vector<double>& scores) {
    Accuracy a;
    a.n = static_cast<int>(scores.size());
    if (scores.empty())
        return a;
    a.mean = mean(scores);
    for (double s : scores)
        if (s != 0 && s != 1)
            a.binary = false;
    a.ci = eval::mean_interval(scores); // Wilson for 0/1 scores, else the normal approximation
    return a;
}

const ConfigRow* TaskTable::row(const Config& c) const {
    for (const auto& r : rows)
        if (r.config == c)
            return &r;
    return nullptr;
}

Report aggregate(const LoadedResults& loaded) {
    Report report;
    std::map<std::string, std::vector<const ResultRow*>> by_task;
    // A task on a haystack other than the prose is a task of its own ("niah (noise)").
    for (const auto& r : loaded.rows)
        by_task[r.haystack.empty() || r.haystack == "prose" ? r.task
                                                            : r.task + " (" + r.haystack + ")"]
            .push_back(&r);

    std::vector<Config> all_configs;
    for (const auto& [task, rows] : by_task) {
        TaskTable t;
        t.task = task;
        std::set<int> lengths, depths;
        std::map<ConfigKey, std::vector<const ResultRow*>> by_config;
        for (const ResultRow* r : rows) {
            lengths.insert(r->target_length);
            depths.insert(r->depth_percent());
            by_config[{r->policy, r->budget}].push_back(r);
        }
        t.lengths.assign(lengths.begin(), lengths.end());
        t.depths.assign(depths.begin(), depths.end());
        for (const auto& [key, crows] : by_config) {
            ConfigRow row;
            row.config = {key.first, key.second};
            std::map<int, std::vector<double>> by_length;
            std::map<std::pair<int, int>, std::vector<double>> by_cell;
            std::vector<double> all, fast;
            for (const ResultRow* r : crows) {
                const SampleKey key{r->target_length, r->depth, r->index, r->seed};
                row.scores[key] = r->score;
                if (r->expansions)
                    row.expansions[key] = *r->expansions;
                if (r->fidelity.kl)
                    row.kl[key] = *r->fidelity.kl;
                by_length[r->target_length].push_back(r->score);
                by_cell[{r->target_length, r->depth_percent()}].push_back(r->score);
                all.push_back(r->score);
                if (r->fast_tier_fraction)
                    fast.push_back(*r->fast_tier_fraction);
                row.over_budget += r->within_budget == false;
            }
            for (const auto& [length, scores] : by_length)
                row.by_length[length] = accuracy_of(scores);
            for (const auto& [cell, scores] : by_cell)
                row.by_cell[cell] = accuracy_of(scores);
            row.all = accuracy_of(all);
            if (!fast.empty())
                row.mean_fast_tier = mean(fast);
            t.rows.push_back(std::move(row));
            if (std::find(all_configs.begin(), all_configs.end(), t.rows.back().config) ==
                all_configs.end())
                all_configs.push_back(t.rows.back().config);
        }
        std::stable_sort(t.rows.begin(), t.rows.end(), [](const ConfigRow& a, const ConfigRow& b) {
            return config_before(a.config, b.config);
        });
        report.tasks.push_back(std::move(t));
    }
    std::stable_sort(all_configs.begin(), all_configs.end(), config_before);

    // A summary per budget of the compressed configurations; full alone when there are none.
    std::set<double, std::greater<>> budgets;
    for (const auto& c : all_configs)
        if (!(c.is_full() && c.budget == 1.0))
            budgets.insert(c.budget);
    if (budgets.empty())
        budgets.insert(1.0);
    for (double b : budgets)
        report.budgets.push_back(budget_summary(report, b, all_configs));

    // Fidelity per configuration, each metric over the rows that report it.
    for (const auto& c : all_configs) {
        FidelityRow f;
        f.config = c;
        std::vector<double> greedy, top1, kl, expansions;
        for (const auto& r : loaded.rows) {
            if (r.policy != c.policy || r.budget != c.budget)
                continue;
            const Fidelity& fi = r.fidelity;
            if (r.expansions)
                expansions.push_back(*r.expansions);
            if (!fi.greedy_agreement && !fi.top1_agreement && !fi.kl && !r.expansions)
                continue;
            ++f.n;
            if (fi.greedy_agreement)
                greedy.push_back(*fi.greedy_agreement);
            if (fi.top1_agreement)
                top1.push_back(*fi.top1_agreement);
            if (fi.kl)
                kl.push_back(*fi.kl);
        }
        if (f.n == 0)
            continue;
        if (!greedy.empty())
            f.greedy_agreement = mean(greedy);
        if (!top1.empty())
            f.top1_agreement = mean(top1);
        if (!kl.empty())
            f.kl = mean(kl);
        if (!expansions.empty())
            f.expansions = mean(expansions);
        report.fidelity.push_back(f);
    }
    report.pic = aggregate_pic(loaded.pic_rows);
    return report;
}

std::optional<double> macro_accuracy(const Report& report, const Config& c,
                                     const std::vector<std::string>& tasks) {
    std::vector<double> acc;
    for (const auto& t : report.tasks) {
        if (!tasks.empty() && std::find(tasks.begin(), tasks.end(), t.task) == tasks.end())
            continue;
        if (const ConfigRow* row = t.row(c))
            acc.push_back(row->all.mean);
    }
    if (acc.empty())
        return std::nullopt;
    return mean(acc);
}

std::vector<MemoryPoint> memory_points(const TaskTable& task) {
    std::vector<MemoryPoint> points;
    for (const auto& row : task.rows) {
        std::optional<double> fast = row.mean_fast_tier;
        if (!fast && row.config.is_full())
            fast = 1.0;
        if (fast)
            points.push_back({row.config, *fast, row.all.mean});
    }
    return points;
}

std::vector<MemoryPoint> macro_memory_points(const Report& report) {
    std::vector<Config> order;
    std::map<ConfigKey, std::pair<std::vector<double>, std::vector<double>>> sums;
    for (const auto& t : report.tasks) {
        for (const auto& p : memory_points(t)) {
            auto& [fast, acc] = sums[{p.config.policy, p.config.budget}];
            if (fast.empty())
                order.push_back(p.config);
            fast.push_back(p.fast_tier);
            acc.push_back(p.accuracy);
        }
    }
    std::stable_sort(order.begin(), order.end(), config_before);
    std::vector<MemoryPoint> points;
    for (const auto& c : order) {
        const auto& [fast, acc] = sums[{c.policy, c.budget}];
        points.push_back({c, mean(fast), mean(acc)});
    }
    return points;
}

} // namespace spanscope::report
