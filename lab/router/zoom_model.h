// The trainable model of SEKV's zoom-in and its layer-local losses (issue 8; docs/sekv.md,
// §3.4.6, §3.4.9). The base model is frozen: one training example is one recorded query of one
// SEKV layer and query head (zoom_record.h), with the spans it sees at two resolutions, and
// every loss is computed from that layer alone, so no backpropagation through the model is
// needed. Gradients are written by hand and checked against finite differences in the tests.
//
// Forward, for query q [d] of head h (kv head g) and each visible span S:
//   a = W q,  b_S = W k̄_S,  z_S = q·k̄_S/√d + ⟨a, b_S⟩/√d′ + log|S|   (relevance = σ(z_S);
//   router.h RelevanceScore, the residual form: W = 0 is the training-free router)
//   expand e_S = 1[z_S > θ]  (τ = σ(θ));  soft gate s_S = σ((z_S − θ)/T)
//   rank gates m = MLP(spectrum, k̄_S) for the key and for the value factors (router_params.h);
//   kept components h_r = 1[r < #{r' < n : m_r' > 0.5}] (at least 1), n = the span's available
//   components (its factors' rank; rank_gate_rank)
//   mixed attention (mixed_attention.h): one softmax over the full-resolution rows, the summary
//   of each unexpanded span (bias log|S|), and the rows of each expanded span rebuilt from its
//   gated factors, k̂_i = Σ_r L_ir h_r R_r (R = diag(σ) Vᵀ, span_factors.h).
// With `relax`, e_S = s_S and h = m in that forward (a smooth function of every parameter, which
// the finite-difference checks use); without, the forward is exactly inference with the learned
// thresholds, each query head alone (SekvRouterOptions::learned_tau, share_group off; with
// ZoomLossOptions::share_group, the union of its KV group's decisions, share_group on) and the hard
// decisions pass gradients straight through (dL/ds_S := dL/de_S, dL/dm := dL/dh; Bengio et al.
// 2013, "Estimating or Propagating Gradients Through Stochastic Neurons", §4). With share_group the
// hard union's gradient goes through the relaxed union: dL/ds_i := dL/de · Π_{j≠i}(1 − s_j).
//
// Losses (each a mean over the examples given):
//   zoom:     weighted binary cross-entropy of σ(z_S − θ) against the label y_S = 1 for the
//             smallest set of spans covering `coverage` (0.9) of the teacher's mass on the
//             visible spans; positives weighted by pos_weight
//   distill:  ‖o − o*‖² / ‖o*‖² of the layer's attention output o against full attention's o*
//   recon:    Σ_r (1 − m_r)² σ²_r / Σσ² per span and factor (the relative squared Frobenius error
//             of U·diag(m⊙s)·Vᵀ, components past r_max always lost), mean over spans
//   budget:   expansion_weight · Σ e_S|S| / Σ|S| + rank_weight · Σ h_r / #components, of the
//             forward's decisions (without relax: the rows expanded and the components kept, what
//             inference spends). It is linear in e and h, so its straight-through gradient is
//             the gradient of the soft surrogate expansion_weight · Σ s_S|S| / Σ|S| +
//             rank_weight · mean_r m_r (ZoomLoss::budget_soft): both values have one gradient,
//             and the loss reports the forward's, as distill does. recon is not linear in m: its
//             value and gradient are the soft gates' (recon_hard is a diagnostic).
//   ranking:  KL(P ‖ softmax(z)) over the visible spans, P the teacher's mass normalised over
//             them (ZoomLoss::ranking; ListNet, Cao et al. 2007, §4); weight w_ranking, 0 by
//             default.
#pragma once

#include "engine/kernels/thread_pool.h"
#include "engine/sekv/router_params.h"
#include "lab/router/zoom_examples.h"

#include <cstdint>
#include <vector>

