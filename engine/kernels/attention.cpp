#include "engine/kernels/attention.h"

#include "engine/kernels/attention_kernels.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/simd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

namespace spanscope {

namespace {
constexpr int64_t kQueryBlock = 64;
// Above this many queries the keys are transposed for the score kernel.
constexpr int64_t kTransposeMinQueries = 16;

/// The float kernels of the current kernel level (quant.h).
const attention_detail::Kernels& kernels() {
    static const attention_detail::Kernels scalar = attention_detail::scalar_kernels();
    static const attention_detail::Kernels avx2 = attention_detail::avx2_kernels();
    static const attention_detail::Kernels avx512 = attention_detail::avx512_kernels();
    switch (kernel_level()) {
    case KernelLevel::Avx2:
    case KernelLevel::AvxVnni:
        return avx2;
    case KernelLevel::Avx512:
    case KernelLevel::Amx:
        return avx512;
    default:
        return scalar;
    }
}
} // namespace

void attention(const AttentionShape& s, const float* q, const int32_t* qpos, int64_t n_q,
               const float* k, const float* v, const int32_t* kpos, int64_t n_kv_all, float* out,
               ThreadPool& pool, bool keys_sorted, float* key_mass) {
    const int group = s.n_head / s.n_kv_head;
    const int d = s.head_dim;
    const int q_stride = s.n_head * d;
    const int kv_stride = s.n_kv_head * d;
    const int64_t n_blocks = (n_q + kQueryBlock - 1) / kQueryBlock;
    const int64_t n_tasks = n_blocks * s.n_head;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    // Each thread sums the probability mass into its own copy; they are added at the end. With
    // one block of queries (a decode step) each task is one query head: it writes a row of its
    // own instead, so the copies do not grow with the threads.
    const bool per_head = key_mass && n_blocks == 1;
    std::vector<std::vector<double>> mass;
    std::vector<float> head_mass;
    if (per_head)
        head_mass.assign(static_cast<size_t>(s.n_head * n_kv_all), 0.0f);
    else if (key_mass)
        mass.assign(static_cast<size_t>(pool.size()),
                    std::vector<double>(static_cast<size_t>(s.n_kv_head * n_kv_all), 0.0));

    const attention_detail::Kernels& kern = kernels();
    // Many queries: the keys transposed once per kv head into panels (attention_kernels.h), so
    // that the score kernel vectorises over keys.
    using attention_detail::kKeyPanel;
    const bool transposed = n_q > kTransposeMinQueries;
    const int64_t n_panels = (n_kv_all + kKeyPanel - 1) / kKeyPanel;
    const size_t head_floats = static_cast<size_t>(n_panels * d * kKeyPanel);
    std::vector<float> kt;
    if (transposed) {
        kt.assign(static_cast<size_t>(s.n_kv_head) * head_floats, 0.0f);
        pool.parallel_for(n_panels, [&](int64_t p0, int64_t p1, int) {
            for (int g = 0; g < s.n_kv_head; ++g)
                for (int64_t j = p0 * kKeyPanel; j < std::min(n_kv_all, p1 * kKeyPanel); ++j) {
                    const float* kr = k + j * kv_stride + g * d;
                    float* dst =
                        kt.data() + g * head_floats +
                        static_cast<size_t>((j / kKeyPanel) * d * kKeyPanel + j % kKeyPanel);
                    for (int c = 0; c < d; ++c)
                        dst[c * kKeyPanel] = kr[c];
                }
        });
    }
    // Tasks are taken one at a time, the last query blocks first: with a causal mask they see the
    // most keys, so handing them out first keeps the threads evenly loaded. With key_mass the
    // split is fixed instead (contiguous ranges), so that each thread's sums, and their total,
    // are the same from run to run.
    std::atomic<int64_t> next{0};
    const bool dynamic = key_mass == nullptr;
    pool.parallel_for(dynamic ? pool.size() : n_tasks, [&](int64_t t0, int64_t t1, int thread) {
        std::vector<float> scores;
        int64_t fixed = t0;
        for (;;) {
            int64_t task;
            if (dynamic) {
                const int64_t taken = next.fetch_add(1);
                if (taken >= n_tasks)
                    break;
                task = n_tasks - 1 - taken;
            } else {
                if (fixed >= t1)
                    break;
                task = fixed++;
            }
            const int h = static_cast<int>(task % s.n_head);
            const int64_t qb = (task / s.n_head) * kQueryBlock;
            const int64_t nq = std::min(kQueryBlock, n_q - qb);
            const int g = h / group;
            // Keys [j0, j0 + n_kv) are the ones this block can see at all.
            int64_t j0 = 0, j1 = n_kv_all;
            if (keys_sorted) {
                int32_t pmin = qpos[qb], pmax = qpos[qb];
                for (int64_t i = 1; i < nq; ++i) {
                    pmin = std::min(pmin, qpos[qb + i]);
                    pmax = std::max(pmax, qpos[qb + i]);
                }
                j1 = std::upper_bound(kpos, kpos + n_kv_all, pmax) - kpos;
                if (s.window > 0)
                    j0 = std::lower_bound(kpos, kpos + j1, pmin - s.window + 1) - kpos;
            }
            if (transposed) // from the start of j0's panel: the keys before j0 are masked below
                j0 -= j0 % kKeyPanel;
            const int64_t n_kv = std::max<int64_t>(0, j1 - j0);
            const float* kb = k + j0 * kv_stride;
            const float* vb = v + j0 * kv_stride;
            const int32_t* kp = kpos + j0;
            if (n_kv == 0) {
                for (int64_t i = 0; i < nq; ++i)
                    std::fill(out + (qb + i) * q_stride + h * d,
                              out + (qb + i) * q_stride + (h + 1) * d, 0.0f);
                continue;
            }
            scores.resize(static_cast<size_t>(nq * n_kv));
            // scores[i][j] = q[qb+i][h] · k[j][g]
            if (transposed)
                kern.scores_transposed(q + qb * q_stride + h * d, q_stride, nq,
                                       kt.data() + g * head_floats +
                                           static_cast<size_t>((j0 / kKeyPanel) * d * kKeyPanel),
                                       n_kv, d, s.scale, scores.data(), n_kv);
            else
                kern.scores(q + qb * q_stride + h * d, q_stride, nq, kb + g * d, kv_stride, n_kv, d,
                            s.scale, scores.data(), n_kv);
            for (int64_t i = 0; i < nq; ++i) {
                float* row = scores.data() + i * n_kv;
                const int32_t p = qpos[qb + i];
                float mx = neg_inf;
                for (int64_t j = 0; j < n_kv; ++j) {
                    const bool visible = kp[j] <= p && (s.window == 0 || p - kp[j] < s.window);
                    if (!visible)
                        row[j] = neg_inf;
                    mx = std::max(mx, row[j]);
                }
                if (mx == neg_inf) {
                    std::fill(row, row + n_kv, 0.0f);
                    continue;
                }
                const double sum = exp_shifted_sum(row, n_kv, mx); // masked -inf -> 0
                const float inv = static_cast<float>(1.0 / sum);
                for (int64_t j = 0; j < n_kv; ++j)
                    row[j] *= inv;
                if (per_head) {
                    float* m = head_mass.data() + h * n_kv_all + j0;
                    for (int64_t j = 0; j < n_kv; ++j)
                        m[j] += row[j];
                } else if (key_mass) {
                    double* m = mass[static_cast<size_t>(thread)].data() + g * n_kv_all + j0;
                    for (int64_t j = 0; j < n_kv; ++j)
                        m[j] += row[j];
                }
            }
            // out[qb+i][h] = scores[i] · v[:, g]
            kern.weighted_sum(scores.data(), n_kv, nq, vb + g * d, kv_stride, n_kv, d,
                              out + qb * q_stride + h * d, q_stride);
        }
    });
    for (const auto& m : mass)
        for (size_t j = 0; j < m.size(); ++j)
            key_mass[j] += static_cast<float>(m[j]);
    for (int h = 0; h < (per_head ? s.n_head : 0); ++h) {
        const float* m = head_mass.data() + h * n_kv_all;
        float* dst = key_mass + (h / group) * n_kv_all;
        for (int64_t j = 0; j < n_kv_all; ++j)
            dst[j] += m[j];
    }
}

} // namespace spanscope
