// Loading the zoom-in training curves and their Markdown section (report_curves.h).
#include "lab/report/report_curves.h"

#include "lab/report/report_data.h"
#include "lab/report/report_line_reader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace spanscope::report {

namespace {

const char* const kDash = "\u2013";  // en dash: an empty cell, and between steps
const char* const kMinus = "\u2212"; // minus sign

/// A value as the table shows it: four significant digits ("0.71", "0.052", "17.5").
std::string value_text(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    std::string s = buf;
    if (s == "-0")
        s = "0";
    if (!s.empty() && s.front() == '-')
        s.replace(0, 1, kMinus);
    return s;
}

/// A change with its sign ("+0.04", "−0.19"; "0" without one).
std::string signed_text(double v) {
    const std::string magnitude = value_text(std::fabs(v));
    if (magnitude == "0")
        return magnitude;
    return (v < 0 ? kMinus : "+") + magnitude;
}

/// A relative change as a percentage with one decimal and its sign ("−26.8 %").
std::string signed_percent(double fraction) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.1f", std::fabs(fraction * 100.0));
    const std::string magnitude = buf;
    if (magnitude == "0.0")
        return "0.0 %";
    return (fraction < 0 ? kMinus : "+") + magnitude + " %";
}

/// The words for a list of components: "zoom, recon and total", or "none".
std::string names(const std::vector<std::string>& keys) {
    if (keys.empty())
        return "none";
    std::string s;
    for (size_t i = 0; i < keys.size(); ++i)
        s += (i == 0 ? "" : i + 1 == keys.size() ? " and " : ", ") + keys[i];
    return s;
}

CurvePoint parse_curve_point(const LineReader& r) {
    CurvePoint point;
    if (!r.find("step"))
        r.fail("curve line without \"step\"");
    point.step = r.integer("step");
    if (point.step < 0)
        r.fail("\"step\" " + std::to_string(point.step) + " is negative");
    if (const json* v = r.find("lr"))
        point.lr = r.number_of(*v, "lr");
    if (const json* v = r.find("grad_norm"))
        point.grad_norm = r.number_of(*v, "grad_norm");
    const json* loss = r.find("loss");
    if (!loss)
        r.fail("curve line without \"loss\"");
    if (!loss->is_object())
        r.fail("\"loss\" is not an object");
    for (const CurveComponent& c : curve_components()) {
        const auto it = loss->find(c.key);
        if (it == loss->end() || it->is_null()) {
            if (!c.optional)
                r.fail(std::string("\"loss\" has no \"") + c.key + "\"");
            point.values.push_back(std::numeric_limits<double>::quiet_NaN());
            continue;
        }
        point.values.push_back(r.number_of(*it, std::string("loss.") + c.key));
    }
    point.label_rate = r.optional_number(loss, "label_rate", "loss.label_rate");
    if (const auto examples = r.optional_number(loss, "examples", "loss.examples")) {
        if (*examples < 0 || *examples != std::floor(*examples) || *examples > 9.0e15)
            r.fail("\"loss.examples\" " + key_number(*examples) + " is not a count");
        point.examples = static_cast<long long>(*examples);
    }
    return point;
}

} // namespace

const std::vector<CurveComponent>& curve_components() {
    static const std::vector<CurveComponent> components = {
        {"zoom", "zoom loss", true},
        {"distill", "distillation loss", true},
        {"recon", "reconstruction loss", true},
        {"budget", "budget loss", true},
        {"total", "total loss", true},
        {"expansion_rate", "expansion rate", false},
        {"mean_rank", "mean rank", false},
        {"recon_hard", "reconstruction error of the hard ranks", false},
        {"budget_soft", "budget's soft surrogate", false},
        {"ranking", "ranking loss (KL of span masses)", false, true},
    };
    return components;
}

void CurvesLoader::add_file(const std::string& path) {
    std::ifstream in = open_lines(path);
    files_.push_back(path);
    add_stream(in, path);
}

void CurvesLoader::add_stream(std::istream& in, const std::string& name) {
    for_each_line(in, name,
                  [&](const std::string& line, int line_no) { add_line(line, name, line_no); });
}

void CurvesLoader::add_line(const std::string& raw, const std::string& name, int line_no) {
    const std::optional<json> parsed = parse_object_line(raw, name, line_no);
    if (!parsed)
        return;
    const json& obj = *parsed;
    const LineReader r(obj, name, line_no);
    if (!r.find("split"))
        r.fail("curve line without \"split\"");
    const std::string split = r.string("split");
    if (split != "train" && split != "held_out")
        r.fail("\"split\" is \"" + split + "\", not \"train\" or \"held_out\"");
    CurvePoint point = parse_curve_point(r);
    point.source = name + ":" + std::to_string(line_no);
    ++lines_;
    auto& series = split == "train" ? train_ : held_out_;
    const auto [it, inserted] = series.try_emplace(point.step);
    if (!inserted)
        ++duplicates_;
    it->second = std::move(point);
}

Curves CurvesLoader::finish() const {
    if (lines_ == 0) {
        std::string files;
        for (const auto& f : files_)
            files += (files.empty() ? "" : ", ") + f;
        throw InputError("no training-curve lines in " +
                         (files.empty() ? std::string("the input") : files));
    }
    Curves c;
    c.files = files_;
    for (const auto& [step, point] : train_)
        c.train.push_back(point);
    for (const auto& [step, point] : held_out_)
        c.held_out.push_back(point);
    c.lines = lines_;
    c.duplicates = duplicates_;
    const auto& all = curve_components();
    for (size_t k = 0; k < all.size(); ++k) {
        auto has = [k](const CurvePoint& p) { return !std::isnan(p.values.at(k)); };
        if (!all[k].optional || (std::all_of(c.train.begin(), c.train.end(), has) &&
                                 std::all_of(c.held_out.begin(), c.held_out.end(), has)))
            c.components.push_back(k);
    }
    return c;
}

