// `sekv` memory: the resolution-adaptive semantic KV cache of one global-attention layer
// (DESIGN.md §3.4). Nothing is thrown away: rows arrive at full resolution (store()); once a
// document is complete, seal() holds each of its spans at two resolutions — a summary row in
// the fast tier, low-rank factors in the host tier — and keeps anchors, short spans and every
// later token (question, answer: the tail) at full resolution. Each query's router picks the
// spans to zoom into; attention then runs over full rows, summary rows and the reconstructed
// rows of the expanded spans in one online softmax (mixed_attention.h).
#pragma once

#include "memory.h"
#include "row_store.h"
#include "sekv_spans.h"

#include <memory>
#include <string_view>
#include <vector>

namespace spanscope {

struct ZoomParams;

/// A trained router for one layer (zoom_params.h trained_router makes it from a parameter
/// file): per query head a projection W [d_out][head_dim] and a threshold τ.
struct TrainedRouterLayer {
    int d_out = 0;
    std::vector<float> w;    ///< [n_head][d_out][head_dim]
    std::vector<double> tau; ///< [n_head]
};

struct SekvRouterOptions {
    /// Target fraction of spans expanded per query and head: τ of each head is calibrated on
    /// the queries of the first attend() after a seal (the question), the (1 - rate) quantile
    /// of their relevances (router.h calibrate_tau).
    double expand_rate = 0.2;
    int64_t budget_rows = 0; ///< > 0: at most this many reconstructed rows per query and head
    bool expand_all = false; ///< zoom into every span (exactness checks)
    /// A span any query head of a KV group zooms into is expanded for every head of the group
    /// (its rows are reconstructed for that KV head anyway), and the zoom trace records it for
    /// each of them. Not with a row budget (which holds per query head).
    bool share_group = true;
    std::shared_ptr<const TrainedRouterLayer> trained; ///< nullptr: training-free (W = I)
};

struct SekvOptions {
    SegmentationOptions segmentation{1.0, 4, 32};
    SpanRankOptions rank{32, 0.999, nullptr};
    SekvRouterOptions router;
    /// Fast-tier bytes of a sealed context as a fraction of what `full` holds for it: the
    /// segmentation is made coarser until its rows (plus reserve_rows) fit (segment_within_budget,
    /// which counts rows: a summary row costs about what a full row does); <= 0: no budget;
    /// >= 1: nothing is compressed (an exact no-op). What was held is measured after each
    /// answer and reported against it (a document too short for the budget cannot meet it).
    double budget = 0.35;
    /// Rows the budget keeps free for the tail (question and answer) held at full resolution.
    int64_t reserve_rows = 128;
    std::vector<int> layers; ///< layers served by SEKV; empty: every global-attention layer
    /// The static semantic baseline `chunk_summary` (issue 6; ChunkKV / SentenceKV-like): the
    /// same spans, each held by its summary row only, never expanded; no host tier (the
    /// factors are not kept).
    bool summaries_only = false;
    /// The trained zoom-in (issue 8, zoom_params.h): every SEKV layer takes its router
    /// (router.trained: W and τ, no calibration) and rank gate (rank.predictor) from it
    /// (sekv_layer_options). nullptr: training-free (W = I, τ calibrated, the energy gate).
    std::shared_ptr<const ZoomParams> zoom;
};

/// The options SEKV layer `layer` of shape `shape` runs with: `options`, and with options.zoom
/// the layer's trained router and rank gate in router.trained and rank.predictor, rank.max_rank
/// the gate's n_rank, router.share_group false (per query head, as trained) (not with
/// summaries_only: chunk_summary neither routes nor keeps factors, zoom is dropped). Throws
/// std::invalid_argument naming the layer when the parameters have no entry for it, or one
/// trained for another shape (n_head, head_dim).
SekvOptions sekv_layer_options(const SekvOptions& options, int layer, const AttentionShape& shape);

class SekvMemory final : public LayerMemory {
public:
    /// capacity: most tokens (the context size). Throws std::invalid_argument for a sliding
    /// layer shape (SEKV serves global layers) or router options out of range.
    SekvMemory(const AttentionShape& shape, int64_t capacity, double rope_base,
               const SekvOptions& options);
    /// "sekv", or "chunk_summary" with options.summaries_only.
    std::string_view policy() const override {
        return options_.summaries_only ? "chunk_summary" : "sekv";
    }
    const AttentionShape& shape() const override { return shape_; }
    /// Full-resolution rows, after everything held (positions increasing; f16-rounded).
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    /// Rows still at full resolution in [pos_begin, pos_end); throws std::logic_error when a
    /// span of the range is held at two resolutions.
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    /// Before any seal: exact attention over the full rows. After: per query and head, the
    /// router's spans expanded, the others by their summary rows (causal by position; every
    /// span lies before the queries, else std::logic_error).
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    MemoryStats stats() const override;
    int64_t n_tokens() const override { return n_stored_; }
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;
    bool seals() const override { return true; }
    bool needs_segmentation() const override { return true; }
    /// Build the spans of the request from the rows held at full resolution and hold them at
    /// two resolutions (hold_spans). Throws std::logic_error when a span's rows are not all
    /// held at full resolution.
    void seal(const SealRequest& request) override;
    const std::vector<ZoomHead>* last_zoom() const override { return &last_zoom_; }

    /// Hold `spans` (built elsewhere, e.g. restored from the project) at two resolutions,
    /// moved by delta positions: their full-resolution rows are dropped. Spans must be sorted,
    /// disjoint, inside what was stored and not already held; each must match the shape.
    /// Throws std::invalid_argument otherwise. τ is calibrated again at the next attend().
    void hold_spans(std::vector<SekvSpan> spans, int32_t delta);
    const std::vector<SekvSpan>& spans() const { return spans_; }
    const SekvOptions& options() const { return options_; }
    /// τ per query head ([n_head]); empty until calibrated.
    const std::vector<double>& tau() const { return tau_; }

private:
    void calibrate(const float* q, int64_t n_q);
    std::vector<double> relevances(const float* qh, int head) const;

    AttentionShape shape_;
    int64_t capacity_;
    double rope_base_;
    SekvOptions options_;
    int64_t n_stored_ = 0;
    RowStore rows_;               ///< the rows held at full resolution
    std::vector<SekvSpan> spans_; ///< ascending positions
    std::vector<double> tau_;
    std::vector<ZoomHead> last_zoom_;
};

} // namespace spanscope
