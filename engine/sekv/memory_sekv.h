// `sekv` memory: the resolution-adaptive semantic KV cache of one global-attention layer
// (docs/sekv.md). Nothing is thrown away: rows arrive at full resolution (store()); once a
// document is complete, seal() holds each of its spans at two resolutions — a summary row in
// the fast tier, low-rank factors in the host tier — and keeps anchors, short spans and every
// later token (question, answer: the tail) at full resolution. Each query's router picks the
// spans to zoom into; attention then runs over full rows, summary rows and the reconstructed
// rows of the expanded spans in one online softmax (mixed_attention.h).
#pragma once

#include "engine/memory/memory.h"
#include "engine/memory/row_store.h"
#include "engine/sekv/sekv_routing.h"
#include "engine/sekv/sekv_spans.h"

#include <memory>
#include <string_view>
#include <vector>

namespace spanscope {

struct RouterParams;

struct SekvOptions {
    SegmentationOptions segmentation{1.0, 4, 32};
    /// The energy gate at 99.9 %; right factors in Q8_0 (F16 where the head dimension is not a
    /// multiple of 32; span_factors.h).
    SpanRankOptions rank{32, 0.999, nullptr, 0, TensorType::Q8_0};
    SekvRouterOptions router;
    /// Fast-tier bytes of a sealed context as a fraction of what `full` holds for it: the
    /// segmentation is made coarser until its rows (plus reserve_rows) fit (segment_within_budget,
    /// which counts rows: a summary row costs about what a full row does); <= 0: no budget;
    /// >= 1: nothing is compressed (an exact no-op). What was held is measured after each
    /// answer and reported against it (a document too short for the budget cannot meet it).
    double budget = 0.35;
    /// Rows the budget keeps free for the tail (question and answer) held at full resolution.
    int64_t reserve_rows = 128;
    std::vector<int> layers; ///< layers served by SEKV; empty: sekv_layers()'s default (model.h)
    /// The static semantic baseline `chunk_summary` (issue 6; ChunkKV / SentenceKV-like): the
    /// same spans, each held by its summary row only, never expanded; no host tier (the
    /// factors are not kept).
    bool summaries_only = false;
    /// Summary rows as the plain means of their span's keys and values (weights 1/|S|) instead
    /// of the surprisal-weighted means of docs/sekv.md (span_weights). An evaluation setting
    /// (`eval --summary-weights uniform`; docs/sekv.md, "What did not work"):
    /// the trained router, whose training reads surprisal-weighted summaries, is refused with it
    /// (sekv_layer_options), and the project store keeps the design's weights.
    bool uniform_summary = false;
    /// The trained router's parameters (router_params.h): every SEKV layer takes its router
    /// (router.trained: W and the learned τ, used with router.learned_tau) and rank gate
    /// (rank.predictor) from it (sekv_layer_options). nullptr: training-free (W = 0, τ
    /// calibrated, the energy gate).
    std::shared_ptr<const RouterParams> router_params;
    /// With router_params: build the spans' factors with its trained rank gate (true), or with the
    /// energy gate of `rank` as the training-free router does (false: the trained router alone,
    /// an ablation of the rank gate).
    bool trained_rank_gate = true;
};

/// The options SEKV layer `layer` of shape `shape` runs with: `options`, and with
/// options.router_params the layer's trained router in router.trained and (with
/// trained_rank_gate) its rank gate in rank.predictor, rank.max_rank the gate's n_rank (not with
/// summaries_only: chunk_summary neither routes nor keeps factors, the parameters are dropped).
/// Throws std::invalid_argument naming the layer when the parameters have no entry for it, or
/// one trained for another shape (n_head, head_dim), and for router parameters with
/// uniform_summary.
SekvOptions sekv_layer_options(const SekvOptions& options, int layer, const AttentionShape& shape);

/// The fast-tier rows one span costs under `options`, for segment_within_budget: 1 (its summary
/// row: a key and a value of head_dim floats per KV head, as a full row) plus, with a trained
/// router whose layers keep a key sketch, sketch_length(m) / (2 · head_dim) (the sketch's floats
/// per KV head, span_sketch.h, over a row's), the largest over the parameter file's layers since
/// one segmentation serves every SEKV layer. 1 without router parameters or with summaries_only.
/// Unitless (rows per span); never below 1.
double sekv_span_rows(const SekvOptions& options);

/// The spans of a sealed context built from the rows held at full resolution (build_span per
/// span of request.segmentation, positions request.pos_begin + its offsets), with the rank
/// options of `options` and the layer's RoPE frequencies; with options.summaries_only at rank 1
/// (the caller drops the factors); with options.uniform_summary each summary row the plain mean
/// of the span's rows. With a trained router that has a sketch basis, each span carries
/// its key sketch from the rows (span_key_sketch_rows). Throws std::invalid_argument for a request
/// without segmentation or surprisal or a span outside it, std::logic_error when a span's rows are
/// not all in `rows`.
std::vector<SekvSpan> seal_spans(const RowStore& rows, const SealRequest& request,
                                 const AttentionShape& shape, const RopeFrequencies& rope,
                                 const SekvOptions& options);

/// The key sketches of spans about to be held (SekvMemory, DeviceSekvMemory): with a router
/// that has a sketch basis, computed from each span's factors, or, with `sketched` (spans from
/// seal_spans, sketched from their rows), checked (std::logic_error when one lacks it);
/// without a basis, dropped.
void set_span_sketches(std::vector<SekvSpan>& spans, const SekvRouterOptions& router, int head_dim,
                       bool sketched);

/// Throws std::invalid_argument naming the first span of `spans` that does not match the
/// shape (a summary and factors per KV head, of the span's rows and head_dim) or is not after
/// the previous one.
void check_spans(const std::vector<SekvSpan>& spans, const AttentionShape& shape);

/// Drop the rows of `spans` from `rows`: each span's rows must all be there (throws
/// std::invalid_argument naming the span otherwise, before anything is dropped).
void drop_span_rows(RowStore& rows, const std::vector<SekvSpan>& spans);

/// Throws std::logic_error naming the first span of `spans` that overlaps the positions
/// [pos_begin, pos_end): those are held at two resolutions, not as rows (read_rows).
void check_rows_outside_spans(const std::vector<SekvSpan>& spans, int32_t pos_begin,
                              int32_t pos_end);

class SekvMemory final : public LayerMemory {
public:
    /// capacity: most tokens (the context size). Throws std::invalid_argument for a sliding
    /// layer shape (SEKV serves global layers) or router options out of range.
    SekvMemory(const AttentionShape& shape, int64_t capacity, const RopeFrequencies& rope,
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
    /// A summary row's mass and an expanded span's (its rebuilt rows together) go to the span's
    /// positions, spread evenly; a full-resolution row's to its position.
    bool reports_mass() const override { return true; }
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
    /// moved by delta positions: their full-resolution rows are dropped. With a trained router
    /// that has a sketch basis, each span is sketched from its factors at its new position
    /// (span_key_sketch: its rows are gone; a sketch it carried, of whatever basis, is
    /// replaced); without one, any sketch it carried is dropped. Spans must be sorted,
    /// disjoint, inside what was stored and not already held; each must match the shape.
    /// Throws std::invalid_argument otherwise. τ is calibrated again at the next attend().
    void hold_spans(std::vector<SekvSpan> spans, int32_t delta);
    const std::vector<SekvSpan>& spans() const { return spans_; }
    const SekvOptions& options() const { return options_; }
    /// τ per query head ([n_head]); empty until calibrated, and always with tau_per_query (each
    /// query head calibrates its own).
    const std::vector<double>& tau() const { return tau_; }

private:
    /// hold_spans; `sketched`: the spans come from seal_spans with their sketches from the rows.
    void hold(std::vector<SekvSpan> spans, int32_t delta, bool sketched);
    AttentionShape shape_;
    int64_t capacity_;
    RopeFrequencies rope_;
    SekvOptions options_;
    int64_t n_stored_ = 0;
    RowStore rows_;               ///< the rows held at full resolution
    std::vector<SekvSpan> spans_; ///< ascending positions
    std::vector<double> tau_;
    std::vector<ZoomHead> last_zoom_;
};

} // namespace spanscope
