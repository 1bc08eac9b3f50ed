#include "engine/sekv/span_sketch.h"

#include "engine/sekv/router.h"
#include "engine/sekv/span_factors.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope {

int64_t sketch_length(int m) {
    return int64_t{m} + int64_t{m} * (m + 1) / 2;
}

namespace {

void check_basis(size_t basis_size, size_t n_kv, int m, int head_dim) {
    if (m < 1 || head_dim < 1)
        throw std::invalid_argument("span sketch: a basis of no vector or no dimension");
    if (n_kv == 0)
        throw std::invalid_argument("span sketch: no KV head (a span without key factors, as "
                                    "chunk_summary keeps, cannot be sketched)");
    if (basis_size != n_kv * static_cast<size_t>(m) * static_cast<size_t>(head_dim))
        throw std::invalid_argument("span sketch: the basis holds " + std::to_string(basis_size) +
                                    " values, the span's " + std::to_string(n_kv) +
                                    " KV heads of dimension " + std::to_string(head_dim) +
                                    " need " + std::to_string(n_kv * m * head_dim));
}

// One KV head's sketch into o [sketch_length(m)] from the projected rows u [n][m] and the
// projected summary key ukbar [m].
void sketch_of(const std::vector<double>& u, int64_t n, int m, const std::vector<double>& ukbar,
               float* o) {
    std::vector<double> mean(static_cast<size_t>(m), 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int a = 0; a < m; ++a)
            mean[static_cast<size_t>(a)] += u[static_cast<size_t>(i) * m + a] / n;
    for (int a = 0; a < m; ++a)
        o[a] = static_cast<float>(mean[static_cast<size_t>(a)] - ukbar[static_cast<size_t>(a)]);
    int64_t t = m;
    for (int a = 0; a < m; ++a)
        for (int b = a; b < m; ++b) {
            double c = 0;
            for (int64_t i = 0; i < n; ++i)
                c += (u[static_cast<size_t>(i) * m + a] - mean[static_cast<size_t>(a)]) *
                     (u[static_cast<size_t>(i) * m + b] - mean[static_cast<size_t>(b)]);
            o[t++] = static_cast<float>(c / n);
        }
}

} // namespace

std::vector<float> span_key_sketch(const SekvSpan& span, const std::vector<float>& basis, int m,
                                   int head_dim) {
    const size_t n_kv = span.k.size();
    check_basis(basis.size(), n_kv, m, head_dim);
    const size_t d = static_cast<size_t>(head_dim);
    if (span.summary_k.size() != n_kv * d)
        throw std::invalid_argument("span sketch: summary keys of another shape than the basis");
    const int64_t len = sketch_length(m);
    std::vector<float> out(n_kv * static_cast<size_t>(len));
    for (size_t g = 0; g < n_kv; ++g) {
        const SpanFactors& f = span.k[g];
        if (f.dim != head_dim || f.rows != span.size)
            throw std::invalid_argument("span sketch: key factors of another shape than the span");
        const float* U = basis.data() + g * static_cast<size_t>(m) * d;
        // U right_r [rank][m], then u_i = Σ_r left_ir (U right_r).
        const int R = f.rank;
        const auto right = f.right_f32();
        const auto left = f.left_f32();
        std::vector<std::vector<double>> ur(static_cast<size_t>(R));
        for (int r = 0; r < R; ++r)
            ur[static_cast<size_t>(r)] =
                project_rows(U, m, static_cast<int64_t>(d), right.data() + r * d);
        const int64_t n = f.rows;
        std::vector<double> u(static_cast<size_t>(n) * m, 0.0);
        for (int64_t i = 0; i < n; ++i)
            for (int r = 0; r < R; ++r) {
                const double l = left[static_cast<size_t>(i) * R + r];
                for (int a = 0; a < m; ++a)
                    u[static_cast<size_t>(i) * m + a] += l * ur[static_cast<size_t>(r)][a];
            }
        sketch_of(u, n, m,
                  project_rows(U, m, static_cast<int64_t>(d), span.summary_k.data() + g * d),
                  out.data() + g * static_cast<size_t>(len));
    }
    return out;
}

