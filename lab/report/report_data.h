// spanscope-report's data: evaluation results (JSON Lines written by `spanscope-lab eval
// --out`) loaded, checked and de-duplicated, then aggregated into the numbers the report shows:
// accuracy with a 95 % confidence interval per task, configuration and target length, the
// summary per budget, fidelity and the points of the accuracy-vs-memory plots. No Qt here, so
// the tests can check every number without drawing anything.
#pragma once

#include "lab/evaluation/eval_metrics.h"
#include "lab/report/report_pic.h"

#include <istream>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace spanscope::report {

/// An input that cannot be used: unreadable file, malformed line, no result rows. what() is one
/// line, "FILE:LINE: reason" for a line.
class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// What a policy kept of the full model's answer (absent for full).
struct Fidelity {
    std::optional<double> greedy_agreement;
    std::optional<double> top1_agreement;
    std::optional<double> kl;
};

/// One (sample, policy) result line. Keys the report does not use are ignored.
struct ResultRow {
    std::string task;
    std::string haystack;
    std::string settings; ///< model and SEKV settings the line was measured with ("" if absent)
    int target_length = 0;
    double depth = 0; ///< in [0, 1]
    long long index = 0;
    long long seed = 0;
    std::string policy;
    double budget = 1;                        ///< fraction of the full KV memory, 1 for full
    double score = 0;                         ///< in [0, 1]
    std::optional<double> fast_tier_fraction; ///< the key, else memory's fast / full bytes
    std::optional<bool> within_budget;
    Fidelity fidelity;
    /// sekv: spans expanded per generated token, mean over the SEKV layers and query heads.
    std::optional<double> expansions;
    /// sekv-trained: the parameter file's digest (router_params.h RouterParams::digest), "" if
    /// absent.
    std::string zoom_digest;
    std::string source; ///< "FILE:LINE" of the line that was kept

    /// The depth as a whole percentage: the heat maps' column.
    int depth_percent() const;
};

/// A metadata line ({"command": ..., no "policy"}): the run that wrote the results.
struct RunInfo {
    std::string command;
    std::string started;
    std::string machine; ///< the CPU and its hardware threads
    std::string threads; ///< the threads the run used ("" if absent)
    std::string commit;
    int occurrences = 1; ///< metadata lines with this command
};

/// Everything read from the input files.
struct LoadedResults {
    std::vector<std::string> files;
    std::vector<ResultRow> rows;  ///< one per distinct sample key, in first-seen order
    std::vector<PicRow> pic_rows; ///< pic-eval lines, one per distinct key (report_pic.h)
    std::vector<RunInfo> runs;    ///< one per distinct command, in first-seen order
    int result_lines = 0;         ///< result lines read, duplicates included
    int duplicates = 0;           ///< result lines that replaced an earlier one with the same key
};

/// Reads result lines into a LoadedResults, de-duplicating as it goes: a line with the same
/// (task, haystack, target_length, depth, index, seed, policy, budget) as an earlier one
/// replaces it (the last one wins: resumed runs may overlap). Lines with a "selector" are
/// pic-eval results (pic_row_key is their key).
class ResultLoader {
public:
    /// Reads one file. Throws InputError when it cannot be opened or a line is malformed.
    void add_file(const std::string& path);
    /// Reads JSON Lines from a stream; name is the file name the errors give. Lines of the
    /// trained router from two parameter files (zoom_digest) are refused: one "sekv-trained"
    /// configuration is one parameter file; so are lines of one configuration (policy, budget)
    /// measured with two "settings".
    void add_stream(std::istream& in, const std::string& name);
    /// The results read so far. Throws InputError when there is no result row of either kind.
    LoadedResults finish() const;

private:
    void add_line(const std::string& line, const std::string& name, int line_no);

    LoadedResults loaded_;
    std::map<std::string, size_t> row_of_key_;
    std::map<std::string, size_t> pic_row_of_key_;
    std::map<std::string, size_t> run_of_command_;
    std::string zoom_digest_, zoom_digest_source_; ///< the trained router's first parameter file
    /// "policy@budget" → (settings, source of its first line).
    std::map<std::string, std::pair<std::string, std::string>> settings_of_config_;
};

/// Loads and de-duplicates every file, in order. Throws InputError.
LoadedResults load_results(const std::vector<std::string>& paths);

/// A configuration: a policy at a budget.
struct Config {
    std::string policy;
    double budget = 1;

