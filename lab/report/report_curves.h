// spanscope-report's training curves of the SEKV zoom-in (issue 8): the JSON Lines that
// `spanscope-lab zoom-train --curves FILE` appends, one per logged step and split,
//
//   {"step":12,"split":"train","lr":0.0012,"grad_norm":0.83,"loss":{"zoom":0.71,"distill":0.052,
//    "recon":0.31,"budget":0.27,"total":0.83,"expansion_rate":0.21,"label_rate":0.09,
//    "mean_rank":17.5,"recon_hard":0.01,"budget_soft":0.25,"examples":64}}
//   {"step":100,"split":"held_out","loss":{...the same keys...}}
//
// loaded, checked and de-duplicated (a resumed run appends lines again; the last line for a
// (split, step) wins), and the Markdown section that compares the first held-out evaluation
// (step 0 is the one before training) with the last. No Qt here; the PNGs are drawn by
// report_curves_plot.h.
#pragma once

#include <istream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spanscope::report {

/// A value the curves show: a key of the "loss" object.
struct CurveComponent {
    const char* key;   ///< "zoom", …, "mean_rank"
    const char* label; ///< the y axis' label, e.g. "zoom loss"
    bool loss;         ///< a loss term (issue 8 asks each to fall), not a diagnostic
    /// Not in every curve file (files written before zoom-train reported it lack it): shown
    /// only when every line read has it (Curves::components).
    bool optional = false;
};

/// The components in the order of the report: the loss terms zoom, distill, recon, budget and
/// total, then the diagnostics expansion_rate, mean_rank, recon_hard (what the hard ranks lose)
/// and budget_soft (the budget's soft surrogate; zoom_model.h), each required in every line; then
/// the optional ranking (the ranking loss, KL of the teacher's span masses to the softmax of the
/// relevances; a loss term only in runs trained with --w-ranking, so listed as a diagnostic).
const std::vector<CurveComponent>& curve_components();

/// One line that was kept.
struct CurvePoint {
    long long step = 0; ///< ≥ 0
    /// One per curve_components(), in that order; finite, or NaN for an optional component the
    /// line does not have.
    std::vector<double> values;
    std::optional<double> label_rate;
    std::optional<long long> examples; ///< ≥ 0
    std::optional<double> lr;          ///< train lines
    std::optional<double> grad_norm;   ///< train lines
    std::string source;                ///< "FILE:LINE"
};

/// Everything read from the curve files.
struct Curves {
    std::vector<std::string> files;
    std::vector<CurvePoint> train;    ///< one per step, ascending
    std::vector<CurvePoint> held_out; ///< one per step, ascending
    int lines = 0;                    ///< curve lines read, duplicates included
    int duplicates = 0; ///< lines that replaced an earlier one of the same split and step
    /// The components shown (indices into curve_components(), ascending): every required one,
    /// and each optional one that every kept line has.
    std::vector<size_t> components;
};

/// Reads curve lines, de-duplicating as it goes (across files too). Blank lines are skipped;
/// keys it does not know are ignored.
class CurvesLoader {
public:
    /// Reads one file. Throws InputError ("cannot open FILE: reason", or "FILE:LINE: reason"
    /// for a malformed line).
    void add_file(const std::string& path);
    /// Reads JSON Lines from a stream; name is the file name the errors give.
    void add_stream(std::istream& in, const std::string& name);
    /// The curves read so far. Throws InputError when no line was read.
    Curves finish() const;

private:
    void add_line(const std::string& line, const std::string& name, int line_no);

    std::vector<std::string> files_;
    std::map<long long, CurvePoint> train_, held_out_;
    int lines_ = 0;
    int duplicates_ = 0;
};

/// Loads every file, in order. Throws InputError.
Curves load_curves(const std::vector<std::string>& paths);

/// (step, value) of one component (an index into curve_components()), in the points' order.
std::vector<std::pair<long long, double>> curve_series(const std::vector<CurvePoint>& points,
                                                       size_t component);

/// The training series is smoothed over this many steps.
inline constexpr long long kTrainWindowSteps = 25;

/// A trailing moving average by step: at each point of step s, the mean of the values of the
/// points whose step is in (s − window_steps, s] (with a point per step and window 25, the last
/// 25 points; fewer at the start). series must be ascending by step; window_steps ≥ 1 (a
/// smaller one counts as 1).
std::vector<std::pair<long long, double>>
moving_average(const std::vector<std::pair<long long, double>>& series, long long window_steps);

/// One component's held-out values at the first and the last evaluation.
struct HeldOutChange {
    size_t component = 0; ///< index into curve_components()
    long long first_step = 0, last_step = 0;
    double first = 0, last = 0;
    double change = 0;              ///< last − first
    std::optional<double> relative; ///< change / |first|; none when first is 0
    bool lower() const { return last < first; }
};

/// One entry per component shown (Curves::components), in order; empty without held-out lines.
std::vector<HeldOutChange> held_out_changes(const Curves& curves);

/// The PNG of a component: "zoom-train-<key>.png".
std::string curve_file(size_t component);

/// The "## Zoom-in training curves" section of report.md: the inputs, the table of held-out
/// values at the first and the last evaluation with the change (absolute and %), a line naming
/// the components whose last held-out value is lower than the first and those that are not
/// (with how many of the five loss components are lower), and the links to the PNGs
/// (curve_file); components not shown (Curves::components) are left out of all of it. Without
/// held-out lines, or with one, it says so instead of comparing.
std::string render_curves_markdown(const Curves& curves);

} // namespace spanscope::report
