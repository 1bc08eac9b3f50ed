// The two resolutions of a SEKV span (docs/sekv.md): a summary row (the surprisal-weighted
// mean of the span's key or value rows) and low-rank factors of its rows. Keys are kept
// rotated at document positions; both resolutions are linear in the rows, so a rotation of
// every row (moving a document) rotates the summary and the right-hand factor alike.
#pragma once

#include "engine/kernels/rope.h"
#include "engine/kernels/tensor_type.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Weights of a span's rows for its summary [n]: w_i = s_i / Σ s, with s_i the surprisal of row
/// i (nats; negative or NaN counted as 0); uniform (1/n) when every s_i is 0. Sum to 1.
/// Throws std::invalid_argument for n < 1.
std::vector<float> span_weights(const float* surprisal, int64_t n);

/// out[d] = Σ_i weights[i] · rows[i][d]. rows: [n][d], weights: [n], out: [d].
void summary_row(const float* rows, int64_t n, int64_t d, const float* weights, float* out);

/// rows ≈ left · right, the best rank-`rank` approximation in the Frobenius norm
/// (Eckart–Young), from the eigen-decomposition of the Gram matrix rows · rowsᵀ (LAPACK dsyevd,
/// in double). Deterministic: each left column's largest-magnitude entry is positive.
///
/// The left factor is held as IEEE binary16 (f16) bits, rounded to nearest from the double
/// computation (relative error 2^-11 per entry; its entries lie in [-1, 1], orthonormal
/// columns). The right factor, most of the bytes ([rank][dim] against [rows][rank]), is held
/// as f16 or as Q8_0 (ggml's 8-bit blocks: per 32 entries an f16 scale d = max|x|/127 and 32
/// signed bytes q = round(x/d), 34 bytes, read as f16(d) · q). An entry is off by at most half
/// a step, max|x|/254 of its block, plus the scale's own rounding, 127 · |d − f16(d)| ≤
/// max|x| · 2^-11 for a normal f16 scale; a block whose max|x| is below 127 · 2^-14 has a
/// subnormal scale and only an absolute bound, 127 · 2^-25. Its row r has norm σ_r; an entry of
/// it is at most √rows times the largest entry of the rows' column, so an f16 right factor
/// overflows (build_span throws std::range_error, see set_right_factor) for rows whose entries
/// reach 65504/√rows; Q8_0 holds entries up to 127 · 65504.
struct SpanFactors {
    int64_t rows = 0, dim = 0;
    int rank = 0;
    std::vector<uint16_t> left; ///< [rows][rank] f16, orthonormal columns
    /// How the right factor's rows are held: TensorType::F16 or TensorType::Q8_0.
    TensorType right_type = TensorType::F16;
    /// [rank] rows of row_bytes(right_type, dim) bytes: = leftᵀ · rows
    std::vector<uint8_t> right;
    std::vector<double> sigma2; ///< squared singular values, descending [rows]
    /// Squared Frobenius error of the approximation: Σ of the discarded sigma2.
    double discarded() const;
    /// The factors widened to fp32 (exact): [rows][rank] and [rank][dim]. Throws
    /// std::invalid_argument where the sizes do not describe the shape (factors_fit).
    std::vector<float> left_f32() const;
    std::vector<float> right_f32() const;
    /// The same into `out` (resized; its capacity is reused: the hot path of mixed attention).
    void left_f32(std::vector<float>& out) const;
    void right_f32(std::vector<float>& out) const;
};

/// Round fp32 values to f16 bits ([n] -> [n], round to nearest even). Throws std::range_error
/// naming `what` when a finite value lies beyond f16's largest finite value (|x| > 65504;
/// values up to 65520 would round to it, beyond to an infinity), and for a NaN or infinity.
std::vector<uint16_t> to_f16(const float* x, int64_t n, const char* what);
/// f16 bits widened to fp32 (exact): [n] -> [n].
std::vector<float> from_f16(const uint16_t* h, int64_t n);

/// The eigen-decomposition of a symmetric matrix a [n][n] (column-major; its upper triangle is
/// read), in place (LAPACK dsyevd, in double): w [n] receives the eigenvalues ascending, and
/// column k of a (a[k·n + i]) the eigenvector of w[k], its largest-magnitude entry positive. Throws
/// std::invalid_argument for n < 1 or a of another size, std::runtime_error when LAPACK fails.
void symmetric_eigen(std::vector<double>& a, int n, std::vector<double>& w);

/// Whether a right factor of `dim` columns can be held as `type` (F16 always; Q8_0 when dim is a
/// multiple of its 32-entry blocks); other types never.
bool right_factor_type_fits(TensorType type, int64_t dim);

/// Whether `f` describes the factors of a span of `rows` rows of `dim` values: its shape is
/// theirs, 1 <= rank <= min(rows, dim), the right factor's type fits dim, and left holds
/// rows · rank f16 values and right rank rows of row_bytes(right_type, dim) bytes.
bool factors_fit(const SpanFactors& f, int64_t rows, int64_t dim);

/// The right factor's type for `wanted` and `dim`: wanted where it fits, else F16.
TensorType right_factor_type(TensorType wanted, int64_t dim);

/// Factors of rows [n][d] at rank min(max_rank, n, d), the right factor held as
/// right_factor_type(right_type, d). Throws std::invalid_argument for n < 1, d < 1, max_rank < 1
/// or a right_type other than F16 and Q8_0, std::runtime_error when LAPACK fails,
/// std::range_error when a factor entry exceeds f16's range (to_f16).
SpanFactors low_rank_factors(const float* rows, int64_t n, int64_t d, int max_rank,
                             TensorType right_type = TensorType::F16);

/// Hold the right factor `right` [rank][dim] (fp32) in f.right as f.right_type. Throws
/// std::invalid_argument for a right factor of another size or a type that does not fit f.dim
/// (right_factor_type_fits), std::range_error for an entry beyond f16's range (F16) or beyond
/// 127 · 65504 (Q8_0, whose block scales max|x| / 127 are f16).
void set_right_factor(SpanFactors& f, const std::vector<float>& right);

/// left · right into out [rows][dim].
void reconstruct(const SpanFactors& f, float* out);

/// Move a key span of one head (dim = head_dim) by delta positions with its layer's rotary
/// frequencies (rotate-half layout, rope.h): the summary row [dim] and the rows of the right factor
/// are rotated; the left factor stays (rotating every row leaves rows · rowsᵀ unchanged). The
/// result equals the resolutions built from the keys rotated at the new positions, up to the
/// rounding of the rotated right factor to its type (RoFormer §3.4.2: rotations compose).
/// Throws std::invalid_argument for an odd dim.
void move_key_span(SpanFactors& f, float* summary, int32_t delta, const RopeFrequencies& rope);

} // namespace spanscope
