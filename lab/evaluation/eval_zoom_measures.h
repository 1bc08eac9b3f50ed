// What an answer's zoom trace (engine/sekv/zoom_trace.h) says about a sekv result line of
// `spanscope-lab eval`: how much of the context SEKV expanded per answer token and layer, and
// whether the needle a question asks for was among the spans that carried the attention.
//
//   "expanded_share_median"  for every answer token and SEKV layer, |∪ over the layer's query
//                            heads of the spans expanded| / spans of the context; the median over
//                            all (token, layer) pairs (the mean of the two middle values for an
//                            even count). Absent without spans or without steps.
//   "needle_mass"            for needle tasks: {"tokens", "in_spans", "rank", "top3"}, NeedleMass.
//
// Positions are the session's (eval_needle_positions.h maps the needle's text to them); span ids
// index the spans of the context's segmentation in position order, as the trace's do.
#pragma once

#include "engine/sekv/segmentation.h"
#include "engine/sekv/zoom_trace.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace spanscope::eval {

/// The median of `values` (the mean of the two middle ones for an even count); nullopt when
/// empty.
std::optional<double> median(std::vector<double> values);

/// The median over (answer token, SEKV layer) of the distinct spans expanded by any query head
/// of that layer at that token, divided by trace.n_spans: a fraction in [0, 1]. nullopt when
/// trace.n_spans < 1 or the trace has no (step, layer) pair. Throws std::invalid_argument for a
/// span id outside [0, n_spans).
std::optional<double> expanded_share_median(const ZoomTrace& trace);

/// The attention mass of every span summed over the answer's tokens, the SEKV layers and the
/// query heads: [trace.n_spans], each a sum of shares of one head's attention weight (unitless,
/// at most steps · layers · heads). A span contributes 0 where it was not expanded. Empty when
/// no head of the trace carries a mass (ZoomHead::mass: nothing expanded, or the backend does not
/// measure it). Throws std::invalid_argument for a span id outside [0, n_spans) or a mass of
/// another length than its head's spans.
std::vector<double> span_mass_totals(const ZoomTrace& trace);

/// How the attention of an answer met the needle its question asks for.
struct NeedleMass {
    int64_t tokens = 0;   ///< the needle's tokens
    int64_t in_spans = 0; ///< of those, the ones inside a span (the rest: full-resolution rows)
    /// 1-based rank, by span_mass_totals (1 = largest), of the best-ranked span overlapping the
    /// needle among all spans of the context; ties count against the span (its rank is the
    /// number of spans whose mass is at least its own). nullopt when no span overlaps the
    /// needle or no mass was measured (span_mass_totals empty).
    std::optional<int64_t> rank;
    /// rank <= 3; nullopt with rank (no span holds the needle, or no mass was measured).
    std::optional<bool> top3;
};

/// The NeedleMass of the needle at positions `needle` ([begin, end), the session's) given the
/// context's spans (positions, ascending and disjoint, as the segmentation that sealed the
/// context; span id = index) and the answer's trace. Throws std::invalid_argument when the trace
/// has steps and trace.n_spans differs from spans.size(), and as span_mass_totals.
NeedleMass needle_mass(const ZoomTrace& trace, const std::vector<TokenSpan>& spans,
                       const TokenSpan& needle);

/// {"tokens", "in_spans", "rank" (null when absent), "top3" (null when absent)}.
nlohmann::json to_json(const NeedleMass& m);

/// Add "expanded_share_median" (when defined) and, with a needle, "needle_mass" to a sekv result
/// line: `spans` and `needle` as needle_mass takes them.
void put_zoom_measures(nlohmann::json& line, const ZoomTrace& trace,
                       const std::vector<TokenSpan>& spans, const std::optional<TokenSpan>& needle);

} // namespace spanscope::eval
