// The zoom trace of an answer (docs/sekv.md): for every generated token, for every SEKV layer
// and query head, the spans the router expanded and their relevances, with the memory per tier
// at that step. Span ids index the spans of the assembled context in position order.
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

/// The spans one query head zoomed into, ascending ids, with their relevances in (0, 1) (the
/// oracle router's: attention shares in [0, 1], sekv_routing.h), and the share of the head's
/// attention weight each one's rebuilt rows carried.
struct ZoomHead {
    std::vector<int32_t> spans;
    std::vector<float> relevance; ///< [spans.size()]
    /// [spans.size()]: Σ of the softmax weights of the span's rows in this head's mixed attention
    /// (mixed_attention.h), a share of the whole in [0, 1]; empty where it was not measured (the
    /// GPU backend, traces stored before it was kept).
    std::vector<float> mass;
};

/// One SEKV layer's routing of one query: one entry per query head.
struct LayerZoom {
    int layer = 0;
    std::vector<ZoomHead> heads; ///< [n_head]
};

/// The routing behind one generated token, and the memory the SEKV layers held then (bytes).
struct ZoomStep {
    std::vector<LayerZoom> layers; ///< one per SEKV layer, ascending layer index
    int64_t fast_tier_bytes = 0, host_tier_bytes = 0;
};

struct ZoomTrace {
    int n_spans = 0;             ///< spans in the context (ids are 0 .. n_spans - 1)
    std::vector<ZoomStep> steps; ///< [generated tokens]
    bool empty() const { return steps.empty(); }
    /// Spans expanded per generated token, averaged over the steps, layers and heads.
    double mean_expansions() const;
};

} // namespace spanscope
