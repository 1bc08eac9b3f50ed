// The trained router's parameters (docs/sekv.md): per SEKV layer and query head a routing
// projection W (d′×d) and a threshold τ, and per layer a small rank-gate MLP. They are learned
// on recorded real text while the base model stays frozen (the lab's trainer,
// lab/router/zoom_model.h, zoom_train.h) and kept in a small versioned file tied to the model it
// was trained for (its fingerprint, storage/model_fingerprint.h): a file for another model is
// refused. The file keeps the names it was first written with: `<model>.zoom.gguf`, keys
// spanscope.zoom.*, and spanscope-cli's flag --zoom-params (answering/router_choice.h).
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

struct TrainedRouterLayer;
class RankGatePredictor;

/// The rank gate of one layer: a two-layer MLP from a span's spectrum and summary key to a gate
/// in (0, 1) per spectral component (docs/sekv.md):
///   x = [ sqrt(σ²_i / Σσ²) for i < n_rank (0 past the spectrum) ; k̄ / ‖k̄‖ ]   (n_in = n_rank + d)
///   h = tanh(w1 x + b1)          [n_hidden]
///   m = σ(w2 h + b2)             [n_rank]
/// In inference the span keeps rank = #{i : m_i > 0.5} (at least 1) of its leading components.
/// rank_gate_input, rank_gate_forward and rank_gate_rank below compute exactly this; training
/// (zoom_train.h) calls the same functions.
struct RankGateMlp {
    int n_rank = 0;   ///< components gated (SEKV's r_max, 32)
    int head_dim = 0; ///< d
    int n_hidden = 0;
    std::vector<float> w1; ///< [n_hidden][n_rank + head_dim]
    std::vector<float> b1; ///< [n_hidden]
    std::vector<float> w2; ///< [n_rank][n_hidden]
    std::vector<float> b2; ///< [n_rank]
    int n_in() const { return n_rank + head_dim; }
};

/// The trained parameters of one SEKV layer.
struct RouterLayerParams {
    int layer = 0;    ///< the model's layer index
    int n_head = 0;   ///< query heads
    int head_dim = 0; ///< d
    int d_out = 0;    ///< d′ (32)
    /// [n_head][d_out][head_dim]: relevance = σ(⟨W q, W k̄⟩ / √d′ + log|S|)
    std::vector<float> w;
    std::vector<float> theta; ///< [n_head]: the threshold as a logit, τ = σ(θ)
    RankGateMlp gate;
    /// The sketch basis (span_sketch.h; zoom-train --sketch-dim), fitted on the recorded queries
    /// rather than trained by gradient: sketch_dim m vectors per KV head; 0 (and n_kv_head 0,
    /// sketch empty): none, the relevance of version 5.
    int sketch_dim = 0;
    int n_kv_head = 0;         ///< with a sketch: the layer's KV heads
    std::vector<float> sketch; ///< [n_kv_head][sketch_dim][head_dim]
};

/// Where the parameters came from.
struct RouterProvenance {
    std::string data;    ///< the recordings (their directory and documents)
    std::string command; ///< the training command line
    std::string commit;  ///< the source commit of the trainer
    std::string created; ///< UTC time, ISO 8601
};

/// The parameter file's contents.
struct RouterParams {
    /// 2: the rank gate reads the summary key rotated back to position 0 (gate_summary_key);
    /// a version-1 file was trained on the key at the span's position and is refused.
    /// 3: the relevance no longer normalises W k̄ (docs/sekv.md "The relevance's form"); a
    /// version-2 file was trained for the normalised form and is refused.
    /// 4: the relevance is residual, q·k̄/√d + ⟨W q, W k̄⟩/√d′ + log|S| (router.h); a version-3
    /// W stood for the whole score and is refused.
    /// 5: the kept rank counts the gates of the span's available components only (rank_gate_rank);
    /// a version-4 gate also counted the outputs past them, which training never reached, and
    /// is refused.
    /// 6: a layer may hold a sketch basis (RouterLayerParams::sketch); a version-5 file, which
    /// has none, is read as one without it.
    static constexpr uint32_t kVersion = 6;
    std::string model_fingerprint; ///< fingerprint_hex of the model trained for (32 hex chars)
    std::string model_name;        ///< e.g. "gemma-3-270m-q4_k_m.gguf", for messages
    RouterProvenance provenance;
    /// The thresholds θ were trained deciding with the KV group's union (zoom-train
    /// --share-group), so the learned τ decide with it (SekvRouterOptions::share_group on);
    /// false: each query head alone. Key spanscope.zoom.share_group, written only when true.
    bool share_group = false;
    std::vector<RouterLayerParams> layers; ///< ascending layer index
    /// The layer's parameters, or nullptr when the file has none for layer il.
    const RouterLayerParams* find(int il) const;
    /// Number of trained parameters (every W, θ and gate weight; the sketch bases, fitted
    /// rather than trained, are not counted).
    int64_t n_parameters() const;
    /// 16 hex characters: a 64-bit FNV-1a hash of the format version (it fixes the gate's input)
    /// and every layer's index and rank gate (sizes and weights). The spans a rank gate builds
    /// depend on nothing else of the file, so stored spans are keyed by it (answering/sekv_unit.h
    /// sekv_options_key).
    std::string rank_gate_digest() const;
    /// 16 hex characters: the same hash over the format version (the relevance's form),
    /// everything trained (W, θ and the rank gates), the sketch bases (when there are), share_group
    /// (when true) and the model fingerprint: two files with the same digest route alike. Both
    /// digests hash the format version as 5, so that a file without a sketch keeps the digests
    /// it had in version 5.
    std::string digest() const;
};

