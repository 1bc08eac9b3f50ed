// The report's PNG files: names (sanitized, distinct) and captions.
#include "lab/report/report_data.h"

#include <set>

namespace spanscope::report {

namespace {
bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/// stem + ".png", with "-2", "-3", ... appended when another plot has the name already.
std::string unique_name(std::set<std::string>& used, const std::string& stem) {
    std::string name = stem;
    for (int i = 2; used.count(name); ++i)
        name = stem + "-" + std::to_string(i);
    used.insert(name);
    return name + ".png";
}
} // namespace

std::string sanitize_file_part(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (name_char(c))
            out += c;
        else if (!out.empty() && out.back() != '-')
            out += '-';
    }
    while (!out.empty() && out.back() == '-')
        out.pop_back();
    while (!out.empty() && out.front() == '-')
        out.erase(out.begin());
    return out.empty() ? "x" : out;
}

std::vector<PlotSpec> plan_plots(const Report& report) {
    std::vector<PlotSpec> plots;
    std::set<std::string> used = {"accuracy-vs-memory-all"};
    for (size_t t = 0; t < report.tasks.size(); ++t) {
        const TaskTable& task = report.tasks[t];
        for (size_t r = 0; r < task.rows.size(); ++r) {
            const std::string label = task.rows[r].config.label();
            PlotSpec p;
            p.kind = PlotSpec::Kind::Heatmap;
            p.task = t;
            p.row = r;
            p.file = unique_name(used, "heatmap-" + sanitize_file_part(task.task) + "-" +
                                           sanitize_file_part(label));
            p.caption = "accuracy of " + label + " on " + task.task +
                        " by needle depth (x) and target length (y)";
            plots.push_back(std::move(p));
        }
    }
    for (size_t t = 0; t < report.tasks.size(); ++t) {
        PlotSpec p;
        p.kind = PlotSpec::Kind::AccuracyVsMemory;
        p.task = t;
        p.file =
            unique_name(used, "accuracy-vs-memory-" + sanitize_file_part(report.tasks[t].task));
        p.caption = "accuracy against mean fast-tier memory on " + report.tasks[t].task +
                    ", one line per policy across budgets";
        plots.push_back(std::move(p));
    }
    if (report.tasks.empty())
        return plots; // pic-eval rows only: no evaluation plot
    PlotSpec all;
    all.kind = PlotSpec::Kind::AccuracyVsMemory;
    all.all_tasks = true;
    all.file = "accuracy-vs-memory-all.png";
    all.caption = "accuracy against mean fast-tier memory, macro average over " +
                  std::to_string(report.tasks.size()) +
                  (report.tasks.size() == 1 ? " task" : " tasks") +
                  ", one line per policy across budgets";
    plots.push_back(std::move(all));
    return plots;
}

} // namespace spanscope::report
