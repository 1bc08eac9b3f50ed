// The Mamba-2 mixer layer (scalar-decay selective state space, "SSD"): chunked prefill, one-token
// decode and exact composition of states for position-independent reuse.
//
// Sources: Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient Algorithms
// Through Structured State Space Duality" (arXiv 2405.21060): the recurrence is eq. (2) with a
// scalar A per head (§3.1, "scalar-identity structure"), the chunked algorithm is the block
// decomposition of §6 (diagonal blocks, chunk states, state passing, output states; Listing 1),
// the layer around it (parallel projections, conv over x/B/C, gated RMSNorm, grouped B/C heads)
// is §7 and the reference module mamba_ssm.modules.mamba2.Mamba2. The one-token step follows
// llama.cpp's ggml_ssm_conv / ggml_ssm_scan.
//
// GGUF layout, as llama.cpp's converter writes it for Mamba-2 (arch `mamba2`) and Granite 4.0-H
// (arch `granitehybrid`, class GraniteHybridModel built on Mamba2Model). Verified in
// ggml-org/llama.cpp: gguf-py/gguf/constants.py (Keys.SSM, TENSOR_NAMES), conversion/mamba.py
// (Mamba2Model.modify_tensors / set_gguf_parameters), conversion/granite.py
// (GraniteHybridModel.set_gguf_parameters) and src/models/mamba-base.cpp (build_mamba2_layer).
// Shapes are written ggml-style {ne0, ne1}, ne0 the contiguous one:
//   blk.N.ssm_in.weight      {d_model, 2·d_inner + 2·G·N + H}  rows split z | xBC | dt
//   blk.N.ssm_conv1d.weight  {d_conv, conv_dim}    (torch [conv_dim][1][d_conv] squeezed)
//   blk.N.ssm_conv1d.bias    {conv_dim}            (optional to llama.cpp's loader)
//   blk.N.ssm_dt.bias        {H}                   (the module's dt_bias)
//   blk.N.ssm_a              {1, H}  no ".weight"; the converter stores A = -exp(A_log)
//   blk.N.ssm_d              {1, H}  no ".weight"
//   blk.N.ssm_norm.weight    {d_inner / G, G}      (gated RMSNorm weight, contiguous d_inner)
//   blk.N.ssm_out.weight     {d_inner, d_model}
// Metadata: {arch}.ssm.conv_kernel = d_conv, {arch}.ssm.inner_size = d_inner,
// {arch}.ssm.state_size = N, {arch}.ssm.time_step_rank = H (the head count, not a dt rank),
// {arch}.ssm.group_count = G, {arch}.attention.layer_norm_rms_epsilon = the norm's eps;
// head_dim P = d_inner / H. The recurrent state in llama.cpp is {N, P, H} (= our [H][P][N]) and
// the conv state {d_conv - 1, conv_dim} (the transpose of our [d_conv - 1][conv_dim]).
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Hyper-parameters of one Mamba-2 layer. All dimensions are element counts.
struct Mamba2Shape {
    int64_t d_model = 0;     ///< residual-stream width
    int64_t d_inner = 0;     ///< n_heads · head_dim
    int64_t d_state = 0;     ///< N, state size per head row
    int64_t n_heads = 0;     ///< H
    int64_t head_dim = 0;    ///< P
    int64_t n_groups = 1;    ///< G, heads per B/C group = H / G; head h reads group h / (H / G)
    int64_t d_conv = 4;      ///< depthwise causal conv kernel width (≥ 1)
    int64_t chunk_size = 64; ///< SSD chunk length used by prefill (≥ 1); changes rounding only
    float rms_eps = 1e-5f;   ///< epsilon of the gated RMSNorm (≥ 0)

    /// Channels through the conv: x, B and C = d_inner + 2·G·N.
    int64_t conv_dim() const { return d_inner + 2 * n_groups * d_state; }
    /// Rows of in_proj: z, xBC and dt = 2·d_inner + 2·G·N + H.
    int64_t in_proj_dim() const { return 2 * d_inner + 2 * n_groups * d_state + n_heads; }
    /// Floats of the recurrent state: ssm H·P·N + conv tail (d_conv − 1)·conv_dim + H log-decay.
    int64_t state_floats() const {
        return n_heads * head_dim * d_state + (d_conv - 1) * conv_dim() + n_heads;
    }
    /// Throws std::invalid_argument naming the first inconsistency: a non-positive dimension,
    /// d_inner ≠ n_heads·head_dim, n_heads not divisible by n_groups, d_conv < 1,
    /// chunk_size < 1, or a negative / non-finite rms_eps.
    void validate() const;
};

/// Weights of one layer. Nothing is copied: every pointer must outlive the Mamba2Layer.
struct Mamba2Weights {
    WeightMatrix in_proj;  ///< rows in_proj_dim(), cols d_model (GGUF ssm_in), any tensor type
    WeightMatrix out_proj; ///< rows d_model, cols d_inner (GGUF ssm_out), any tensor type
    const float* conv_weight = nullptr; ///< [conv_dim][d_conv]; tap d_conv−1 meets the current
                                        ///< token, tap 0 the oldest
    const float* conv_bias = nullptr;   ///< [conv_dim], or nullptr for no bias
    const float* dt_bias = nullptr;     ///< [H]
    const float* A = nullptr;           ///< [H], A itself (≤ 0), i.e. GGUF ssm_a = −exp(A_log)
    const float* D = nullptr;           ///< [H], skip connection
    const float* norm_weight = nullptr; ///< [d_inner] gated RMSNorm weight, or nullptr for the
                                        ///< ungated-norm variant (y · SiLU(z) only)
};

