// The rank gate's training pass (issue 8; zoom_model.h): the forward of router_params.h's MLP
// with its activations kept, and its backward written by hand (checked against finite
// differences in test_zoom_model.cpp).
#pragma once

#include "engine/sekv/router_params.h"
#include "engine/sekv/span_factors.h"

#include <vector>

namespace spanscope {

/// The rank gate of one factor of one span: input x [n_in], hidden [n_hidden] and gates m
/// [n_rank] of the forward, kept for the backward pass.
struct GateRun {
    std::vector<float> x, hidden, m;
    int rank_hard = 1; ///< kept components (hard)
    int n_avail = 0;   ///< components the factor has (<= n_rank)
};

/// The gate of factor f (its spectrum f.sigma2; f.rank components) for a span with summary key
/// summary_k [head_dim] as the gate reads it (sekv_spans.h gate_summary_key): the forward, and
/// the hard rank, clamped to [1, min(f.rank, n_rank)] as inference clamps it.
GateRun run_gate(const RankGateMlp& gate, const SpanFactors& f, const float* summary_k);

/// Backward of the gate MLP: dm [n_rank] (dL/dm) -> the gradients of w1, b1, w2, b2,
/// accumulated into g (same shapes as gate).
void gate_backward(const RankGateMlp& gate, const GateRun& r, const std::vector<double>& dm,
                   RankGateMlp& g);

} // namespace spanscope
