#include "engine/sekv/span_factors.h"

#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

extern "C" {
// LAPACK (OpenBLAS): eigenvalues and eigenvectors of a symmetric matrix, divide and conquer.
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace spanscope {

std::vector<float> span_weights(const float* surprisal, int64_t n) {
    if (n < 1)
        throw std::invalid_argument("span of no rows");
    std::vector<float> w(static_cast<size_t>(n));
    double total = 0;
    for (int64_t i = 0; i < n; ++i)
        total += std::isfinite(surprisal[i]) && surprisal[i] > 0 ? surprisal[i] : 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double s = std::isfinite(surprisal[i]) && surprisal[i] > 0 ? surprisal[i] : 0.0;
        w[i] = static_cast<float>(total > 0 ? s / total : 1.0 / static_cast<double>(n));
    }
    return w;
}

void summary_row(const float* rows, int64_t n, int64_t d, const float* weights, float* out) {
    for (int64_t j = 0; j < d; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < n; ++i)
            acc += static_cast<double>(weights[i]) * rows[i * d + j];
        out[j] = static_cast<float>(acc);
    }
}

double SpanFactors::discarded() const {
    double e = 0;
    for (size_t i = static_cast<size_t>(rank); i < sigma2.size(); ++i)
        e += sigma2[i];
    return e;
}

std::vector<uint16_t> to_f16(const float* x, int64_t n, const char* what) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(x[i]) || std::fabs(x[i]) > 65504.0f)
            throw std::range_error(std::string(what) + ": a value of " + std::to_string(x[i]) +
                                   " is not a finite value in the f16 range the host tier holds");
    std::vector<uint16_t> h(static_cast<size_t>(n));
    if (n > 0)
        quantize_row(TensorType::F16, x, h.data(), n);
    return h;
}

std::vector<float> from_f16(const uint16_t* h, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    if (n > 0)
        dequantize_row(TensorType::F16, h, x.data(), n);
    return x;
}

std::vector<float> SpanFactors::left_f32() const {
    std::vector<float> x;
    left_f32(x);
    return x;
}

std::vector<float> SpanFactors::right_f32() const {
    std::vector<float> x;
    right_f32(x);
    return x;
}

void SpanFactors::left_f32(std::vector<float>& out) const {
    if (!factors_fit(*this, rows, dim))
        throw std::invalid_argument("span factors: sizes that do not describe their shape");
    out.resize(left.size());
    if (!left.empty())
        dequantize_row(TensorType::F16, left.data(), out.data(), static_cast<int64_t>(left.size()));
}

void SpanFactors::right_f32(std::vector<float>& out) const {
    if (!factors_fit(*this, rows, dim))
        throw std::invalid_argument("span factors: sizes that do not describe their shape");
    out.resize(static_cast<size_t>(rank) * static_cast<size_t>(dim));
    const size_t rb = row_bytes(right_type, dim);
    for (int r = 0; r < rank; ++r)
        dequantize_row(right_type, right.data() + r * rb, out.data() + static_cast<size_t>(r) * dim,
                       dim);
}

bool factors_fit(const SpanFactors& f, int64_t rows, int64_t dim) {
    return f.rows == rows && f.dim == dim && rows >= 1 && f.rank >= 1 &&
           f.rank <= std::min(rows, dim) && right_factor_type_fits(f.right_type, dim) &&
           f.left.size() == static_cast<size_t>(rows) * static_cast<size_t>(f.rank) &&
           f.right.size() == static_cast<size_t>(f.rank) * row_bytes(f.right_type, dim);
}

bool right_factor_type_fits(TensorType type, int64_t dim) {
    if (type == TensorType::F16)
        return dim >= 1;
    if (type == TensorType::Q8_0)
        return dim >= 1 && dim % traits(TensorType::Q8_0).block_size == 0;
    return false;
}

TensorType right_factor_type(TensorType wanted, int64_t dim) {
    return right_factor_type_fits(wanted, dim) ? wanted : TensorType::F16;
}

void set_right_factor(SpanFactors& f, const std::vector<float>& right) {
    if (right.size() != static_cast<size_t>(f.rank) * static_cast<size_t>(f.dim) ||
        !right_factor_type_fits(f.right_type, f.dim))
        throw std::invalid_argument("set_right_factor: a right factor of another shape or type");
    if (f.right_type == TensorType::F16) {
        const auto h = to_f16(right.data(), static_cast<int64_t>(right.size()), "span factors");
        f.right.resize(h.size() * sizeof(uint16_t));
        std::memcpy(f.right.data(), h.data(), f.right.size());
        return;
    }
    // Q8_0: the block scales (max|x| / 127) are f16, so a block whose largest entry exceeds
    // 127 · 65504 would overflow.
    for (const float x : right)
        if (std::isfinite(x) && std::fabs(x) > 127.0f * 65504.0f)
            throw std::range_error("span factors: a value of " + std::to_string(x) +
                                   " lies beyond the range of Q8_0's f16 block scales");
    const size_t rb = row_bytes(f.right_type, f.dim);
    f.right.assign(static_cast<size_t>(f.rank) * rb, 0);
    for (int r = 0; r < f.rank; ++r)
        quantize_row(f.right_type, right.data() + static_cast<size_t>(r) * f.dim,
                     f.right.data() + r * rb, f.dim);
}