namespace spanscope {

struct ZoomLossOptions {
    double temperature = 0.5; ///< T of the soft gate s_S
    double coverage = 0.9;    ///< ρ of the zoom labels
    double pos_weight = 1.0;  ///< weight of the positive labels in the cross-entropy
    double w_zoom = 1.0;      ///< weight of each loss in the total
    double w_distill = 3.0;
    double w_recon = 1.0;
    double w_budget = 0.75;
    double expansion_weight = 1.0; ///< inside the budget penalty
    double rank_weight = 0.25;
    /// Weight of the ranking loss (ZoomLoss::ranking): the spans' order within each query, the
    /// order inference's τ, calibrated on the question, decides by. 0: not trained on.
    double w_ranking = 0.0;
    bool relax = false; ///< soft decisions in the forward (finite-difference checks)
    /// Decide as inference does with SekvRouterOptions::share_group: a span is expanded for a
    /// query head when any head of its KV group asks for it (hard: the OR of their decisions;
    /// relaxed: 1 − Π(1 − s) of their soft gates), so the distillation and the budget see the
    /// group's union and their gradients reach every head of the group (the zoom and ranking
    /// losses stay each head's own). Off: each query head alone.
    bool share_group = false;
    /// Hard forward with every factor at its full rank (the rank gate ignored, every
    /// component it reads kept): what the router alone loses, for evaluation (no effect with
    /// relax).
    /// Inference's --full-rank (SekvOptions::trained_rank_gate off) differs: it keeps the
    /// training-free energy gate's rank, capped at rank.max_rank.
    bool full_rank = false;
};

/// Loss components (means over the examples) and what the hard decisions did.
struct ZoomLoss {
    /// The loss components (header comment). budget is the penalty of the forward's decisions
    /// (the hard ones without relax), what inference spends; total = Σ w · component.
    double zoom = 0, distill = 0, recon = 0, budget = 0, total = 0;
    /// The ranking loss (reported whatever its weight): KL(P ‖ softmax(z)) over the query's
    /// visible spans, P_S the teacher's attention mass on span S over its mass on the visible
    /// spans (0 when that is 0), z the relevance logits; a listwise loss (ListNet, Cao et al.
    /// 2007, §4, with the teacher's masses as the target distribution). Its gradient,
    /// softmax(z)_S − P_S, moves only W: it does not depend on θ, so it trains the order of the
    /// spans within a query, what a threshold calibrated per question keeps.
    double ranking = 0;
    /// Not a loss (no gradient): the relative squared error of the factors truncated at the
    /// hard rank, Σ_{r ≥ rank} σ²_r / Σσ², mean over spans and their key and value factors; what
    /// inference loses where recon measures the soft gates.
    double recon_hard = 0;
    /// The budget loss's soft surrogate (the value whose gradient training follows, equal to the
    /// straight-through gradient of budget): expansion_weight · Σ s_S|S| / Σ|S| + rank_weight ·
    /// mean_r m_r over the visible spans' key and value factors; mean over examples. Equal to
    /// budget with relax; without, budget is the penalty of the hard decisions,
    /// expansion_weight · Σ_{S expanded} |S| / Σ|S| + rank_weight · Σ kept rank / Σ available
    /// components.
    double budget_soft = 0;
    double expansion_rate = 0; ///< expanded spans / visible spans (hard decisions)
    double mean_rank = 0;      ///< mean kept rank over the visible spans' key and value factors
    double label_rate = 0;     ///< positive labels / visible spans
    double label_recall = 0;   ///< positive labels expanded / positive labels (hard decisions)
    int64_t examples = 0, spans = 0;
    ZoomLoss& operator+=(const ZoomLoss& o);
};

/// Losses of `examples` (means) and, when grad is non-null, their gradients with respect to
/// every parameter (grad has params' shapes; it is overwritten). Examples are spread over the
/// pool's threads. Throws std::invalid_argument for an example outside the set.
ZoomLoss zoom_loss(const RouterParams& params, const std::vector<ZoomExampleSet>& sets,
                   const std::vector<ZoomItem>& examples, const ZoomLossOptions& options,
                   RouterParams* grad, ThreadPool& pool);

/// What the forward of one example did (for the tests and the evaluation of expansions).
struct ZoomForward {
    std::vector<float> out;          ///< [head_dim] the mixed attention's output
    std::vector<double> z;           ///< [visible spans] relevance logits
    std::vector<char> expanded;      ///< [visible spans] hard decisions z > θ (with share_group:
                                     ///< any head of the KV group's)
    std::vector<int> rank_k, rank_v; ///< [visible spans] kept ranks (hard)
    std::vector<int64_t> full_rows;  ///< token positions attended at full resolution
};
ZoomForward zoom_forward(const RouterParams& params, const ZoomExampleSet& set,
                         const ZoomExample& example, const ZoomLossOptions& options);

/// θ of every (layer, head) set so that a fraction `rate` of the visible spans of `examples`
/// expand under the current W: θ = the (1 − rate) quantile of their z (router.h calibrate_tau,
/// on logits), stored as the float at or above it (at rate 1: the float below the smallest z),
/// so that round(rate · n) of a head's n spans pass z > θ, ties and scores within one float
/// step above the quantile aside. Throws std::invalid_argument for no examples of some head or
/// a rate outside [0, 1].
void calibrate_theta(RouterParams& params, const std::vector<ZoomExampleSet>& sets,
                     const std::vector<ZoomItem>& examples, double rate);

/// Parameters with the given shapes, initialised from `seed`: W with independent
/// N(0, (w_scale/√d)²) entries, θ = 0, the gate's w1, w2 N(0, 1/fan_in), b1 = 0, b2 = gate_bias.
/// W small but not zero: the correction ⟨W q, W k̄⟩ is bilinear in W, so W = 0 (the
/// training-free router) is a stationary point the gradient never leaves. gate_bias 0 leaves
/// every gate undecided (m ≈ 0.5: about half the components kept, which half by chance); a
/// positive one starts the gates open (m ≈ σ(gate_bias) > 0.5 for most components), as the
/// training-free gate keeps every component, without saturating the sigmoid.
/// Throws std::invalid_argument for a w_scale that is negative or not finite, a gate_bias that
/// is not finite, or a layer shape with a size below 1 or a gate whose head_dim differs from
/// the layer's.
inline constexpr double kZoomInitWScale = 0.1;   ///< init_router_params' default w_scale
inline constexpr double kZoomInitGateBias = 1.0; ///< the default gate_bias (zoom-train --gate-bias)
RouterParams init_router_params(const std::vector<RouterLayerParams>& shapes, uint64_t seed,
                                double w_scale = kZoomInitWScale,
                                double gate_bias = kZoomInitGateBias);

/// Every trainable array of p, in a fixed order, with whether weight decay applies to it
/// (the matrices W, w1, w2; not θ or the biases).
struct ZoomTensorRef {
    std::vector<float>* values;
    bool decay;
    const char* name;
};
std::vector<ZoomTensorRef> zoom_tensors(RouterParams& p);

} // namespace spanscope
