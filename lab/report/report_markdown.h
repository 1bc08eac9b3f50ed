// spanscope-report's report.md: the per-task accuracy tables, the summary per budget, fidelity,
// the commands that produced the results and the list of plots.
#pragma once

#include "lab/report/report_data.h"

#include <string>
#include <vector>

namespace spanscope::report {

/// A fraction as a percentage with one decimal and no sign: 0.6667 → "66.7".
std::string percent(double fraction);

/// A table cell: "accuracy % [95 % CI low–high] (n)", e.g. "66.7 % [20.8–93.9] (3)"; "–"
/// when n is 0.
std::string accuracy_cell(const Accuracy& a);

/// A difference of fractions in percentage points with its sign: 0.123 → "+12.3 points",
/// -0.05 → "−5.0 points".
std::string points(double difference);

/// The whole report.md: title, inputs, per-task tables, summary per budget, fidelity (when any
/// row has it), commands, and the plots with their captions.
std::string render_markdown(const LoadedResults& loaded, const Report& report,
                            const std::string& title, const std::vector<PlotSpec>& plots);

} // namespace spanscope::report