    /// "full" for full at budget 1, else "policy@NN%" (e.g. "sekv@35%", "snapkv@12.5%").
    std::string label() const;
    bool is_full() const { return policy == "full"; }
    bool operator==(const Config& o) const { return policy == o.policy && budget == o.budget; }
};

/// A budget as a percentage without trailing zeros: 0.35 → "35", 0.125 → "12.5".
std::string budget_percent(double fraction);

/// The report's order: full first, then budget descending, then policy in the order full, sekv,
/// chunk_summary, snapkv, h2o, streaming, others by name.
bool config_before(const Config& a, const Config& b);

/// The rank of a policy in that order (unknown policies after the known ones).
int policy_rank(const std::string& policy);

/// A 95 % confidence interval, as fractions (lab/evaluation/eval_metrics.h computes them).
using Interval = eval::Interval;

/// Mean score of a set of samples with its 95 % confidence interval.
struct Accuracy {
    int n = 0;
    double mean = 0;
    Interval ci;
    bool binary = true; ///< every score 0 or 1: Wilson interval, else normal approximation
};

/// The accuracy of scores: Wilson interval when every score is 0 or 1, else mean ± 1.96·s/√n
/// clamped to [0, 1] (s the sample standard deviation; with one sample the interval is [0, 1]).
/// n = 0 gives an Accuracy with n = 0.
Accuracy accuracy_of(const std::vector<double>& scores);

/// A sample within a task: (target length, depth, index, seed), the fields that name one
/// generated prompt; every configuration answered the same prompt for the same key.
using SampleKey = std::tuple<int, double, long long, long long>;

/// One configuration's results on one task.
struct ConfigRow {
    Config config;
    std::map<SampleKey, double> scores; ///< each sample's score, for paired differences
    /// sekv: each sample's spans expanded per generated token and KL (nats), where its line
    /// has them: the router comparison pairs them (RouterComparison).
    std::map<SampleKey, double> expansions, kl;
    std::map<int, Accuracy> by_length;               ///< target length → accuracy
    std::map<std::pair<int, int>, Accuracy> by_cell; ///< (target length, depth %) → accuracy
    Accuracy all;                                    ///< every length pooled
    std::optional<double> mean_fast_tier;            ///< mean fast_tier_fraction (fraction)
    int over_budget = 0;                             ///< rows with within_budget false
};

/// One task's table: the lengths and depths that occur, a row per configuration.
struct TaskTable {
    std::string task;
    std::vector<int> lengths;    ///< ascending
    std::vector<int> depths;     ///< depth percentages, ascending
    std::vector<ConfigRow> rows; ///< in config_before order

    /// The row of a configuration, nullptr when the task has none.
    const ConfigRow* row(const Config& c) const;
};

/// One policy's line of a budget's summary.
struct SummaryEntry {
    Config config;
    double macro_accuracy = 0; ///< mean over tasks of the task's pooled accuracy
    int tasks = 0;
    int samples = 0;
    std::optional<double> mean_fast_tier; ///< mean over tasks of the task's mean fast tier
};

/// A paired difference a − b (fractions): in each task both have, the mean over the samples
/// both answered (SampleKey) of score(a) − score(b); then the mean over those tasks. The 95 %
/// interval is value ± 1.96·√(Σₜ sₜ²/nₜ)/T clamped to [−1, 1], sₜ² the sample variance of the
/// paired differences in task t, nₜ their number, T the number of tasks (normal
/// approximation). A variance that cannot be seen is not taken as 0: sₜ² = 1 for one pair,
/// 1/nₜ when every pair has the same difference.
struct Difference {
    std::string other; ///< label of b
    double value = 0;
    Interval ci;
    int common_tasks = 0;
    int paired_samples = 0;      ///< samples in the difference, over the common tasks
    int unpaired_samples = 0;    ///< samples of a or b in a common task without a partner
    int unshared_tasks = 0;      ///< tasks that a or b has and the other lacks
    int tasks_without_pairs = 0; ///< tasks both have without a sample in common
    int a_tasks_left_out = 0;    ///< tasks of a not in the difference
    bool partial = false;        ///< tasks or samples of a or b are not in the difference
};

