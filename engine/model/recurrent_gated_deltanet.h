// The Gated DeltaNet mixer layer (delta-rule matrix state with a scalar gate per head), as in
// Qwen3-Next's linear-attention layers: chunked prefill, one-token decode and exact composition
// of states through transition matrices for position-independent reuse.
//
// Sources: Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks: Improving Mamba2 with Delta
// Rule" (ICLR 2025, arXiv 2412.06464): the gated delta rule is §3.1,
// S_t = α_t·S_{t−1}·(I − β_t·k_t·k_tᵀ) + β_t·v_t·k_tᵀ, o_t = S_t·q_t; the chunked algorithm is
// the paper's chunkwise form (§3, the WY representation extended with the gate), built on Yang
// et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length"
// (NeurIPS 2024) §3 (WY representation of Householder products, UT transform). The layer around it
// (fused input projections, causal depthwise conv over q, k, v + SiLU, per-head L2 norm of q and k,
// q scaled by 1/√d_k, β = sigmoid(b), g = A·softplus(a + dt_bias), per-head gated RMSNorm,
// out_proj) follows HF transformers' Qwen3NextGatedDeltaNet
// (models/qwen3_next/modeling_qwen3_next.py), whose repeat_interleave maps value head j to key head
// j / (n_v_heads / n_k_heads).
//
// GGUF layout for arch `qwen3next`, verified in ggml-org/llama.cpp: conversion/qwen.py
// (Qwen3NextModel.set_gguf_parameters / modify_tensors; formerly in convert_hf_to_gguf.py),
// gguf-py/gguf/constants.py (Keys.SSM, TENSOR_NAMES), gguf-py/gguf/tensor_mapping.py (the
// `# qwen3next` entries) and src/models/qwen3next.cpp (load_arch_tensors,
// build_layer_attn_linear). Shapes ggml-style {ne0, ne1}, ne0 contiguous; r = n_v / n_k:
//   blk.N.attn_qkv.weight   {d_model, 2·n_k·d_k + n_v·d_v}  rows [q all k heads | k | v all v
//                           heads]: the converter splits HF's in_proj_qkvz into this and ...
//   blk.N.attn_gate.weight  {d_model, n_v·d_v}              ... z (the output gate)
//   blk.N.ssm_in.weight     {d_model, 2·n_k·d_k + 2·n_v·d_v} older ("legacy") files only: HF's
//                           in_proj_qkvz unchanged, rows grouped per k head g as
//                           [q_g (d_k) | k_g (d_k) | v of heads g·r.. (r·d_v) | z of those (r·d_v)]
//   blk.N.ssm_ba.weight     {d_model, 2·n_v}  HF's in_proj_ba unchanged, grouped per k head g as
//                           [b of v heads g·r..g·r+r−1 | a of the same heads]
//   blk.N.ssm_conv1d.weight {d_conv, conv_dim}  torch [conv_dim][1][d_conv] squeezed; channels
//                           q | k | v as in attn_qkv
//   blk.N.ssm_dt.bias       {n_v}  HF's dt_bias (renamed to dt_proj.bias by the converter)
//   blk.N.ssm_a             {n_v}  no ".weight": the converter stores A = −exp(A_log), so this
//                           layer takes A itself (≤ 0) and never sees A_log
//   blk.N.ssm_norm.weight   {d_v}  plain RMSNorm weight (the converter's "+1" skips
//                           linear_attn.norm.weight)
//   blk.N.ssm_out.weight    {n_v·d_v, d_model}
// Metadata: {arch}.ssm.conv_kernel = d_conv, {arch}.ssm.state_size = d_k,
// {arch}.ssm.group_count = n_k, {arch}.ssm.time_step_rank = n_v, {arch}.ssm.inner_size = n_v·d_v
// (so d_v = inner_size / time_step_rank), {arch}.full_attention_interval (every n-th layer is
// attention), {arch}.attention.layer_norm_rms_epsilon = the gated norm's eps.
// llama.cpp keeps the state as {d_v, d_v, n_v} per sequence (assumes d_k = d_v) and the conv
// state as {d_conv − 1, conv_dim} (our [d_conv − 1][conv_dim]).
#pragma once

