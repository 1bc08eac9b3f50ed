// One training example of the zoom-in model, forward and backward (issue 8; zoom_model.h
// gives the model, its losses and the sources of their formulas). zoom_model.cpp sums these
// passes over the examples and threads; this file is the per-example arithmetic: the routing of
// the head (or its KV group), the rank gates, the mixed attention against full attention's
// output, the five losses and their gradients written by hand.
#pragma once

#include "engine/sekv/router_params.h"
#include "lab/router/zoom_examples.h"
#include "lab/router/zoom_model.h"

#include <cstdint>

namespace spanscope {

/// Everything one example needs, resolved. Build it only with zoom_example_view: the pass
/// recovers the query's index and head from where q lies in L->rec->q, and zoom_loss the
/// layer's index in the parameters from where P lies in params.layers. It points into the
/// example set (L), its recording (q, target, mass, through L->rec) and the parameters (P); all
/// three must outlive it unchanged.
struct ZoomExampleView {
    const ZoomExampleSet::Layer* L = nullptr; ///< the example's SEKV layer in the set
    const RouterLayerParams* P = nullptr;     ///< that layer's parameters
    const float* q = nullptr;                 ///< the query [head_dim] of the example's query head
    const float* target = nullptr;            ///< full attention's output for it [head_dim]
    /// the teacher's attention mass on each of the recording's spans [R.spans.size()] (all
    /// spans, visible or not; each a fraction of the head's attention, in [0, 1])
    const float* mass = nullptr;
    int g = 0;         ///< the query head's KV head
    int64_t n_vis = 0; ///< visible spans: spans [0, n_vis) of the recording
    int32_t qpos = 0;  ///< the query's position (tokens)
};

/// The view of `ex` in `set` with the parameters of its layer. Throws std::invalid_argument for
/// a layer, query or head outside the set, or parameters that do not cover the layer (absent,
/// or another head count or head_dim).
ZoomExampleView zoom_example_view(const RouterParams& params, const ZoomExampleSet& set,
                                  const ZoomExample& ex);

/// One example's forward and losses (added to `loss` as sums: zoom_loss divides by the
/// examples and spans) and, when grad is non-null, its backward: the gradients of the example's
/// layer, scaled by `weight` (1 / examples), added into grad (the shapes of v.P). With fwd
/// non-null the forward's decisions and output are written there. R is the recording the view
/// points into. `o` is not checked here (zoom_loss checks temperature > 0 and coverage in
/// (0, 1]). Throws std::invalid_argument (span_sketch.h, router.h) when the parameters carry a
/// sketch basis and the set's spans lack a sketch of its size (a set prepared for other
/// parameters).
void zoom_example_pass(const ZoomExampleView& v, const ZoomRecord& R, const ZoomLossOptions& o,
                       double weight, RouterLayerParams* grad, ZoomLoss& loss, ZoomForward* fwd);

} // namespace spanscope
