#include "engine/sekv/router.h"

#include "engine/sekv/span_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace spanscope {

std::vector<double> project_rows(const float* m, int64_t rows, int64_t d, const float* x) {
    std::vector<double> out(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
        double a = 0;
        for (int64_t j = 0; j < d; ++j)
            a += static_cast<double>(m[r * d + j]) * x[j];
        out[static_cast<size_t>(r)] = a;
    }
    return out;
}

RelevanceScore::RelevanceScore(const float* q, int64_t d, const float* w, int64_t d_out,
                               const float* sketch_basis, int sketch_dim)
    : q_(q), d_(d), w_(w), d_out_(d_out) {
    if (d < 1 || (w && d_out < 1) || (sketch_basis && sketch_dim < 1))
        throw std::invalid_argument("relevance: empty query, projection or sketch basis");
    if (sketch_basis) {
        sketch_dim_ = sketch_dim;
        uq_ = project_rows(sketch_basis, sketch_dim, d, q);
    }
    if (w)
        wq_ = project_rows(w, d_out, d, q);
}

double RelevanceScore::logit(const float* summary_k, int64_t size, double* wk,
                             const float* sketch) const {
    if (size < 1)
        throw std::invalid_argument("relevance: a span of no token");
    double qk = 0;
    for (int64_t j = 0; j < d_; ++j)
        qk += static_cast<double>(q_[j]) * summary_k[j];
    const double scale = 1.0 / std::sqrt(static_cast<double>(d_));
    double z = qk * scale + std::log(static_cast<double>(size));
    if (sketch_dim_ > 0) {
        if (!sketch)
            throw std::invalid_argument("relevance: a router with a sketch basis scores a span "
                                        "that has no sketch");
        z += sketch_logit_term(uq_.data(), sketch_dim_, sketch, scale);
    }
    if (!w_)
        return z;
    // The learned correction ⟨W q, W k̄⟩/√d′ (docs/sekv.md "The relevance's form"). W k̄ is
    // not normalised: the length of a summary key says how much its span's keys agree.
    double ab = 0;
    for (int64_t r = 0; r < d_out_; ++r) {
        double b = 0;
        for (int64_t j = 0; j < d_; ++j)
            b += static_cast<double>(w_[r * d_ + j]) * summary_k[j];
        if (wk)
            wk[r] = b;
        ab += wq_[static_cast<size_t>(r)] * b;
    }
    return z + ab / std::sqrt(static_cast<double>(d_out_));
}

double RelevanceScore::relevance(const float* summary_k, int64_t size, const float* sketch) const {
    return 1.0 / (1.0 + std::exp(-logit(summary_k, size, nullptr, sketch)));
}

double span_relevance(const float* q, const float* summary_k, int64_t d, int64_t size,
                      const float* w, int64_t d_out) {
    return RelevanceScore(q, d, w, d_out).relevance(summary_k, size);
}

std::vector<int> route_spans(const std::vector<double>& relevance,
                             const std::vector<int64_t>& sizes, double tau, int64_t budget_rows) {
    if (relevance.size() != sizes.size())
        throw std::invalid_argument("route_spans: one relevance and one size per span");
    std::vector<int> over;
    for (size_t i = 0; i < relevance.size(); ++i)
        if (relevance[i] > tau)
            over.push_back(static_cast<int>(i));
    if (budget_rows > 0) {
        std::stable_sort(over.begin(), over.end(),
                         [&](int a, int b) { return relevance[a] > relevance[b]; });
        std::vector<int> kept;
        int64_t used = 0;
        for (const int i : over)
            if (used + sizes[i] <= budget_rows) {
                kept.push_back(i);
                used += sizes[i];
            }
        over = std::move(kept);
    }
    std::sort(over.begin(), over.end());
    return over;
}

double calibrate_tau(std::vector<double> recorded, double target) {
    if (recorded.empty())
        throw std::invalid_argument("calibrate_tau: no recorded relevances");
    if (!(target >= 0 && target <= 1))
        throw std::invalid_argument("calibrate_tau: target fraction outside [0, 1]");
    std::sort(recorded.begin(), recorded.end());
    const auto n = static_cast<int64_t>(recorded.size());
    const auto above = static_cast<int64_t>(std::llround(target * static_cast<double>(n)));
    if (above >= n)
        return std::nextafter(recorded.front(), -std::numeric_limits<double>::infinity());
    // Exactly `above` records lie strictly above recorded[n - above - 1] (ties aside).
    return recorded[static_cast<size_t>(n - above - 1)];
}

} // namespace spanscope