#include "engine/kernels/matmul.h"
#include "engine/kernels/thread_pool.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Hyper-parameters of one Gated DeltaNet layer. Dimensions are element counts.
struct GatedDeltaNetShape {
    int64_t d_model = 0;     ///< residual-stream width
    int64_t n_k_heads = 0;   ///< query/key heads (GGUF ssm.group_count)
    int64_t n_v_heads = 0;   ///< value heads, a multiple of n_k_heads (ssm.time_step_rank);
                             ///< value head j reads key head j / (n_v_heads / n_k_heads)
    int64_t d_k = 0;         ///< head_k_dim (ssm.state_size)
    int64_t d_v = 0;         ///< head_v_dim (ssm.inner_size / n_v_heads)
    int64_t d_conv = 4;      ///< causal depthwise conv kernel width (≥ 1)
    int64_t chunk_size = 64; ///< WY chunk length used by prefill (≥ 1); changes rounding only
    float rms_eps = 1e-6f;   ///< epsilon of the gated RMSNorm (≥ 0)
    float l2_eps = 1e-6f;    ///< q, k ← x / √(Σx² + l2_eps), HF's l2norm (≥ 0)

    int64_t key_dim() const { return n_k_heads * d_k; }
    int64_t value_dim() const { return n_v_heads * d_v; }
    /// Channels through the conv: q, k and v = 2·n_k·d_k + n_v·d_v.
    int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
    /// Rows of the legacy fused ssm_in (q, k, v, z) = 2·n_k·d_k + 2·n_v·d_v.
    int64_t qkvz_dim() const { return 2 * key_dim() + 2 * value_dim(); }
    /// Throws std::invalid_argument naming the first inconsistency: a non-positive dimension,
    /// n_v_heads not a multiple of n_k_heads, d_conv < 1, chunk_size < 1, or a negative or
    /// non-finite epsilon.
    void validate() const;
};

/// Weights of one layer. Nothing is copied: every pointer must outlive the layer. Give either
/// `qkv` + `gate` (current converter) or `qkvz` (legacy ssm_in), not both.
struct GatedDeltaNetWeights {
    WeightMatrix qkv;  ///< rows conv_dim, cols d_model (attn_qkv), any tensor type
    WeightMatrix gate; ///< rows n_v·d_v, cols d_model (attn_gate)
    WeightMatrix qkvz; ///< rows qkvz_dim, cols d_model (legacy ssm_in, grouped per k head)
    WeightMatrix ba;   ///< rows 2·n_v, cols d_model (ssm_ba, grouped per k head)
    WeightMatrix out;  ///< rows d_model, cols n_v·d_v (ssm_out)
    const float* conv_weight = nullptr; ///< [conv_dim][d_conv]; tap d_conv−1 meets the current
                                        ///< token, tap 0 the oldest; no bias (Qwen3-Next has none)
    const float* dt_bias = nullptr;     ///< [n_v]
    const float* A = nullptr;           ///< [n_v], A = −exp(A_log) ≤ 0 (GGUF ssm_a)
    const float* norm_weight = nullptr; ///< [d_v], shared by every value head
};

/// Per-layer recurrent memory (fp32). Zero = a fresh document (its first token sees zeros before
/// it in the conv, as torch's left padding gives).
struct GatedDeltaNetState {
    std::vector<float> s;    ///< [n_v][d_v][d_k], the paper's S_t (o = S·q)
    std::vector<float> conv; ///< [d_conv − 1][conv_dim]: the last raw conv inputs (q, k, v
                             ///< straight from the projection, before conv and SiLU), oldest first
    /// Empty (not tracked), or [n_v][d_k][d_k]: the transition T of every token run since the
    /// state was last reset, T = Π_t α_t·(I − β_t·k_t·k_tᵀ) in time order, so that the same
    /// tokens run from any S_0 end in S_0·T + (their run from S = 0). See gated_deltanet_compose.
    std::vector<float> transition;

    GatedDeltaNetState() = default;
    /// A zero state sized for `shape` (not validated here); with track_transition, transition
    /// starts as the identity per head.
    explicit GatedDeltaNetState(const GatedDeltaNetShape& shape, bool track_transition = false);
    bool tracks_transition() const { return !transition.empty(); }
    /// Zero s and conv (a fresh document), keeping the sizes; a tracked transition becomes I.
    /// Throws std::invalid_argument if the state does not fit `shape`.
    void reset(const GatedDeltaNetShape& shape);
    /// Throws std::invalid_argument unless s, conv (and transition, if not empty) have the sizes
    /// `shape` asks for.
    void check(const GatedDeltaNetShape& shape) const;
};

