// The key sketch of a SEKV span (issue 8, docs/sekv.md, "What did not work"): a few
// numbers per span and KV head, kept in the fast tier beside the summary row, from which the
// trained router estimates the second-order term of the span's attention mass.
//
// A span's share of a query's attention is Σ_i exp(s q·k_i) = |S| · E_i[exp(z_i)], z_i = s q·k_i
// (s = 1/√d). Its cumulant expansion to second order (the Gaussian moment-generating function,
// log E[e^z] = μ + σ²/2 + …) gives
//     log Σ_i exp(z_i) ≈ log|S| + s q·k̃ + ½ s² qᵀ C q,
// k̃ the span's mean key (unweighted) and C the covariance of its keys. The training-free
// router keeps only log|S| + s q·k̄ with the surprisal-weighted summary key k̄. The sketch holds
// the rest within a basis U [m][d] of the query space, fitted on recorded queries
// (fit_sketch_basis): with u_i = U k_i, ũ = mean u_i,
//     δ = ũ − U k̄                          [m]         (the mean's correction)
//     Σ = (1/|S|) Σ_i (u_i − ũ)(u_i − ũ)ᵀ  [m][m]      (upper triangle, row-major)
// and the relevance logit gains  s (U q)·δ + ½ s² (U q)ᵀ Σ (U q)  (sketch_logit_term), which
// is exact when m = d and U is orthonormal.
#pragma once

#include "engine/sekv/sekv_spans.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Floats of one KV head's sketch for a basis of m vectors: m + m(m + 1)/2.
int64_t sketch_length(int m);

/// The sketch [n_kv_head][sketch_length(m)] of a span from its key rows k [n][n_kv_head][head_dim]
/// and summary keys summary_k [n_kv_head][head_dim]: what sealing computes, where the rows are
/// at hand. basis: [n_kv_head][m][head_dim], each KV head's U. Throws std::invalid_argument for
/// n < 1, m < 1, n_kv_head < 1 or a basis of another size.
std::vector<float> span_key_sketch_rows(const float* k, int64_t n, int n_kv_head,
                                        const float* summary_k, const std::vector<float>& basis,
                                        int m, int head_dim);

/// The same from the span's key factors (the rows k̂_i = Σ_r left_ir right_r the host tier
/// holds): for a span whose rows are gone (restored from the project, or moved). Equal to
/// span_key_sketch_rows where the factors keep the span's full rank, an approximation where the
/// rank gate cut them. Throws std::invalid_argument for m < 1, a span without key factors
/// (chunk_summary) or with another number of KV heads or another head_dim than the basis.
std::vector<float> span_key_sketch(const SekvSpan& span, const std::vector<float>& basis, int m,
                                   int head_dim);

/// KV head g's part of a span's sketch [n_kv_head][sketch_length(m)], for a router with a basis
/// of m vectors; nullptr when m is 0 (no basis: the sketch is not read). Throws
/// std::invalid_argument when the sketch is not of that size (a span sketched for another
/// basis, or not at all).
const float* head_sketch(const std::vector<float>& sketch, int n_kv_head, int m, int g);

/// The sketch's term of the relevance logit for one KV head: s (U q)·δ + ½ s² (U q)ᵀ Σ (U q),
/// uq = U q [m], sketch [sketch_length(m)] (δ then Σ's upper triangle), s the layer's scale
/// 1/√d (as router.h's q·k̄/√d).
double sketch_logit_term(const double* uq, int m, const float* sketch, double scale);

/// A basis U [n_kv_head][m][head_dim] of the query space: per KV head, the m leading
/// eigenvectors (descending eigenvalue) of the second moment Σ qqᵀ of the queries of its group
/// (LAPACK dsyevd, in double; each vector's largest-magnitude entry positive). q:
/// [n_q][n_head][head_dim]. Throws std::invalid_argument for n_q < 1, m outside [1, head_dim] or
/// n_head not a multiple of n_kv_head, std::runtime_error when LAPACK fails.
std::vector<float> fit_sketch_basis(const float* q, int64_t n_q, int n_head, int n_kv_head,
                                    int head_dim, int m);

} // namespace spanscope
