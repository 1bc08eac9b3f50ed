// Rotary position embedding (RoPE; Su et al. 2021, RoFormer §3.4.2): the rotary frequencies of a
// layer with the scalings model files carry, the rotation of queries and keys, and the move of
// keys already rotated to another position (docs/architecture.md, Memory).
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

/// The rotary frequencies of one layer: pair i < d/2 of a d-element head turns by
///   angle(p, i) = p · scale · base^(−2i/d) / factors[i]
/// at position p (llama.cpp's ggml_rope_ext without YaRN: freq_scale = `scale`, freq_factors =
/// `factors`). `scale` is linear position interpolation (Chen et al. 2023, "Extending Context
/// Window of Large Language Models via Positional Interpolation": 1 / rope.scaling.factor);
/// `factors` are Llama 3's per-frequency divisors (the `rope_freqs.weight` tensor of Llama 3.1+
/// files), empty when every divisor is 1. base ≤ 0 means no rotation: rope_shift_neox and
/// rope_shift_neox_partial leave vectors as they are, inverse_frequencies and RopeTable throw.
struct RopeFrequencies {
    double base = 10000.0;
    double scale = 1.0;
    std::vector<float> factors; ///< [d/2], or empty

    RopeFrequencies() = default;
    /// A plain RoPE of this base (scale 1, no factors).
    RopeFrequencies(double base_) : base(base_) {} // NOLINT: a base is a plain RoPE
    /// ω_i = scale · base^(−2i/d) / factors[i] in radians per position, for i < d/2. Throws
    /// std::invalid_argument when factors is neither empty nor d/2 long, or base or scale is not
    /// positive and finite.
    std::vector<double> inverse_frequencies(int d) const;
    bool operator==(const RopeFrequencies&) const = default;
};

/// Cosines and sines of the rotary angles for a run of positions: angle(pos[t], i) of
/// RopeFrequencies, i < d/2, computed in double and stored as float. cos, sin: [n_tokens][d/2].
struct RopeTable {
    int d = 0;
    std::vector<float> cos, sin;
    RopeTable(const int32_t* pos, int64_t n_tokens, int d, const RopeFrequencies& freqs);
};

/// Rotary position embedding, rotate-half ("NeoX") layout: (x[i], x[i+d/2]) rotated by
/// angle(t, i). x: [n_tokens][n_heads][d] in place, n_tokens as in the table.
void rope_neox(float* x, const RopeTable& table, int64_t n_tokens, int n_heads);
/// Partial NeoX RoPE (llama.cpp's ggml_rope_ext with n_rot < head_dim, rope type NEOX): the
/// first table.d elements of each head are rotated as rope_neox does (pairs (i, i + d/2)), the
/// other head_dim − table.d pass unchanged.
/// x: [n_tokens][n_heads][head_dim] in place; table.d ≤ head_dim, even.
void rope_neox_partial(float* x, const RopeTable& table, int64_t n_tokens, int n_heads,
                       int head_dim);

/// Reorder each d-element vector from the adjacent-pair layout of llama.cpp's "normal" RoPE
/// (pair i = (x[2i], x[2i+1]), the layout of the `llama` architecture's GGUF query and key
/// weights) to the rotate-half layout (pair i = (x[i], x[i+d/2])): y[i] = x[2i],
/// y[i+d/2] = x[2i+1]. Rotating the reordered vector with rope_neox equals rotating the
/// original with normal RoPE, reordered; a dot product of two vectors reordered alike is
/// unchanged, so attention scores are the same. x: [n_vectors][d] in place, d even.
void rope_pairs_to_halves(float* x, int64_t n_vectors, int d);

/// Move keys rotated at position p to position p + delta: rotate every (x[i], x[i+d/2]) pair by
/// angle(delta, i). RoPE rotations compose (R(p + delta) = R(delta) R(p); RoFormer §3.4.2), so
/// this equals rotating the unrotated key at p + delta up to float rounding.
/// x: [n_rows][n_heads][d] in place; freqs: the layer's own (tests/README.md, failure mode 1).
void rope_shift_neox(float* x, int64_t n_rows, int n_heads, int d, int32_t delta,
                     const RopeFrequencies& freqs);
/// The same move for partial NeoX RoPE (rope_neox_partial): the first rope_dims elements of
/// each head are rotated by delta as rope_shift_neox rotates a head of rope_dims, the other
/// head_dim − rope_dims pass unchanged (they carry no position). rope_dims = 0 (NoPE): nothing
/// moves. x: [n_rows][n_heads][head_dim] in place; rope_dims even, ≤ head_dim.
void rope_shift_neox_partial(float* x, int64_t n_rows, int n_heads, int head_dim, int rope_dims,
                             int32_t delta, const RopeFrequencies& freqs);

} // namespace spanscope
