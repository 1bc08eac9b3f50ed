#include "engine/model/surprisal.h"

#include "engine/kernels/cancel.h"
#include "engine/kernels/qgemm.h"
#include "engine/kernels/simd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

namespace {

// Vocabulary rows per tile of the fused product. A multiple of every level's strip height, so the
// tiles, and the order in which their sums are merged, are the same at every level and thread
// count; m × kTileRows floats of logits live in a thread's cache at a time.
constexpr int64_t kTileRows = 512;

/// The output product as integer tiles (qgemm_tiles): each tile's logits are reduced to a max
/// and a sum of exponentials per token as soon as they are computed, and the target logit is
/// taken on the way; the tiles' (max, sum) are merged in vocabulary order at the end.
void fused_surprisal(const WeightMatrix& lm_head, const float* x, int64_t m,
                     const std::vector<int64_t>& rows, const int32_t* targets, float* out,
                     ThreadPool& pool, const std::atomic<bool>* cancel) {
    const int64_t V = lm_head.rows;
    const int64_t n_tiles = (V + kTileRows - 1) / kTileRows;
    QgemmActivations xq;
    qgemm_quantize(x, m, lm_head.cols, xq, &pool);
    std::vector<float> tile_max(static_cast<size_t>(n_tiles * m));
    std::vector<double> tile_sum(static_cast<size_t>(n_tiles * m));
    std::vector<float> target(static_cast<size_t>(m), 0.0f);
    qgemm_tiles(
        lm_head, 0, V, xq, kTileRows,
        [&](int64_t ti, int64_t first, int64_t n_rows, float* logits, int) {
            if (cancel && cancel->load())
                throw Cancelled();
            for (int64_t r = 0; r < m; ++r) {
                float* l = logits + r * n_rows;
                const int32_t tg = targets[rows[static_cast<size_t>(r)]];
                if (tg >= first && tg < first + n_rows)
                    target[static_cast<size_t>(r)] = l[tg - first];
                const float mx = max_value(l, n_rows);
                tile_max[static_cast<size_t>(ti * m + r)] = mx;
                tile_sum[static_cast<size_t>(ti * m + r)] = exp_shifted_sum(l, n_rows, mx);
            }
        },
        pool);
    for (int64_t r = 0; r < m; ++r) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t ti = 0; ti < n_tiles; ++ti)
            mx = std::max(mx, static_cast<double>(tile_max[static_cast<size_t>(ti * m + r)]));
        double sum = 0.0;
        for (int64_t ti = 0; ti < n_tiles; ++ti)
            sum += tile_sum[static_cast<size_t>(ti * m + r)] *
                   std::exp(static_cast<double>(tile_max[static_cast<size_t>(ti * m + r)]) - mx);
        out[rows[static_cast<size_t>(r)]] =
            static_cast<float>(mx + std::log(sum) - target[static_cast<size_t>(r)]);
    }
}

/// Float weights: slices of the vocabulary through matmul_rows, with a running log-sum-exp.
void sliced_surprisal(const WeightMatrix& lm_head, const float* x, int64_t m,
                      const std::vector<int64_t>& rows, const int32_t* targets, float* out,
                      ThreadPool& pool, int64_t slice_rows, const std::atomic<bool>* cancel) {
    const int64_t V = lm_head.rows;
    // Running log-sum-exp per row: max and sum of exp(logit - max), in double.
    std::vector<double> mx(static_cast<size_t>(m), -std::numeric_limits<double>::infinity());
    std::vector<double> sum(static_cast<size_t>(m), 0.0), target(static_cast<size_t>(m), 0.0);
    const int64_t S = std::max<int64_t>(1, std::min(slice_rows, V));
    std::vector<float> logits(static_cast<size_t>(m * S));
    for (int64_t v0 = 0; v0 < V; v0 += S) {
        if (cancel && cancel->load())
            throw Cancelled();
        const int64_t v1 = std::min(V, v0 + S), w = v1 - v0;
        matmul_rows(lm_head, v0, v1, x, m, logits.data(), pool);
        pool.parallel_for(m, [&](int64_t r0, int64_t r1, int) {
            for (int64_t r = r0; r < r1; ++r) {
                float* l = logits.data() + r * w;
                const int32_t tg = targets[rows[static_cast<size_t>(r)]];
                if (tg >= v0 && tg < v1)
                    target[static_cast<size_t>(r)] = l[tg - v0];
                const double slice_max = *std::max_element(l, l + w);
                if (slice_max > mx[static_cast<size_t>(r)]) {
                    sum[static_cast<size_t>(r)] *= std::exp(mx[static_cast<size_t>(r)] - slice_max);
                    mx[static_cast<size_t>(r)] = slice_max;
                }
                // exp_shifted_sum overwrites the slice, which is not needed afterwards.
                sum[static_cast<size_t>(r)] +=
                    exp_shifted_sum(l, w, static_cast<float>(mx[static_cast<size_t>(r)]));
            }
        });
    }
    for (int64_t r = 0; r < m; ++r)
        out[rows[static_cast<size_t>(r)]] =
            static_cast<float>(mx[static_cast<size_t>(r)] + std::log(sum[static_cast<size_t>(r)]) -
                               target[static_cast<size_t>(r)]);
}

} // namespace

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
    if (qgemm_supports(lm_head.type) && prefill_products() == PrefillProducts::Integer)
        fused_surprisal(lm_head, x.data(), m, rows, targets, out, pool, cancel);
    else
        sliced_surprisal(lm_head, x.data(), m, rows, targets, out, pool, slice_rows, cancel);
}

} // namespace spanscope