std::vector<float> span_key_sketch_rows(const float* k, int64_t n, int n_kv_head,
                                        const float* summary_k, const std::vector<float>& basis,
                                        int m, int head_dim) {
    if (n < 1)
        throw std::invalid_argument("span sketch: a span of no row");
    check_basis(basis.size(), static_cast<size_t>(std::max(n_kv_head, 0)), m, head_dim);
    const size_t d = static_cast<size_t>(head_dim), n_kv = static_cast<size_t>(n_kv_head);
    const int64_t len = sketch_length(m);
    std::vector<float> out(n_kv * static_cast<size_t>(len));
    for (size_t g = 0; g < n_kv; ++g) {
        const float* U = basis.data() + g * static_cast<size_t>(m) * d;
        std::vector<double> u(static_cast<size_t>(n) * m);
        for (int64_t i = 0; i < n; ++i) {
            const auto ui = project_rows(U, m, static_cast<int64_t>(d),
                                         k + (static_cast<size_t>(i) * n_kv + g) * d);
            std::copy(ui.begin(), ui.end(), u.begin() + i * m);
        }
        sketch_of(u, n, m, project_rows(U, m, static_cast<int64_t>(d), summary_k + g * d),
                  out.data() + g * static_cast<size_t>(len));
    }
    return out;
}

const float* head_sketch(const std::vector<float>& sketch, int n_kv_head, int m, int g) {
    if (m < 1)
        return nullptr;
    const int64_t len = sketch_length(m);
    if (sketch.size() != static_cast<size_t>(n_kv_head * len) || g < 0 || g >= n_kv_head)
        throw std::invalid_argument("span sketch: a span without the key sketch of the router's "
                                    "basis (" +
                                    std::to_string(sketch.size()) + " values, " +
                                    std::to_string(n_kv_head * len) + " expected)");
    return sketch.data() + static_cast<size_t>(g) * len;
}

double sketch_logit_term(const double* uq, int m, const float* sketch, double scale) {
    double lin = 0;
    for (int a = 0; a < m; ++a)
        lin += uq[a] * sketch[a];
    double quad = 0;
    int64_t t = m;
    for (int a = 0; a < m; ++a)
        for (int b = a; b < m; ++b, ++t)
            quad += (a == b ? 1.0 : 2.0) * uq[a] * uq[b] * sketch[t];
    return scale * lin + 0.5 * scale * scale * quad;
}

std::vector<float> fit_sketch_basis(const float* q, int64_t n_q, int n_head, int n_kv_head,
                                    int head_dim, int m) {
    if (n_q < 1 || n_kv_head < 1 || n_head < 1 || n_head % n_kv_head != 0 || m < 1 || m > head_dim)
        throw std::invalid_argument("sketch basis: " + std::to_string(n_q) + " queries, " +
                                    std::to_string(n_head) + " heads over " +
                                    std::to_string(n_kv_head) + " KV heads, " + std::to_string(m) +
                                    " vectors of dimension " + std::to_string(head_dim));
    const int N = head_dim, group = n_head / n_kv_head;
    std::vector<float> out(static_cast<size_t>(n_kv_head) * m * N);
    for (int g = 0; g < n_kv_head; ++g) {
        std::vector<double> M(static_cast<size_t>(N) * N, 0.0);
        for (int64_t i = 0; i < n_q; ++i)
            for (int h = g * group; h < (g + 1) * group; ++h) {
                const float* x = q + (i * n_head + h) * N;
                for (int a = 0; a < N; ++a)
                    for (int b = a; b < N; ++b)
                        M[static_cast<size_t>(b) * N + a] += static_cast<double>(x[a]) * x[b];
            }
        // Column-major with the upper triangle filled (row a, column b >= a at b·N + a).
        std::vector<double> w;
        symmetric_eigen(M, N, w);
        for (int a = 0; a < m; ++a) {
            const double* v = M.data() + static_cast<size_t>(N - 1 - a) * N; // descending
            for (int j = 0; j < N; ++j)
                out[(static_cast<size_t>(g) * m + a) * N + j] = static_cast<float>(v[j]);
        }
    }
    return out;
}

} // namespace spanscope
