// attention() at every kernel level the CPU has (its float kernels: attention_kernels.inc)
// against a double-precision reference written out here, on shapes that leave partial tiles
// (queries not a multiple of the tile height, keys not a multiple of 4 nor of the key panel and
// over several key blocks, head dimensions not a multiple of the vector width), with and without
// a sliding window and sorted keys, few queries (decode's kernel) and many (prefill's).
#include "engine/kernels/attention.h"

#include "engine/kernels/quant.h"
#include "quant_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

using namespace spanscope;
using spanscope::test::level_supported;
using spanscope::test::LevelGuard;

namespace {

std::vector<double> reference(const AttentionShape& s, const std::vector<float>& q,
                              const std::vector<int32_t>& qpos, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<int32_t>& kpos) {
    const int64_t nq = static_cast<int64_t>(qpos.size()), nk = static_cast<int64_t>(kpos.size());
    const int d = s.head_dim, group = s.n_head / s.n_kv_head;
    std::vector<double> out(static_cast<size_t>(nq * s.n_head * d), 0.0);
    for (int64_t i = 0; i < nq; ++i)
        for (int h = 0; h < s.n_head; ++h) {
            const int g = h / group;
            std::vector<double> w(static_cast<size_t>(nk), 0.0);
            double mx = -INFINITY;
            for (int64_t j = 0; j < nk; ++j) {
                const bool vis =
                    kpos[j] <= qpos[i] && (s.window == 0 || qpos[i] - kpos[j] < s.window);
                if (!vis)
                    continue;
                double dot = 0.0;
                for (int c = 0; c < d; ++c)
                    dot += static_cast<double>(q[(i * s.n_head + h) * d + c]) *
                           k[(j * s.n_kv_head + g) * d + c];
                w[j] = s.scale * dot;
                mx = std::max(mx, w[j]);
            }
            double sum = 0.0;
            for (int64_t j = 0; j < nk; ++j) {
                const bool vis =
                    kpos[j] <= qpos[i] && (s.window == 0 || qpos[i] - kpos[j] < s.window);
                w[j] = vis ? std::exp(w[j] - mx) : 0.0;
                sum += w[j];
            }
            for (int64_t j = 0; j < nk; ++j)
                for (int c = 0; c < d; ++c)
                    out[(i * s.n_head + h) * d + c] +=
                        w[j] / sum * v[(j * s.n_kv_head + g) * d + c];
        }
    return out;
}

class AttentionLevel : public spanscope::test::KernelLevelTest {};

} // namespace

TEST_P(AttentionLevel, MatchesADoublePrecisionReference) {
    LevelGuard guard(GetParam());
    ThreadPool pool(2);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int d : {256, 40, 7})
        for (int window : {0, 16})
            for (auto [nq, nk] : {std::pair<int64_t, int64_t>{1, 131},
                                  {3, 131},
                                  {70, 131},
                                  {2, 600},
                                  {90, 600}}) { // 600: several blocks of 256 keys
                AttentionShape s{4, 2, d, 1.0f / std::sqrt(static_cast<float>(d)), window};
                std::vector<float> q(static_cast<size_t>(nq * s.n_head * d)),
                    k(static_cast<size_t>(nk * s.n_kv_head * d)), v(k.size());
                for (auto* a : {&q, &k, &v})
                    for (auto& x : *a)
                        x = nd(rng);
                std::vector<int32_t> kpos(static_cast<size_t>(nk)), qpos(static_cast<size_t>(nq));
                for (int64_t j = 0; j < nk; ++j)
                    kpos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
                for (int64_t i = 0; i < nq; ++i)
                    qpos[static_cast<size_t>(i)] = static_cast<int32_t>(nk - nq + i);
                const auto ref = reference(s, q, qpos, k, v, kpos);
                for (bool sorted : {false, true}) {
                    std::vector<float> out(ref.size(), NAN);
                    attention(s, q.data(), qpos.data(), nq, k.data(), v.data(), kpos.data(), nk,
                              out.data(), pool, sorted);
                    // Float rounding of a d-term dot product, the softmax and an nk-term
                    // weighted sum of values of magnitude about 4 at most.
                    const double u = std::ldexp(1.0, -24);
                    const double tol = 16.0 * (d + nk + 16) * u * 4.0;
                    double worst = 0.0;
                    for (size_t i = 0; i < ref.size(); ++i)
                        worst = std::max(worst, std::fabs(out[i] - ref[i]));
                    EXPECT_LT(worst, tol) << "d " << d << " window " << window << " nq " << nq
                                          << " sorted " << sorted;
                }
            }
}

INSTANTIATE_TEST_SUITE_P(Levels, AttentionLevel,
                         ::testing::Values(KernelLevel::Scalar, KernelLevel::Avx2,
                                           KernelLevel::AvxVnni, KernelLevel::Avx512,
                                           KernelLevel::Amx),
                         spanscope::test::level_param_name);
