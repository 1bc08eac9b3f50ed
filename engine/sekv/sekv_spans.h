// A SEKV span of one layer at its two resolutions for every KV head (docs/sekv.md): the
// summary rows (surprisal-weighted means of its keys and values) kept in the fast tier, and the
// low-rank factors of its keys and values kept in the host tier. Built from the rows a memory
// held at full resolution; moved to another position by rotating what depends on it.
#pragma once

#include "engine/kernels/rope.h"
#include "engine/sekv/segmentation.h"
#include "engine/sekv/span_factors.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace spanscope {

/// A learned rank gate (docs/sekv.md; the trained zoom-in loads one from a parameter file):
/// how many components of a span's spectrum to keep.
class RankGatePredictor {
public:
    virtual ~RankGatePredictor() = default;
    /// sigma2: the span's squared singular values, descending; summary_k: its summary key
    /// [dim]. Returns the rank to keep (clamped by the caller to [1, max_rank]).
    virtual int rank(const std::vector<double>& sigma2, const float* summary_k,
                     int64_t dim) const = 0;
};

/// How much of a span's spectrum its factors keep: the training-free gate by energy, or a
/// learned predictor when one is given.
struct SpanRankOptions {
    int max_rank = 32;   ///< at most this many components (and at most the span's size)
    double energy = 1.0; ///< keep the fewest components holding this fraction of Σσ² (<= 1;
                         ///< 1 keeps max_rank)
    std::shared_ptr<const RankGatePredictor> predictor; ///< nullptr: the energy gate
    /// The layer's rotary frequencies, for the predictor's input (gate_summary_key); base 0: a
    /// layer whose keys carry no rotation.
    RopeFrequencies rope{0.0};
    /// How the right factors are held (span_factors.h): TensorType::Q8_0 where the head
    /// dimension is a multiple of 32, else F16; or TensorType::F16.
    TensorType right_type = TensorType::F16;
};

/// One span of one layer: positions [begin, begin + size), summaries and factors per KV head.
struct SekvSpan {
    int32_t begin = 0;
    int64_t size = 0;
    std::vector<float> summary_k, summary_v; ///< [n_kv_head][head_dim]; keys rotated at the rows'
                                             ///< positions like the keys they summarise; built
                                             ///< f16-rounded, held in fp32 (fast tier)
    std::vector<SpanFactors> k, v;           ///< [n_kv_head], each [size][head_dim]
    /// [n_kv_head][sketch_length(m)]: the key sketch a trained router with a sketch basis reads
    /// (span_sketch.h), kept in the fast tier; empty otherwise. seal_spans computes it from the
    /// rows, SekvMemory::hold_spans from the factors; move_span drops it, as the rotation
    /// changes it.
    std::vector<float> sketch;
    int32_t end() const { return begin + static_cast<int32_t>(size); }
};

/// The rank the gate keeps from squared singular values sigma2 (descending): the predictor's,
/// else the smallest r with Σ_{i<r} σ²_i >= energy · Σσ²; at most max_rank and the spectrum's
/// length, at least 1. summary_k: [dim], for the predictor.
int gated_rank(const std::vector<double>& sigma2, const SpanRankOptions& options,
               const float* summary_k = nullptr, int64_t dim = 0);

/// The summary key [dim] as a rank-gate predictor reads it: rotated back from the span's begin
/// to position 0 (rope_shift_neox by −begin with the layer's frequencies; base 0 returns it as is).
/// A span moved to another position (move_span rotates its keys by the same angle) thus gets the
/// same gate input, and so the same rank, as the span built in place (RoFormer §3.4.2: rotations
/// compose; squared singular values are unchanged by the rotation). Throws std::invalid_argument
/// for an odd dim when there is a rotation to undo (rope.base > 0 and begin != 0).
std::vector<float> gate_summary_key(const float* summary_k, int64_t dim, int32_t begin,
                                    const RopeFrequencies& rope);

/// Build a span from its rows. k, v: [n][n_kv_head][head_dim] (keys rotated at positions
/// begin..begin+n-1); token_surprisal: [n] (nats, each row's own token; the summary weights,
/// span_factors.h). Throws std::invalid_argument for n < 1 or bad options.
SekvSpan build_span(const float* k, const float* v, const float* token_surprisal, int64_t n,
                    int n_kv_head, int head_dim, int32_t begin, const SpanRankOptions& options);

/// Move a span by delta positions: rotate its summary keys and the right factors of its keys by
/// delta with the layer's rotary frequencies (move_key_span); values and left factors do not
/// change. A key sketch is dropped (delta != 0): its holder computes it again from the moved
/// factors.
void move_span(SekvSpan& span, int32_t delta, const RopeFrequencies& rope);

/// Bytes a span holds in the fast tier (its summary rows and key sketch, fp32, and begin/size) and
/// in the host tier (its factors: f16 left, f16 or Q8_0 right).
int64_t span_fast_bytes(const SekvSpan& span);
int64_t span_host_bytes(const SekvSpan& span);

/// The surprisal of each token itself from a prefill's per-row surprisals (row i holds the
/// surprisal of token i + 1, session.h): out[0] = NaN (the first token has none), out[i] =
/// row_surprisal[i - 1]. [n] -> [n].
std::vector<float> token_surprisals(const float* row_surprisal, int64_t n);

/// The segmentation of a context whose fast tier must fit `budget` (a fraction of the bytes a
/// full cache holds): α is raised from options.alpha in steps of 0.25 (at most 32 steps) until
/// the rows kept at full resolution plus span_rows per span plus reserve_rows (room for the
/// tail) fit budget · n; budget <= 0 keeps options.alpha; budget >= 1 (the whole context
/// fits) holds no span: every token stays at full resolution. *met tells whether the
/// budget was met; a context that cannot meet it (too short for the reserve, or no α up to
/// options.alpha + 8 fits) also holds no span. token_surprisal: [n]. span_rows: the fast-tier
/// rows one span costs, 1 for its summary row plus what else the fast tier keeps for it in rows
/// (a trained router's key sketch: sekv_span_rows in memory_sekv.h).
/// Throws as segment(), and std::invalid_argument for span_rows < 1 or not finite.
Segmentation segment_within_budget(const float* token_surprisal, int64_t n,
                                   const SegmentationOptions& options, double budget,
                                   int64_t reserve_rows = 0, double* alpha_used = nullptr,
                                   bool* met = nullptr, double span_rows = 1.0);

} // namespace spanscope