/// Per-layer recurrent memory (fp32). Zero = a fresh document (its first token sees zeros before
/// it in the conv, as torch's left padding gives).
struct Mamba2State {
    std::vector<float> ssm;  ///< [H][P][N]
    std::vector<float> conv; ///< [d_conv − 1][conv_dim]: the last raw conv inputs (xBC straight
                             ///< from in_proj, before conv and SiLU), oldest row first
    /// [H] Σ_t dt_t·A_h over every token run since the state was last zero (nats, ≤ 0): the
    /// log of the factor by which this stretch decays a state that entered it (§3 of the paper,
    /// the 1-semiseparable mask's off-diagonal product). Used by mamba2_compose.
    std::vector<float> log_decay;

    Mamba2State() = default;
    /// A zero state sized for `shape` (shape is not validated here).
    explicit Mamba2State(const Mamba2Shape& shape);
    /// Zero everything (a fresh document), keeping the sizes.
    void reset();
    /// Throws std::invalid_argument unless the three vectors have the sizes `shape` asks for.
    void check(const Mamba2Shape& shape) const;
};

/// One Mamba-2 mixer (the part of a block between the pre-norm and the residual add).
/// Forward, for tokens t (Dao & Gu 2024 §7.1 and Mamba2.forward):
///   [z | xBC | dt_raw] = in_proj · u_t
///   xBC ← SiLU(causal depthwise conv1d(xBC) + bias)           (conv tail = earlier tokens)
///   x [H][P], B [G][N], C [G][N] ← xBC;  dt = softplus(dt_raw + dt_bias)  (softplus(v) = v
///   above 20, as mamba_ssm's Triton softplus and ggml do)
///   h_t = exp(dt_t·A)·h_{t−1} + dt_t·x_t ⊗ B_t ;  y_t = h_t·C_t + D·x_t   (§3.1 eq. 2)
///   y ← RMSNorm_groups(y · SiLU(z)) · norm_weight   (norm_before_gate = False, groups of
///   d_inner / G channels; RMSNormGated in mamba_ssm)
///   out = out_proj · y
/// Not thread-safe per state; the layer itself is immutable and may be shared.
class Mamba2Layer {
public:
    /// Validates shape and weights; throws std::invalid_argument naming the problem (matrix
    /// rows/cols that do not match the shape, a null weight pointer, an A entry > 0 or not
    /// finite).
    Mamba2Layer(const Mamba2Shape& shape, const Mamba2Weights& weights);

    const Mamba2Shape& shape() const { return shape_; }
    /// A zero state of the right size.
    Mamba2State make_state() const { return Mamba2State(shape_); }

    /// Run n_tokens ≥ 0 tokens through the layer with the chunked SSD algorithm (§6), starting
    /// from `state` and leaving the state after the last token there (ssm, conv tail, and
    /// log_decay += Σ_t dt_t·A). Any n_tokens (not only multiples of chunk_size) gives the
    /// step-by-step result up to fp32 rounding.
    /// u: [n_tokens][d_model], out: [n_tokens][d_model] (may not alias u).
    /// Throws std::invalid_argument if the state has the wrong size, n_tokens < 0, or a pointer
    /// is null while n_tokens > 0.
    void prefill(const float* u, int64_t n_tokens, float* out, Mamba2State& state,
                 ThreadPool& pool) const;

    /// One token by the recurrence itself (ggml_ssm_conv / ggml_ssm_scan):
    /// u: [d_model], out: [d_model]. Same state contract and errors as prefill.
    void decode(const float* u, float* out, Mamba2State& state, ThreadPool& pool) const;

private:
    struct Scratch;
    // in_proj, conv, SiLU, dt: fills s.zxbcdt's z part, s.xbc (activated), s.dt, s.a.
    void project_and_convolve(const float* u, int64_t n_tokens, Scratch& s, Mamba2State& state,
                              ThreadPool& pool) const;
    // D skip, gate, grouped RMSNorm, out_proj.
    void finish(int64_t n_tokens, Scratch& s, float* out, ThreadPool& pool) const;
    void ssd_chunked(int64_t n_tokens, Scratch& s, Mamba2State& state, ThreadPool& pool) const;

    Mamba2Shape shape_;
    Mamba2Weights w_;
};

/// Exact composition of Mamba-2 states for position-independent reuse (the scan is linear in
/// the state: h_T = exp(Σ dt·A)·h_0 + h_T|h_0=0, Dao & Gu 2024 §3 / §6 "state passing").
/// For each head h: ssm[h] ← exp(log_decay_c[h])·ssm[h] + ssm_c[h], computed in fp32.
/// ssm, ssm_c: [H][P][N]; log_decay_c: [H] (nats, ≤ 0) of the stretch that produced ssm_c from
/// a zero ssm state. With identical per-token x, B, C, dt (the stretch was run with the right
/// conv tail), this equals running the stretch from `ssm` itself.
void mamba2_compose(const Mamba2Shape& shape, float* ssm, const float* ssm_c,
                    const float* log_decay_c);

/// State-level composition: `acc` followed by the stretch `chunk` (run from a zero ssm state):
/// acc.ssm as above, acc.log_decay += chunk.log_decay, acc.conv ← chunk.conv (exact when the
/// stretch started from acc's conv tail or had at least d_conv − 1 tokens).
/// Throws std::invalid_argument if either state does not fit `shape`.
void mamba2_compose(const Mamba2Shape& shape, Mamba2State& acc, const Mamba2State& chunk);

} // namespace spanscope