void symmetric_eigen(std::vector<double>& a, int n, std::vector<double>& w) {
    if (n < 1 || a.size() != static_cast<size_t>(n) * static_cast<size_t>(n))
        throw std::invalid_argument("symmetric_eigen: not an n×n matrix");
    w.assign(static_cast<size_t>(n), 0.0);
    int info = 0, lwork = -1, liwork = -1, iwork_query = 0;
    double work_query = 0;
    dsyevd_("V", "U", &n, a.data(), &n, w.data(), &work_query, &lwork, &iwork_query, &liwork,
            &info);
    lwork = static_cast<int>(work_query);
    liwork = iwork_query;
    std::vector<double> work(static_cast<size_t>(std::max(1, lwork)));
    std::vector<int> iwork(static_cast<size_t>(std::max(1, liwork)));
    dsyevd_("V", "U", &n, a.data(), &n, w.data(), work.data(), &lwork, iwork.data(), &liwork,
            &info);
    if (info != 0)
        throw std::runtime_error("LAPACK dsyevd failed (info " + std::to_string(info) + ")");
    // Deterministic signs: each eigenvector's largest-magnitude entry (the first of equals)
    // positive.
    for (int k = 0; k < n; ++k) {
        double* u = a.data() + static_cast<size_t>(k) * n;
        int big = 0;
        for (int i = 1; i < n; ++i)
            if (std::fabs(u[i]) > std::fabs(u[big]))
                big = i;
        if (u[big] < 0)
            for (int i = 0; i < n; ++i)
                u[i] = -u[i];
    }
}

SpanFactors low_rank_factors(const float* rows, int64_t n, int64_t d, int max_rank,
                             TensorType right_type) {
    if (n < 1 || d < 1 || max_rank < 1)
        throw std::invalid_argument("low_rank_factors: empty span or rank < 1");
    if (right_type != TensorType::F16 && right_type != TensorType::Q8_0)
        throw std::invalid_argument("low_rank_factors: the right factor is held as F16 or Q8_0");
    if (n > 65536)
        throw std::invalid_argument("low_rank_factors: span of " + std::to_string(n) +
                                    " rows is too long (Gram matrix)");
    SpanFactors f;
    f.rows = n;
    f.dim = d;
    f.rank = static_cast<int>(std::min<int64_t>({max_rank, n, d}));
    // Gram matrix G = X Xᵀ [n][n], in double (column-major equals row-major: symmetric).
    std::vector<double> g(static_cast<size_t>(n * n));
    for (int64_t a = 0; a < n; ++a)
        for (int64_t b = 0; b <= a; ++b) {
            double acc = 0;
            for (int64_t j = 0; j < d; ++j)
                acc += static_cast<double>(rows[a * d + j]) * rows[b * d + j];
            g[a * n + b] = g[b * n + a] = acc;
        }
    std::vector<double> w;
    symmetric_eigen(g, static_cast<int>(n), w);
    // Eigenvalues come ascending; eigenvector k is column k (column-major: g[k * n + i]).
    f.sigma2.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
        f.sigma2[k] = std::max(0.0, w[n - 1 - k]);
    std::vector<float> left(static_cast<size_t>(n * f.rank), 0.0f);
    std::vector<float> right(static_cast<size_t>(f.rank) * static_cast<size_t>(d), 0.0f);
    for (int r = 0; r < f.rank; ++r) {
        const double* u = g.data() + (n - 1 - r) * n;
        for (int64_t i = 0; i < n; ++i)
            left[i * f.rank + r] = static_cast<float>(u[i]);
        for (int64_t j = 0; j < d; ++j) {
            double acc = 0;
            for (int64_t i = 0; i < n; ++i)
                acc += u[i] * rows[i * d + j];
            right[r * d + j] = static_cast<float>(acc);
        }
    }
    f.left = to_f16(left.data(), static_cast<int64_t>(left.size()), "span factors");
    f.right_type = right_factor_type(right_type, d);
    set_right_factor(f, right);
    return f;
}

void reconstruct(const SpanFactors& f, float* out) {
    const auto left = f.left_f32();
    const auto right = f.right_f32();
    for (int64_t i = 0; i < f.rows; ++i)
        for (int64_t j = 0; j < f.dim; ++j) {
            double acc = 0;
            for (int r = 0; r < f.rank; ++r)
                acc += static_cast<double>(left[i * f.rank + r]) * right[r * f.dim + j];
            out[i * f.dim + j] = static_cast<float>(acc);
        }
}

void move_key_span(SpanFactors& f, float* summary, int32_t delta, const RopeFrequencies& rope) {
    if (f.dim % 2 != 0)
        throw std::invalid_argument("move_key_span: head dimension must be even");
    const int d = static_cast<int>(f.dim);
    auto right = f.right_f32();
    rope_shift_neox(right.data(), f.rank, 1, d, delta, rope);
    set_right_factor(f, right);
    rope_shift_neox(summary, 1, 1, d, delta, rope);
}

} // namespace spanscope
