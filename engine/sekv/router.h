// The SEKV router (docs/sekv.md): which spans a query zooms into. Training-free form:
// relevance(S) = σ(q·k̄_S / √d + log|S|), k̄_S the span's summary key; a span expands when its
// relevance exceeds τ, calibrated per (layer, head) so that a target fraction of spans expands;
// an optional row budget keeps the most relevant expanded spans whose rows fit. The trained
// router (issue 8, router_params.h) adds a learned correction through the same calls (residual
// form, docs/sekv.md "The relevance's form"):
//   relevance(S) = σ(q·k̄_S / √d + ⟨W q, W k̄_S⟩ / √d′ + log|S|),  W [d′][d] per layer and head,
// so that W = 0 is the training-free router exactly. A trained router may also carry a sketch
// basis (span_sketch.h): the logit then gains the second-order term of the span's attention
// mass estimated from the span's sketch. docs/sekv.md writes
// σ(⟨W q, normalise(W k̄_S)⟩/√d′ + log|S|); docs/sekv.md gives the measurements that led here.
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

/// M x [rows] for M [rows][d] row-major and x [d], summed in double: the router's projections
/// (W q, W k̄, U q, U k).
std::vector<double> project_rows(const float* m, int64_t rows, int64_t d, const float* x);

/// The relevance logit of every span for one query, shared by inference (sekv_routing.h) and
/// training (zoom_model.h) so that both score spans with one formula.
/// z(S) = q·k̄/√d + [⟨W q, W k̄⟩/√d_out] + log|S| + {s (U q)·δ_S + ½ s² (U q)ᵀ Σ_S (U q)}, the
/// bracket only with a trained W, the brace only with a sketch basis U (span_sketch.h; s = 1/√d).
class RelevanceScore {
public:
    /// q: [d]; w: [d_out][d] row-major, or nullptr for the training-free form; sketch_basis:
    /// [sketch_dim][d], the trained router's basis U of the query's KV head (span_sketch.h), or
    /// nullptr for none. The pointers must outlive the object. Throws std::invalid_argument for
    /// d < 1, w with d_out < 1 or a sketch basis with sketch_dim < 1.
    RelevanceScore(const float* q, int64_t d, const float* w = nullptr, int64_t d_out = 0,
                   const float* sketch_basis = nullptr, int sketch_dim = 0);
    /// z(S) for summary key summary_k [d] of a span of `size` tokens (>= 1; throws
    /// std::invalid_argument otherwise). With a trained W and wk non-null, wk [d_out] receives
    /// W k̄ (the training's backward needs it). With a sketch basis, sketch is the span's
    /// sketch of the query's KV head [sketch_length(sketch_dim)] and z gains
    /// sketch_logit_term (span_sketch.h); a span without one throws std::invalid_argument.
    double logit(const float* summary_k, int64_t size, double* wk = nullptr,
                 const float* sketch = nullptr) const;
    /// σ(logit(summary_k, size, nullptr, sketch)), in (0, 1).
    double relevance(const float* summary_k, int64_t size, const float* sketch = nullptr) const;
    /// W q [d_out] (empty without W).
    const std::vector<double>& projected_query() const { return wq_; }

private:
    const float* q_;
    int64_t d_;
    const float* w_;
    int64_t d_out_;
    std::vector<double> wq_;
    int sketch_dim_ = 0;
    std::vector<double> uq_; ///< U q [sketch_dim]
};

/// Relevance of a span for a query, in (0, 1): σ(RelevanceScore(q, d, w, d_out).logit(k̄, size)).
/// q, summary_k: [d]; w: [d_out][d] row-major, or nullptr for the training-free form
/// σ(q·k̄/√d + log|S|). size: the span's tokens |S| (>= 1). Throws std::invalid_argument for
/// d < 1, size < 1, or w given with d_out < 1.
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
