// The SEKV router (DESIGN.md §3.4): which spans a query zooms into. Training-free form:
// relevance(S) = σ(q·k̄_S / √d + log|S|), k̄_S the span's summary key (W the identity); a span
// expands when its relevance exceeds τ, calibrated per (layer, head) so that a target fraction
// of spans expands; an optional row budget keeps the most relevant expanded spans whose rows
// fit. The trained router (issue 8, zoom_params.h) supplies W (d′×d per layer and head) and τ
// through the same calls: relevance(S) = σ(⟨W q, W k̄_S⟩ / √d′ + log|S|) (DESIGN.md §3.4.5
// normalises W k̄_S; docs/sekv.md "The relevance's form" says why this does not).
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

/// Relevance of a span for a query, in (0, 1). q, summary_k: [d]; w: [d_out][d] row-major, or
/// nullptr for the training-free form (the identity, no normalisation: σ(q·k̄/√d + log|S|)).
/// With w: σ(⟨W q, W k̄⟩/√d_out + log|S|), W k̄ not normalised (at W = I it is the
/// training-free form). size: the span's tokens |S| (>= 1). Throws
/// std::invalid_argument for d < 1, size < 1, or w given with d_out < 1.
double span_relevance(const float* q, const float* summary_k, int64_t d, int64_t size,
                      const float* w = nullptr, int64_t d_out = 0);

/// Indices of the spans to expand, ascending: those with relevance > tau; with budget_rows > 0,
/// taken greedily by decreasing relevance while their rows (sizes) fit the budget, so the rows
/// expanded never exceed it. relevance, sizes: [spans].
std::vector<int> route_spans(const std::vector<double>& relevance,
                             const std::vector<int64_t>& sizes, double tau,
                             int64_t budget_rows = 0);

/// τ such that a fraction `target` (in [0, 1]) of the recorded relevances exceed it: the
/// (1 - target) quantile of the records (at target 0, the largest; at 1, just below the
/// smallest). Throws std::invalid_argument for no records or a target outside [0, 1].
double calibrate_tau(std::vector<double> recorded, double target);

} // namespace spanscope
