// SEKV mixed-resolution attention for one query against one KV head (docs/sekv.md): one
// softmax over the rows kept at full resolution (anchors, short spans, the recent tail; bias
// 0), the summary row of every span that is not expanded (bias +log|S|, so a span of |S| equal
// rows weighs what its rows would), and the rows of expanded spans, reconstructed from their
// low-rank factors. Computed with an online softmax over blocks (Milakov & Gimelshein 2018,
// "Online normalizer calculation for softmax"; blocks as in FlashAttention, Dao et al. 2022):
// a block of full rows, the summaries, then each expanded span; an expanded span's rows are
// never materialised — its scores are left_k · (right_k q) and its values' weighted sum
// (left_vᵀ w) · right_v, the same numbers as reconstructing each row.
// Each span enters with one view only: the other is masked out (weight 0, a score of −∞).
#pragma once

#include "engine/sekv/span_factors.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// One span of one KV head at its two resolutions.
struct SpanView {
    int64_t size = 0;                    ///< tokens |S|
    const float* summary_k = nullptr;    ///< [head_dim], rotated like the keys
    const float* summary_v = nullptr;    ///< [head_dim]
    const SpanFactors* k_rows = nullptr; ///< factors of the span's keys [size][head_dim]
    const SpanFactors* v_rows = nullptr; ///< factors of the span's values [size][head_dim]
    bool expanded = false;               ///< zoomed in: reconstructed rows, else the summary
};

/// out[head_dim] = Σ softmax(scale · q·k + bias) · v over the full-resolution rows
/// (full_k, full_v: [m][head_dim]) and the spans as described above. q: [head_dim].
/// An expanded span's factors must have head_dim columns and `size` rows; throws
/// std::invalid_argument otherwise, or when there is nothing to attend to.
void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, const std::vector<SpanView>& spans,
                     float* out);

/// The same with full-resolution rows `row_stride` floats apart (>= head_dim): row i of the
/// keys starts at full_k + i · row_stride (one head of rows laid out [m][n_kv_head][head_dim]).
/// span_mass (nullptr: not wanted) [spans.size()] receives each span's share of the softmax's
/// weight: its summary row's, or the sum over its rebuilt rows when expanded; with the full rows'
/// share the shares sum to 1. row_mass (nullptr: not wanted) [m] receives each full-resolution
/// row's weight.
void mixed_attention(const float* q, int64_t head_dim, float scale, const float* full_k,
                     const float* full_v, int64_t m, int64_t row_stride,
                     const std::vector<SpanView>& spans, float* out, float* span_mass = nullptr,
                     float* row_mass = nullptr);

} // namespace spanscope