/// A parameter file that cannot be used; what() says why (unreadable, malformed, a size that
/// does not match, another version, or a model whose fingerprint differs).
struct RouterParamsError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Write `p` to `path` as a GGUF file (keys spanscope.zoom.*, one f32 tensor per array),
/// atomically (gguf_writer.h). Throws std::invalid_argument when an array's size does not match
/// its shape, std::system_error when the file cannot be written.
void save_router_params(const RouterParams& p, const std::string& path);

/// Read a parameter file and check every size against the shapes it declares (each tensor f32
/// of exactly its declared shape, every value finite, layers ascending and distinct). Keys and
/// tensors it does not know are skipped. With expected_fingerprint non-empty, a file trained
/// for another model is refused; expected_model (e.g. the model's file name) only names that
/// model in the message. Throws RouterParamsError, its message naming `path`: unreadable, not a
/// GGUF file or truncated, not a zoom parameter file, another version, a size or value that
/// does not match, or another model.
RouterParams load_router_params(const std::string& path,
                                const std::string& expected_fingerprint = {},
                                const std::string& expected_model = {});

/// Check that every array of `p` has the size its shape gives (w: n_head·d_out·head_dim, theta:
/// n_head, the gate's as RankGateMlp says with gate.head_dim = head_dim, the sketch
/// n_kv_head·sketch_dim·head_dim with sketch_dim <= head_dim and n_kv_head dividing n_head), every
/// size is positive, layers ascend and are distinct, and there is at least one layer. Throws
/// std::invalid_argument naming the layer.
void check_router_params(const RouterParams& p);

/// The rank gate's input x [g.n_in()] for a span (docs/sekv.md): x_i = sqrt(σ²_i / Σσ²) for
/// i < n_rank (0 for i past sigma2's end, and every x_i = 0 when Σσ² = 0; negative σ² count as
/// 0), Σ over all of sigma2; then x_{n_rank + j} = k̄_j / ‖k̄‖₂ (all 0 when ‖k̄‖ = 0).
/// sigma2: the span's squared singular values, descending (any length); summary_k: [g.head_dim].
/// Throws std::invalid_argument when g's arrays do not match its sizes.
std::vector<float> rank_gate_input(const RankGateMlp& g, const std::vector<double>& sigma2,
                                   const float* summary_k);

/// The gate m [g.n_rank] for input x [g.n_in()]: h = tanh(w1 x + b1) [g.n_hidden], rounded to
/// float, then m = σ(w2 h + b2) (sums in double). hidden, when given, receives h. Throws
/// std::invalid_argument when g's arrays do not match its sizes.
std::vector<float> rank_gate_forward(const RankGateMlp& g, const float* x,
                                     std::vector<float>* hidden = nullptr);

/// The rank kept for a gate m over a span with n_available components (its factors' rank, at
/// most m.size()): #{i < n_available : m_i > 0.5}, at least 1. The outputs past the available
/// components are not counted: no loss reaches them in training.
int rank_gate_rank(const std::vector<float>& m, int n_available);

/// The router of one layer in the form SekvMemory uses (memory_sekv.h): d_out, W as stored,
/// the sketch basis and τ = σ(θ) per head (in double: θ ≥ 37 gives τ = 1, no span expands). Throws
/// std::invalid_argument when the layer's arrays do not match its sizes.
std::shared_ptr<const TrainedRouterLayer> trained_router(const RouterLayerParams& layer);

/// The rank gate of one layer as SEKV's RankGatePredictor (sekv_spans.h): rank() is
/// rank_gate_rank(rank_gate_forward(g, rank_gate_input(g, sigma2, summary_k)), n) with
/// n = min(g.n_rank, sigma2.size(), dim), the components the span's factors have; it throws
/// std::invalid_argument for a summary key of another dimension than the gate's head_dim.
/// Throws std::invalid_argument when the gate's arrays do not match its sizes.
std::shared_ptr<const RankGatePredictor> trained_rank_gate(const RouterLayerParams& layer);

} // namespace spanscope
