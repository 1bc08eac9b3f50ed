// The tiny fixture of the trained zoom-in's tests (issue 8: test_zoom_model.cpp,
// test_zoom_hard_forward.cpp, test_zoom_reference.cpp, test_zoom_train.cpp): synthetic recordings
// whose teacher outputs and span masses are softmax attention written out in double (not the
// engine's), a small parameter set, and the helpers of the finite-difference checks.
#pragma once

#include "engine/kernels/fp16.h"
#include "engine/kernels/thread_pool.h"
#include "engine/sekv/router_params.h"
#include "engine/sekv/span_sketch.h"
#include "lab/router/zoom_model.h"
#include "random_fill.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

namespace spanscope::test {

// Four query heads over two KV heads (grouped-query attention, as Gemma 3's global layers), so
// every test also covers which KV head a query head reads.
inline constexpr int kHeads = 4, kKv = 2, kGroup = kHeads / kKv, kDim = 8, kRank = 4, kDout = 4,
                     kHidden = 3;
inline constexpr double kRopeBase = 10000; // the rank gate reads summary keys rotated back by it

// A synthetic recording: random rows, fixed spans, queries whose teacher output and span masses
// come from softmax attention written out here in double (not the engine's).
// The spans of most tests: 6–8 rows, more than kRank and at most kDim.
inline const std::vector<TokenSpan> kSpans = {{3, 9}, {11, 19}, {20, 27}, {30, 37}, {39, 46}};

inline ZoomRecord synthetic_record(uint32_t seed, int n = 64,
                                   const std::vector<TokenSpan>& spans = kSpans) {
    std::mt19937 rng(seed);
    ZoomRecord r;
    r.source = "synthetic";
    r.tokens.resize(static_cast<size_t>(n), 1);
    r.token_surprisal = randn(static_cast<size_t>(n), rng);
    for (auto& s : r.token_surprisal)
        s = std::fabs(s) + 0.1f;
    r.spans = spans;
    r.tail = 4;
    r.query_pos = {50, 57, n - 1};
    ZoomRecordLayer L;
    L.layer = 3;
    L.n_head = kHeads;
    L.n_kv_head = kKv;
    L.head_dim = kDim;
    L.scale = 0.5f;
    L.rope_base = kRopeBase;
    const auto at = [](int64_t i, int g, int j) {
        return static_cast<size_t>((i * kKv + g) * kDim + j);
    };
    L.k = randn(static_cast<size_t>(n * kKv * kDim), rng);
    L.v = randn(static_cast<size_t>(n * kKv * kDim), rng);
    // Rows of a span share a direction, so low ranks hold most of them.
    for (const auto& s : r.spans)
        for (int64_t i = s.begin + 1; i < s.end; ++i)
            for (int g = 0; g < kKv; ++g)
                for (int j = 0; j < kDim; ++j) {
                    L.k[at(i, g, j)] = 0.8f * L.k[at(s.begin, g, j)] + 0.3f * L.k[at(i, g, j)];
                    L.v[at(i, g, j)] = 0.8f * L.v[at(s.begin, g, j)] + 0.3f * L.v[at(i, g, j)];
                }
    // f16-rounded, as the cache and the recordings hold them.
    for (auto* rows : {&L.k, &L.v})
        for (auto& x : *rows)
            x = fp16_to_fp32(fp32_to_fp16(x));
    const auto nq = r.query_pos.size();
    L.q = randn(nq * kHeads * kDim, rng, 1.5f);
    L.out.assign(nq * kHeads * kDim, 0.0f);
    L.span_mass.assign(nq * kHeads * r.spans.size(), 0.0f);
    for (size_t i = 0; i < nq; ++i)
        for (int h = 0; h < kHeads; ++h) {
            const int g = h / kGroup;
            const float* q = L.q.data() + (i * kHeads + h) * kDim;
            const int p = r.query_pos[i];
            std::vector<double> w(static_cast<size_t>(p + 1));
            double mx = -1e300, z = 0;
            for (int j = 0; j <= p; ++j) {
                double s = 0;
                for (int x = 0; x < kDim; ++x)
                    s += static_cast<double>(q[x]) * L.k[at(j, g, x)];
                w[static_cast<size_t>(j)] = L.scale * s;
                mx = std::max(mx, w[static_cast<size_t>(j)]);
            }
            for (auto& x : w)
                z += (x = std::exp(x - mx));
            for (int j = 0; j <= p; ++j)
                for (int x = 0; x < kDim; ++x)
                    L.out[(i * kHeads + h) * kDim + x] +=
                        static_cast<float>(w[static_cast<size_t>(j)] / z * L.v[at(j, g, x)]);
            for (size_t s = 0; s < r.spans.size(); ++s) {
                if (!r.visible(static_cast<int64_t>(i), s))
                    continue;
                double m = 0;
                for (int64_t j = r.spans[s].begin; j < r.spans[s].end; ++j)
                    m += w[static_cast<size_t>(j)] / z;
                L.span_mass[(i * kHeads + h) * r.spans.size() + s] = static_cast<float>(m);
            }
        }
    r.layers.push_back(std::move(L));
    return r;
}

inline RouterParams tiny_params(uint64_t seed, int n_rank = kRank) {
    RouterLayerParams shape;
    shape.layer = 3;
    shape.n_head = kHeads;
    shape.head_dim = kDim;
    shape.d_out = kDout;
    shape.gate.n_rank = n_rank;
    shape.gate.head_dim = kDim;
    shape.gate.n_hidden = kHidden;
    // W at full scale, so that its correction to the training-free score matters in every test.
    auto p = init_router_params({shape}, seed, 1.0);
    // Gates away from 0 and 1 and thresholds near the logits, so every term matters.
    for (auto& b : p.layers[0].gate.b2)
        b = 0.0f;
    p.layers[0].theta = {1.2f, 0.8f, 1.0f, 0.9f};
    return p;
}

struct Fixture {
    std::vector<ZoomRecord> records;
    std::vector<ZoomExampleSet> sets;
    std::vector<ZoomItem> items;
};

// Factors of at most max_rank components (the gate's n_rank, as zoom-train builds them).
inline std::unique_ptr<Fixture> make_fixture(const RouterParams& p, std::vector<uint32_t> seeds,
                                             const std::vector<TokenSpan>& spans = kSpans,
                                             int max_rank = kRank) {
    auto f = std::make_unique<Fixture>();
    f->records.reserve(seeds.size());
    for (const auto s : seeds)
        f->records.push_back(synthetic_record(s, 64, spans));
    for (size_t i = 0; i < f->records.size(); ++i) {
        f->sets.push_back(prepare_examples(f->records[i], p, max_rank));
        for (const auto& ex : list_examples(f->sets.back()))
            f->items.push_back({static_cast<int>(i), ex});
    }
    return f;
}

/// tiny_params with a sketch basis of m vectors per KV head fitted on the queries of the
/// synthetic record of `seed` (as zoom-train --sketch-dim fits it on the training recordings),
/// scaled by `gain` (> 1: a larger term, so that it changes more decisions in a small test).
inline RouterParams with_sketch(RouterParams p, uint32_t seed, int m, float gain = 1.0f) {
    const auto r = synthetic_record(seed, 64, kSpans);
    auto& l = p.layers[0];
    l.sketch_dim = m;
    l.n_kv_head = kKv;
    l.sketch = fit_sketch_basis(r.layers[0].q.data(), r.n_queries(), kHeads, kKv, kDim, m);
    for (auto& x : l.sketch)
        x *= gain;
    return p;
}

inline double total_loss(const RouterParams& p, const Fixture& f, const ZoomLossOptions& o,
                         ThreadPool& pool) {
    return zoom_loss(p, f.sets, f.items, o, nullptr, pool).total;
}

// The central difference of loss() in vals[j] over the steps actually taken in float; vals[j] is
// restored.
inline double central_difference(std::vector<float>& vals, size_t j, float h,
                                 const std::function<double()>& loss) {
    const float x = vals[j];
    vals[j] = x + h;
    const double up = loss();
    const float xu = vals[j];
    vals[j] = x - h;
    const double down = loss();
    const float xd = vals[j];
    vals[j] = x;
    return (up - down) / (static_cast<double>(xu) - xd);
}

} // namespace spanscope::test
