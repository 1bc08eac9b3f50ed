#include "surprisal.h"

#include "cancel.h"
#include "simd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

void token_surprisal(const WeightMatrix& lm_head, const float* hidden, int64_t n,
                     const int32_t* targets, float* out, ThreadPool& pool, int64_t slice_rows,
                     const std::atomic<bool>* cancel) {
    const int64_t V = lm_head.rows;
    for (int64_t t = 0; t < n; ++t)
        if (targets[t] >= V)
            throw std::invalid_argument("surprisal target " + std::to_string(targets[t]) +
                                        " outside the vocabulary");
    // Rows that need no surprisal are left out of the product.
    std::vector<int64_t> rows;
    for (int64_t t = 0; t < n; ++t) {
        if (targets[t] >= 0)
            rows.push_back(t);
        else
            out[t] = std::numeric_limits<float>::quiet_NaN();
    }
    if (rows.empty())
        return;
    const int64_t m = static_cast<int64_t>(rows.size()), E = lm_head.cols;
    std::vector<float> x(static_cast<size_t>(m * E));
    for (int64_t r = 0; r < m; ++r)
        std::copy(hidden + rows[r] * E, hidden + (rows[r] + 1) * E, x.begin() + r * E);

    // Running log-sum-exp per row: max and sum of exp(logit - max), in double.
    std::vector<double> mx(static_cast<size_t>(m), -std::numeric_limits<double>::infinity());
    std::vector<double> sum(static_cast<size_t>(m), 0.0), target(static_cast<size_t>(m), 0.0);
    const int64_t S = std::max<int64_t>(1, std::min(slice_rows, V));
    std::vector<float> logits(static_cast<size_t>(m * S));
    for (int64_t v0 = 0; v0 < V; v0 += S) {
        if (cancel && cancel->load())
            throw Cancelled();
        const int64_t v1 = std::min(V, v0 + S), w = v1 - v0;
        matmul_rows(lm_head, v0, v1, x.data(), m, logits.data(), pool);
        pool.parallel_for(m, [&](int64_t r0, int64_t r1, int) {
            for (int64_t r = r0; r < r1; ++r) {
                float* l = logits.data() + r * w;
                const int32_t tg = targets[rows[r]];
                if (tg >= v0 && tg < v1)
                    target[r] = l[tg - v0];
                const double slice_max = *std::max_element(l, l + w);
                if (slice_max > mx[r]) {
                    sum[r] *= std::exp(mx[r] - slice_max);
                    mx[r] = slice_max;
                }
                // exp_shifted_sum overwrites the slice, which is not needed afterwards.
                sum[r] += exp_shifted_sum(l, w, static_cast<float>(mx[r]));
            }
        });
    }
    for (int64_t r = 0; r < m; ++r)
        out[rows[r]] = static_cast<float>(mx[r] + std::log(sum[r]) - target[r]);
}

} // namespace spanscope
