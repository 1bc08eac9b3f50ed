// token_surprisal's fused path (quantised lm_head: the integer product in 512-row tiles with an
// online log-sum-exp, surprisal.h) against a log-softmax computed here in double from the
// dequantised weights (dequantize_row) and the quantised activations (qgemm_quantize), on a
// vocabulary that is not a multiple of the tile, for Q8_0 and Q6_K heads; also against the float
// numerics (PrefillProducts::Float) within the activations' int16 rounding.
#include "engine/kernels/matmul.h"
#include "engine/kernels/qgemm.h"
#include "engine/kernels/quant.h"
#include "engine/model/surprisal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace spanscope;

TEST(SurprisalFused, MatchesADoublePrecisionLogSoftmax) {
    for (TensorType t : {TensorType::Q8_0, TensorType::Q6_K}) {
        const int64_t V = 1300, E = 256, n = 11;
        std::mt19937 rng(17);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> row(static_cast<size_t>(E));
        std::vector<uint8_t> bytes(row_bytes(t, E) * static_cast<size_t>(V));
        for (int64_t v = 0; v < V; ++v) {
            for (auto& x : row)
                x = 0.05f * nd(rng);
            quantize_row(t, row.data(), bytes.data() + row_bytes(t, E) * static_cast<size_t>(v), E);
        }
        WeightMatrix w;
        w.type = t;
        w.cols = E;
        w.rows = V;
        w.data = bytes.data();
        w.row_stride = row_bytes(t, E);
        std::vector<float> hidden(static_cast<size_t>(n * E));
        for (auto& x : hidden)
            x = 3.0f * nd(rng);
        std::vector<int32_t> targets(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            targets[static_cast<size_t>(i)] = static_cast<int32_t>((i * 131 + 7) % V);
        targets[3] = -1;                          // a row without a target
        targets[4] = static_cast<int32_t>(V - 1); // the last, partial tile
        targets[5] = 511;                         // the last row of the first tile
        ThreadPool pool(2);
        std::vector<float> got(static_cast<size_t>(n));
        token_surprisal(w, hidden.data(), n, targets.data(), got.data(), pool);

        QgemmActivations xq;
        qgemm_quantize(hidden.data(), n, E, xq);
        std::vector<float> wd(static_cast<size_t>(E));
        std::vector<double> logits(static_cast<size_t>(n * V));
        for (int64_t v = 0; v < V; ++v) {
            dequantize_row(t, bytes.data() + w.row_stride * static_cast<size_t>(v), wd.data(), E);
            for (int64_t i = 0; i < n; ++i) {
                double dot = 0.0;
                for (int64_t k = 0; k < E; ++k)
                    dot += static_cast<double>(wd[static_cast<size_t>(k)]) *
                           xq.d[static_cast<size_t>(i * E / 32 + k / 32)] *
                           xq.q[static_cast<size_t>(i * E + k)];
                logits[static_cast<size_t>(i * V + v)] = dot;
            }
        }
        for (int64_t i = 0; i < n; ++i) {
            if (targets[static_cast<size_t>(i)] < 0) {
                EXPECT_TRUE(std::isnan(got[static_cast<size_t>(i)]));
                continue;
            }
            double mx = -INFINITY, sum = 0.0;
            for (int64_t v = 0; v < V; ++v)
                mx = std::max(mx, logits[static_cast<size_t>(i * V + v)]);
            for (int64_t v = 0; v < V; ++v)
                sum += std::exp(logits[static_cast<size_t>(i * V + v)] - mx);
            const double want =
                mx + std::log(sum) -
                logits[static_cast<size_t>(i * V + targets[static_cast<size_t>(i)])];
            // Float rounding of 256-term logits of magnitude ~10 and of the exponentials' sum.
            EXPECT_NEAR(got[static_cast<size_t>(i)], want, 1e-4 * std::max(1.0, want))
                << traits(t).name << " row " << i;
        }
        // The float numerics (float activations, sgemm) within the int16 rounding.
        set_prefill_products(PrefillProducts::Float);
        std::vector<float> ref(static_cast<size_t>(n));
        token_surprisal(w, hidden.data(), n, targets.data(), ref.data(), pool);
        set_prefill_products(PrefillProducts::Integer);
        for (int64_t i = 0; i < n; ++i) {
            if (targets[static_cast<size_t>(i)] >= 0) {
                EXPECT_NEAR(got[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], 1e-3)
                    << traits(t).name << " row " << i;
            }
        }
    }
}