Curves load_curves(const std::vector<std::string>& paths) {
    CurvesLoader loader;
    for (const auto& p : paths)
        loader.add_file(p);
    return loader.finish();
}

std::vector<std::pair<long long, double>> curve_series(const std::vector<CurvePoint>& points,
                                                       size_t component) {
    std::vector<std::pair<long long, double>> s;
    s.reserve(points.size());
    for (const auto& p : points)
        s.emplace_back(p.step, p.values.at(component));
    return s;
}

std::vector<std::pair<long long, double>>
moving_average(const std::vector<std::pair<long long, double>>& series, long long window_steps) {
    const long long window = std::max(1LL, window_steps);
    std::vector<std::pair<long long, double>> out;
    out.reserve(series.size());
    size_t begin = 0; // the first point inside the window
    for (size_t i = 0; i < series.size(); ++i) {
        const long long step = series[i].first;
        while (series[begin].first <= step - window)
            ++begin;
        // Summed afresh for each point (at most `window` points when steps are distinct), so
        // no rounding error builds up along a long run.
        double sum = 0;
        for (size_t j = begin; j <= i; ++j)
            sum += series[j].second;
        out.emplace_back(step, sum / static_cast<double>(i - begin + 1));
    }
    return out;
}

std::vector<HeldOutChange> held_out_changes(const Curves& curves) {
    std::vector<HeldOutChange> changes;
    if (curves.held_out.empty())
        return changes;
    const CurvePoint& first = curves.held_out.front();
    const CurvePoint& last = curves.held_out.back();
    for (const size_t c : curves.components) {
        HeldOutChange h;
        h.component = c;
        h.first_step = first.step;
        h.last_step = last.step;
        h.first = first.values.at(c);
        h.last = last.values.at(c);
        h.change = h.last - h.first;
        if (h.first != 0)
            h.relative = h.change / std::fabs(h.first);
        changes.push_back(h);
    }
    return changes;
}

std::string curve_file(size_t component) {
    return std::string("zoom-train-") + curve_components().at(component).key + ".png";
}

std::string render_curves_markdown(const Curves& curves) {
    const auto& components = curve_components();
    std::ostringstream md;
    md << "## Zoom-in training curves\n\n"
       << "Input: ";
    for (size_t i = 0; i < curves.files.size(); ++i)
        md << (i ? ", " : "") << "`" << curves.files[i] << "`";
    md << (curves.files.empty() ? "" : ". ") << curves.train.size()
       << (curves.train.size() == 1 ? " training step" : " training steps") << " and "
       << curves.held_out.size()
       << (curves.held_out.size() == 1 ? " held-out evaluation" : " held-out evaluations");
    if (!curves.held_out.empty())
        md << " (steps " << curves.held_out.front().step << kDash << curves.held_out.back().step
           << ")";
    md << ".";
    if (curves.duplicates > 0)
        md << " " << curves.duplicates
           << (curves.duplicates == 1 ? " line repeated a split and step"
                                      : " lines repeated a split and step")
           << " (a resumed run); the last line read was kept.";
    md << " The training series are a moving average over the last " << kTrainWindowSteps
       << " steps.\n\n";

    const std::vector<HeldOutChange> changes = held_out_changes(curves);
    if (changes.empty()) {
        md << "No held-out evaluation in the input.\n\n";
    } else {
        const long long a = changes.front().first_step, b = changes.front().last_step;
        md << "Held-out values at the first evaluation (step " << a
           << (a == 0 ? ", before training" : "") << ") and the last (step " << b << "):\n\n"
           << "| component | first (step " << a << ") | last (step " << b
           << ") | change | change % |\n|---|---:|---:|---:|---:|\n";
        for (const auto& h : changes)
            md << "| " << components[h.component].key << " | " << value_text(h.first) << " | "
               << value_text(h.last) << " | " << signed_text(h.change) << " | "
               << (h.relative ? signed_percent(*h.relative) : kDash) << " |\n";
        md << "\n";
        if (a == b) {
            md << "Only one held-out evaluation (step " << a << "): nothing to compare yet.\n\n";
        } else {
            std::vector<std::string> lower, not_lower;
            std::vector<std::string> diagnostics;
            int losses = 0, losses_lower = 0;
            for (const auto& h : changes) {
                const CurveComponent& c = components[h.component];
                (h.lower() ? lower : not_lower).push_back(c.key);
                if (!c.loss)
                    diagnostics.push_back(c.key);
                losses += c.loss;
                losses_lower += c.loss && h.lower();
            }
            md << "Lower at the last held-out evaluation than at the first: " << names(lower)
               << "; not lower: " << names(not_lower) << ". Loss components lower: " << losses_lower
               << " of " << losses << " (issue 8 asks for all; " << names(diagnostics)
               << (diagnostics.size() == 1 ? " is a diagnostic" : " are diagnostics")
               << ", not losses).\n\n";
        }
    }

    md << "Plots (training: light, moving average; held-out: dark, with a point per "
          "evaluation):\n\n";
    for (const size_t c : curves.components)
        md << "- [" << curve_file(c) << "](" << curve_file(c) << "): held-out and training "
           << components[c].key << "\n";
    return md.str();
}

} // namespace spanscope::report