/// One Gated DeltaNet mixer (the part of a block between the pre-norm and the residual add).
/// Forward, for tokens t (Qwen3NextGatedDeltaNet.forward; Yang et al. 2025 §3):
///   [q | k | v] = attn_qkv·x_t,  z = attn_gate·x_t,  [b | a] = ssm_ba·x_t (grouped per k head)
///   q, k, v ← SiLU(causal depthwise conv1d(q, k, v))          (conv tail = earlier tokens)
///   q ← l2norm(q)/√d_k, k ← l2norm(k) per head;  β = sigmoid(b);  g = A·softplus(a + dt_bias)
///   (softplus(v) = v above 20, as torch);  α = exp(g) ∈ (0, 1]
///   S_t = α_t·S_{t−1}·(I − β_t·k_t·k_tᵀ) + β_t·v_t·k_tᵀ;  o_t = S_t·q_t      (§3.1)
///   o ← RMSNorm(o)·norm_weight·SiLU(z) per value head (Qwen3NextRMSNormGated)
///   out = ssm_out·o
/// Not thread-safe per state; the layer itself is immutable and may be shared.
class GatedDeltaNetLayer {
public:
    /// Validates shape and weights; throws std::invalid_argument naming the problem (matrix
    /// rows/cols that do not match the shape, both or neither of qkv+gate / qkvz, a null
    /// pointer, an A entry > 0 or not finite).
    GatedDeltaNetLayer(const GatedDeltaNetShape& shape, const GatedDeltaNetWeights& weights);

    const GatedDeltaNetShape& shape() const { return shape_; }
    /// A zero state of the right size (see GatedDeltaNetState's constructor).
    GatedDeltaNetState make_state(bool track_transition = false) const {
        return GatedDeltaNetState(shape_, track_transition);
    }

    /// Run n_tokens ≥ 0 tokens with the chunked algorithm (§3 chunkwise form: per chunk of
    /// chunk_size tokens, the UT transform gives the WY factors, then intra-chunk outputs, the
    /// inter-chunk term and the state passed on), starting from `state` and leaving the state after
    /// the last token there (s, conv tail, and a tracked transition T ← T·T_run). Any n_tokens
    /// gives the step-by-step result up to fp32 rounding. x: [n_tokens][d_model], out:
    /// [n_tokens][d_model] (may not alias x). Throws std::invalid_argument if the state has the
    /// wrong size, n_tokens < 0, or a pointer is null while n_tokens > 0.
    void prefill(const float* x, int64_t n_tokens, float* out, GatedDeltaNetState& state,
                 ThreadPool& pool) const;

    /// One token by the recurrence itself (§3.1): x: [d_model], out: [d_model]. Same state
    /// contract and errors as prefill.
    void decode(const float* x, float* out, GatedDeltaNetState& state, ThreadPool& pool) const;

private:
    struct Scratch;
    // Projections, conv + SiLU, l2 norms, β and g: fills the scratch, advances state.conv.
    void project_and_convolve(const float* x, int64_t n_tokens, Scratch& s,
                              GatedDeltaNetState& state, ThreadPool& pool) const;
    // Gated RMSNorm and out_proj.
    void finish(int64_t n_tokens, Scratch& s, float* out, ThreadPool& pool) const;
    void delta_chunked(int64_t n_tokens, Scratch& s, GatedDeltaNetState& state,
                       ThreadPool& pool) const;
    void delta_step(Scratch& s, GatedDeltaNetState& state, ThreadPool& pool) const;

    GatedDeltaNetShape shape_;
    GatedDeltaNetWeights w_;
};

/// Exact composition for position-independent reuse (the recurrence is linear in S:
/// S_end = S_0·T_c + S_c, where S_c is the stretch run from S = 0 and T_c its transition).
/// For each value head: s ← s·T_c + s_c, in fp32.
/// s, s_c: [n_v][d_v][d_k]; transition_c: [n_v][d_k][d_k]. With identical per-token q, k, v, β, g
/// (the stretch was run with the right conv tail), this equals running the stretch from `s`.
/// Throws std::invalid_argument for a null pointer.
void gated_deltanet_compose(const GatedDeltaNetShape& shape, float* s, const float* transition_c,
                            const float* s_c);

/// State-level composition: `acc` followed by the stretch `chunk` (run from a reset state with
/// its transition tracked): acc.s as above; a tracked acc.transition ← acc.transition·T_c;
/// acc.conv ← chunk.conv (exact when the stretch started from acc's conv tail or had at least
/// d_conv − 1 tokens). Throws std::invalid_argument if either state does not fit `shape` or
/// chunk does not track its transition.
void gated_deltanet_compose(const GatedDeltaNetShape& shape, GatedDeltaNetState& acc,
                            const GatedDeltaNetState& chunk);

} // namespace spanscope