/// A trained router's configuration against the training-free one with the same τ rule, at one
/// budget (issue 8's comparison): "sekv-trained…-tau-per-query" against "sekv-tau-per-query",
/// every other "sekv-trained…" against "sekv". Expansions and KL are compared on the samples
/// both answered and both report them for, pooled over the tasks: mean(trained) / mean(other).
struct RouterComparison {
    Config trained;
    Config training_free;
    Difference accuracy;       ///< trained − training-free (Difference's rules)
    int paired_expansions = 0; ///< samples in the expansions means
    double trained_expansions = 0, training_free_expansions = 0; ///< per token, means
    int paired_kl = 0;                                           ///< samples in the KL means
    double trained_kl = 0, training_free_kl = 0;                 ///< nats, means
};

/// The training-free configuration a trained one is compared with (RouterComparison), or
/// nullopt when policy is not a form of "sekv-trained" or "sekv-oracle" (the oracle router,
/// "sekv-oracle-tau-per-query", is compared as a trained one is: the trained fields hold it).
/// Plain-mean summary rows (…-uniform-summary): the training-free one is compared with the
/// design's ("sekv-tau-per-query-uniform-summary" with "sekv-tau-per-query"), the others with the
/// training-free one of the same summaries. Two-stage routing (…-rerankN, report_data's last
/// suffix): the training-free router with it is compared with the same router without it
/// ("sekv-tau-per-query-rerank4" with "sekv-tau-per-query"), a trained one with the training-free
/// one with the same N.
std::optional<std::string> training_free_partner(const std::string& policy);

/// The summary of one budget: full (the reference) and every policy run at that budget.
struct BudgetSummary {
    double budget = 1;
    std::vector<SummaryEntry> entries;                  ///< full first, then policy order
    std::optional<Difference> sekv_minus_best_baseline; ///< best compressed policy other than sekv
    std::optional<Difference> sekv_minus_full;
    /// Each trained router's configuration against its training-free partner, in config order.
    std::vector<RouterComparison> router_comparisons;
};

/// Mean fidelity of one configuration over the rows that report it.
struct FidelityRow {
    Config config;
    int n = 0; ///< rows with a fidelity object
    std::optional<double> greedy_agreement;
    std::optional<double> top1_agreement;
    std::optional<double> kl;
    std::optional<double> expansions; ///< mean spans expanded per token (sekv rows)
};

/// A point of an accuracy-vs-memory plot (fractions).
struct MemoryPoint {
    Config config;
    double fast_tier = 0;
    double accuracy = 0;
};

/// Everything the report shows.
struct Report {
    std::vector<TaskTable> tasks;       ///< by task name
    std::vector<BudgetSummary> budgets; ///< budget descending
    std::vector<FidelityRow> fidelity;  ///< configurations with fidelity, in config order
    PicReport pic;                      ///< the pic-eval results (empty without them)
};

/// Aggregates loaded results into the report's tables.
Report aggregate(const LoadedResults& loaded);

/// Macro average over tasks of the pooled accuracy of c over the given tasks (all of c's tasks
/// when tasks is empty); nullopt when c has none of them.
std::optional<double> macro_accuracy(const Report& report, const Config& c,
                                     const std::vector<std::string>& tasks = {});

/// The accuracy-vs-memory points of one task: one per configuration with a mean fast tier (full
/// without one is placed at 100 %).
std::vector<MemoryPoint> memory_points(const TaskTable& task);

/// The same over all tasks: per configuration, the macro average over its tasks of accuracy and
/// mean fast tier.
std::vector<MemoryPoint> macro_memory_points(const Report& report);

/// A PNG file of the report: what it shows and its name in the output folder.
struct PlotSpec {
    enum class Kind { Heatmap, AccuracyVsMemory };
    Kind kind = Kind::Heatmap;
    size_t task = 0;        ///< index into Report::tasks (unused for all_tasks)
    size_t row = 0;         ///< index into that task's rows (heat maps)
    bool all_tasks = false; ///< the macro-average accuracy-vs-memory plot
    std::string file;       ///< e.g. "heatmap-niah_single-sekv-35.png"
    std::string caption;    ///< one line
};

/// A name part made of letters, digits, '-' and '_' only: every other run of characters becomes
/// one '-', and '-' at either end goes ("sekv@35%" → "sekv-35"); "x" when nothing is left.
std::string sanitize_file_part(const std::string& s);

/// The plots of a report, with distinct file names: heatmap-<task>-<config>.png per task and
/// configuration, accuracy-vs-memory-<task>.png per task, then accuracy-vs-memory-all.png.
std::vector<PlotSpec> plan_plots(const Report& report);

} // namespace spanscope::report
