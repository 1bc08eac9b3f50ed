// A router with inference's rule on the trained zoom-in's examples (issue 8): the reference a
// trained router must beat, measured in the training's own terms on the same recordings. The
// decisions are SekvMemory's: relevance σ(q·k̄/√d [+ ⟨W q, W k̄⟩/√d′] + log|S|) (router.h
// span_relevance; W only for a trained router), τ per (layer, query head) the (1 − rate)
// quantile of the relevances over the examples given, or over each query's own
// (tau_per_query; at inference τ is calibrated on each question's queries), a span expanded for
// every head of a KV group when one of them asks for it (SekvRouterOptions::share_group), every
// factor at full rank; attention by mixed_attention.h over the recorded rows. Without W it is the
// training-free router.
#pragma once

#include "engine/kernels/thread_pool.h"
#include "engine/sekv/router_params.h"
#include "lab/router/zoom_examples.h"

#include <cstdint>
#include <vector>

namespace spanscope {

struct ZoomReferenceOptions {
    double expand_rate = 0.2; ///< fraction of the visible spans each head's τ expands
    bool share_group = true;  ///< a KV group's heads expand the union of their choices
    double coverage = 0.9;    ///< of the zoom labels (zoom_model.h ZoomLossOptions::coverage)
    /// The trained router whose W scores the spans: each example's layer must have parameters
    /// of its shape, W [n_head][d_out][head_dim] (must outlive the call). Only W is used: τ is
    /// calibrated at expand_rate as above (the file's θ is ignored) and every factor stays at
    /// full rank (its rank gate is ignored). nullptr: the training-free router.
    const RouterParams* trained = nullptr;
    /// τ of each head calibrated on each query's own relevances alone (the (1 − rate) quantile
    /// over its visible spans: round(rate · visible spans) expanded per query and head), rather
    /// than over all the examples given. Inference calibrates on the relevances of all of a
    /// question's queries together (sekv_routing.h), between the two.
    bool tau_per_query = false;
};

/// Means over the examples (expansion rate and recall over their visible spans).
struct ZoomReference {
    double distill = 0;        ///< ‖o − o*‖² / ‖o*‖², as zoom_model.h's distill
    double expansion_rate = 0; ///< expanded spans / visible spans
    double label_recall = 0;   ///< positive labels expanded / positive labels
    int64_t examples = 0, spans = 0;
};

/// The router's distillation, expansions and label recall on `examples` (the training-free
/// router, or options.trained's W). With a trained W and share_group off its decisions are
/// those of zoom_model.h's forward after calibrate_theta at the same rate, ties aside (τ is a
/// quantile of relevances in double here, θ one of logits rounded up to float there). Throws
/// std::invalid_argument for an expand_rate outside [0, 1], an example outside the sets (or its
/// head or query outside its layer), or a layer without trained parameters of its shape.
ZoomReference router_reference(const std::vector<ZoomExampleSet>& sets,
                               const std::vector<ZoomItem>& examples,
                               const ZoomReferenceOptions& options, ThreadPool& pool);

} // namespace spanscope
