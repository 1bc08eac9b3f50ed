// SEKV's trained zoom-in (issue 8): the hand-written gradients of every parameter group against
// central finite differences of the relaxed losses; the hard forward against the engine's
// inference (mixed attention with the routed spans and the gated ranks); the zoom labels by
// hand; the optimiser and its checkpoints; training lowering the held-out losses.
#include "fp16.h"
#include "memory_sekv.h"
#include "mixed_attention.h"
#include "router.h"
#include "sekv_spans.h"
#include "zoom_model.h"
#include "zoom_params.h"
#include "zoom_reference.h"
#include "zoom_train.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>

using namespace spanscope;

namespace {

// Four query heads over two KV heads (grouped-query attention, as Gemma 3's global layers), so
// every test also covers which KV head a query head reads.
constexpr int kHeads = 4, kKv = 2, kGroup = kHeads / kKv, kDim = 8, kRank = 4, kDout = 4,
              kHidden = 3;
constexpr double kRopeBase = 10000; // the rank gate reads summary keys rotated back by it

std::vector<float> randn(size_t n, std::mt19937& rng, float sd = 1.0f) {
    std::normal_distribution<float> g(0.0f, sd);
    std::vector<float> x(n);
    for (auto& v : x)
        v = g(rng);
    return x;
}

// A synthetic recording: random rows, fixed spans, queries whose teacher output and span masses
// come from softmax attention written out here in double (not the engine's).
// The spans of most tests: 6–8 rows, more than kRank and at most kDim.
const std::vector<TokenSpan> kSpans = {{3, 9}, {11, 19}, {20, 27}, {30, 37}, {39, 46}};

ZoomRecord synthetic_record(uint32_t seed, int n = 64,
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

ZoomParams tiny_params(uint64_t seed, int n_rank = kRank) {
    ZoomLayerParams shape;
    shape.layer = 3;
    shape.n_head = kHeads;
    shape.head_dim = kDim;
    shape.d_out = kDout;
    shape.gate.n_rank = n_rank;
    shape.gate.head_dim = kDim;
    shape.gate.n_hidden = kHidden;
    // W at full scale, so that its correction to the training-free score matters in every test.
    auto p = init_zoom_params({shape}, seed, 1.0);
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
std::unique_ptr<Fixture> make_fixture(const ZoomParams& p, std::vector<uint32_t> seeds,
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

double total_loss(const ZoomParams& p, const Fixture& f, const ZoomLossOptions& o,
                  ThreadPool& pool) {
    return zoom_loss(p, f.sets, f.items, o, nullptr, pool).total;
}

// The central difference of loss() in vals[j] over the steps actually taken in float; vals[j] is
// restored.
double central_difference(std::vector<float>& vals, size_t j, float h,
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

} // namespace

TEST(ZoomModel, LabelsAreTheFewestSpansCoveringTheMass) {
    // Visible masses 0.5, 0.1, 0.3, 0.05 (the fifth span is not visible): 90 % of 0.95 is
    // 0.855; 0.5 + 0.3 = 0.8 falls short, 0.5 + 0.3 + 0.1 = 0.9 reaches it.
    const float mass[] = {0.5f, 0.1f, 0.3f, 0.05f, 0.7f};
    const std::vector<char> visible{1, 1, 1, 1, 0};
    const auto y = zoom_labels(mass, visible, 0.9);
    EXPECT_EQ(y, (std::vector<char>{1, 1, 1, 0, 0}));
    const auto y50 = zoom_labels(mass, visible, 0.5);
    EXPECT_EQ(y50, (std::vector<char>{1, 0, 0, 0, 0}));
    const float none[] = {0, 0, 0, 0, 0};
    EXPECT_EQ(zoom_labels(none, visible, 0.9), (std::vector<char>(5, 0)));
}

// Every parameter group's gradient against central differences of the relaxed total loss, and
// of each loss component alone.
TEST(ZoomModel, GradientsMatchFiniteDifferences) {
    const auto p0 = tiny_params(7);
    auto f = make_fixture(p0, {11, 12});
    ASSERT_GT(f->items.size(), 6u);
    ThreadPool pool(2);
    ZoomLossOptions base;
    base.relax = true;
    base.temperature = 0.7;
    struct Mix {
        const char* name;
        double z, d, r, b;
    };
    for (const Mix mix :
         {Mix{"all", 1, 1, 0.3, 0.2}, Mix{"zoom", 1, 0, 0, 0}, Mix{"distill", 0, 1, 0, 0},
          Mix{"recon", 0, 0, 1, 0}, Mix{"budget", 0, 0, 0, 1}}) {
        SCOPED_TRACE(mix.name);
        ZoomLossOptions o = base;
        o.w_zoom = mix.z;
        o.w_distill = mix.d;
        o.w_recon = mix.r;
        o.w_budget = mix.b;
        ZoomParams grad;
        zoom_loss(p0, f->sets, f->items, o, &grad, pool);
        auto p = p0;
        auto pt = zoom_tensors(p);
        auto gt = zoom_tensors(grad);
        std::mt19937 rng(3);
        for (size_t t = 0; t < pt.size(); ++t) {
            SCOPED_TRACE(pt[t].name);
            auto& vals = *pt[t].values;
            double gmax = 0;
            for (const float g : *gt[t].values)
                gmax = std::max(gmax, std::fabs(static_cast<double>(g)));
            for (int k = 0; k < 6; ++k) {
                const size_t j = std::uniform_int_distribution<size_t>(0, vals.size() - 1)(rng);
                const double fd =
                    central_difference(vals, j, 2e-3f, [&] { return total_loss(p, *f, o, pool); });
                const double an = (*gt[t].values)[j];
                EXPECT_NEAR(an, fd, 2e-3 * std::max(1e-3, gmax) + 1e-7)
                    << "element " << j << " analytic " << an << " numeric " << fd;
            }
        }
    }
}

// Without relax the forward is inference: mixed attention over the full-resolution rows, the
// summaries of the spans not expanded and the spans expanded at their gated ranks.
TEST(ZoomModel, HardForwardIsTheEngineInference) {
    // The training's hard forward against the engine's inference pieces: the router's
    // relevance (span_relevance with the layer's W) against τ, the spans built by build_span with
    // the trained rank gate (trained_rank_gate, its input rotated back by the RoPE base), and
    // mixed attention over them.
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    ZoomLossOptions o;
    const auto router = trained_router(p.layers[0]);
    const SpanRankOptions gated{kRank, 1.0, trained_rank_gate(p.layers[0]), kRopeBase};
    int expanded = 0, summarised = 0, truncated = 0, groups_seen[kKv] = {};
    for (const auto& [si, ex] : f->items) {
        const auto& set = f->sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        const auto& R = *set.record;
        const int g = ex.head / kGroup;
        ++groups_seen[g];
        const auto fw = zoom_forward(p, set, ex, o);
        const float* q = L.rec->q.data() + (ex.query * kHeads + ex.head) * kDim;
        std::vector<float> fk, fv;
        for (const int64_t pos : fw.full_rows)
            for (int x = 0; x < kDim; ++x) {
                fk.push_back(L.rec->k[static_cast<size_t>((pos * kKv + g) * kDim + x)]);
                fv.push_back(L.rec->v[static_cast<size_t>((pos * kKv + g) * kDim + x)]);
            }
        const size_t nv = fw.z.size();
        std::vector<SekvSpan> built;
        std::vector<SpanView> views;
        built.reserve(nv);
        size_t rows = fw.full_rows.size();
        for (size_t s = 0; s < nv; ++s) {
            const auto& ts = R.spans[s];
            const int64_t row = static_cast<int64_t>(kKv) * kDim;
            built.push_back(build_span(L.rec->k.data() + ts.begin * row,
                                       L.rec->v.data() + ts.begin * row,
                                       R.token_surprisal.data() + ts.begin, ts.size(), kKv, kDim,
                                       static_cast<int32_t>(ts.begin), gated));
            const auto& sp = built.back();
            const double rel = span_relevance(
                q, sp.summary_k.data() + g * kDim, kDim, sp.size,
                router->w.data() + static_cast<size_t>(ex.head) * kDout * kDim, kDout);
            const bool expand = rel > router->tau[static_cast<size_t>(ex.head)];
            EXPECT_EQ(fw.expanded[s] != 0, expand) << "span " << s << " relevance " << rel;
            EXPECT_EQ(fw.rank_k[s], sp.k[static_cast<size_t>(g)].rank) << "span " << s;
            EXPECT_EQ(fw.rank_v[s], sp.v[static_cast<size_t>(g)].rank) << "span " << s;
            truncated += sp.k[static_cast<size_t>(g)].rank < std::min<int64_t>(kRank, sp.size);
            views.push_back({sp.size, sp.summary_k.data() + g * kDim,
                             sp.summary_v.data() + g * kDim, &sp.k[static_cast<size_t>(g)],
                             &sp.v[static_cast<size_t>(g)], expand});
            (expand ? expanded : summarised) += 1;
            rows += static_cast<size_t>(ts.size());
        }
        EXPECT_EQ(rows, static_cast<size_t>(R.query_pos[static_cast<size_t>(ex.query)] + 1));
        std::vector<float> out(kDim);
        mixed_attention(q, kDim, L.scale, fk.data(), fv.data(),
                        static_cast<int64_t>(fw.full_rows.size()), views, out.data());
        for (int x = 0; x < kDim; ++x)
            EXPECT_NEAR(fw.out[static_cast<size_t>(x)], out[static_cast<size_t>(x)], 2e-5);
    }
    // The comparison covered both views, a gated (truncated) rank and both KV heads.
    EXPECT_GT(expanded, 0);
    EXPECT_GT(summarised, 0);
    EXPECT_GT(truncated, 0);
    for (const int n : groups_seen)
        EXPECT_GT(n, 0);
}

// The budget loss is the penalty of what the hard forward did, summed by hand from each
// example's decisions: expanded rows over visible rows, kept over available components. Its
// straight-through gradient (dL/ds_S := dL/de_S, dL/dm_r := dL/dh_r) is the gradient of the soft
// surrogate's value budget_soft, since the penalty is linear in the decisions.
TEST(ZoomModel, HardBudgetIsWhatTheHardDecisionsSpend) {
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    ZoomLossOptions o;
    o.expansion_weight = 0.7;
    o.rank_weight = 0.3;
    ThreadPool pool(1);
    const auto l = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    double expected = 0;
    int expanded = 0, summarised = 0, truncated = 0;
    for (const auto& [si, ex] : f->items) {
        const auto& set = f->sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        const int g = ex.head / kGroup;
        const auto fw = zoom_forward(p, set, ex, o);
        double rows = 0, rows_expanded = 0, kept = 0, avail = 0;
        for (size_t s = 0; s < fw.z.size(); ++s) {
            const auto& sp = L.spans[s];
            rows += static_cast<double>(sp.size);
            rows_expanded += fw.expanded[s] ? static_cast<double>(sp.size) : 0.0;
            (fw.expanded[s] ? expanded : summarised) += 1;
            for (const auto& [fs, rank] : {std::pair{&sp.k, fw.rank_k[s]}, {&sp.v, fw.rank_v[s]}}) {
                const int n = std::min((*fs)[static_cast<size_t>(g)].rank, p.layers[0].gate.n_rank);
                avail += n;
                kept += std::min(rank, n);
                truncated += rank < n;
            }
        }
        expected += 0.7 * rows_expanded / rows + 0.3 * kept / avail;
    }
    expected /= static_cast<double>(f->items.size());
    EXPECT_GT(expanded, 0);
    EXPECT_GT(summarised, 0) << "decisions of both kinds, so the row share is not 0 or 1";
    EXPECT_GT(truncated, 0) << "some factors cut below their available rank";
    EXPECT_NEAR(l.budget, expected, 1e-12);
    EXPECT_GT(std::fabs(l.budget - l.budget_soft), 0.01) << "the surrogate is another value";

    // The gradient of the budget alone, straight through the hard decisions, is the gradient of
    // the surrogate's value: central differences of budget_soft in the same hard forward (a
    // smooth function of every parameter there: σ((z − θ)/T) and m).
    o.w_zoom = o.w_distill = o.w_recon = 0;
    o.w_budget = 1;
    ZoomParams grad;
    zoom_loss(p, f->sets, f->items, o, &grad, pool);
    auto q = p;
    auto qt = zoom_tensors(q);
    auto gt = zoom_tensors(grad);
    std::mt19937 rng(5);
    int checked = 0;
    for (size_t t = 0; t < qt.size(); ++t) {
        SCOPED_TRACE(qt[t].name);
        auto& vals = *qt[t].values;
        double gmax = 0; // the tolerance is relative to the tensor's largest gradient
        for (const float g : *gt[t].values)
            gmax = std::max(gmax, std::fabs(static_cast<double>(g)));
        for (int k = 0; k < 4; ++k) {
            const size_t j = std::uniform_int_distribution<size_t>(0, vals.size() - 1)(rng);
            const double fd = central_difference(vals, j, 1e-3f, [&] {
                return zoom_loss(q, f->sets, f->items, o, nullptr, pool).budget_soft;
            });
            const double g = (*gt[t].values)[j];
            EXPECT_NEAR(g, fd, 2e-3 * std::max(1e-3, gmax) + 1e-7) << "entry " << j;
            checked += fd != 0.0;
        }
    }
    EXPECT_GT(checked, 6) << "differences that are not all zero";
}

namespace {

// SekvMemory with the parameters p (sekv_layer_options: trained router per query head, trained
// rank gate, its max rank) holding each query's visible spans at two resolutions, against the
// training's hard forward of every head; counts the expanded and summarised (span, head) pairs.
void expect_sekv_memory_is_the_hard_forward(const ZoomParams& p, const Fixture& fx, int& expanded,
                                            int& summarised) {
    const AttentionShape shape{kHeads, kKv, kDim, 0.5f, 0};
    SekvOptions base;
    base.zoom = std::make_shared<ZoomParams>(p);
    auto options = sekv_layer_options(base, 3, shape);
    // As the training: each query head decides alone, with its learned threshold.
    options.router.learned_tau = true;
    options.router.share_group = false;
    ThreadPool pool(1);
    ZoomLossOptions o;
    for (const auto& set : fx.sets) {
        const auto& R = *set.record;
        const auto& L = set.layers[0];
        for (int64_t i = 0; i < R.n_queries(); ++i) {
            if (!R.visible(i, 0))
                continue;
            const int32_t qpos = R.query_pos[static_cast<size_t>(i)];
            Segmentation seg;
            for (size_t s = 0; s < R.spans.size() && R.visible(i, s); ++s)
                seg.spans.push_back(R.spans[s]);
            std::vector<int32_t> pos(static_cast<size_t>(qpos) + 1);
            for (int32_t j = 0; j <= qpos; ++j)
                pos[static_cast<size_t>(j)] = j;
            SekvMemory mem(shape, qpos + 1, kRopeBase, options);
            mem.store(L.rec->k.data(), L.rec->v.data(), pos.data(), qpos + 1);
            mem.seal({&seg, R.token_surprisal.data(), 0, qpos + 1});
            std::vector<float> out(static_cast<size_t>(kHeads * kDim));
            mem.attend(L.rec->q.data() + i * kHeads * kDim, &qpos, 1, out.data(), pool);
            for (int h = 0; h < kHeads; ++h) {
                const auto fw = zoom_forward(p, set, {0, i, h}, o);
                for (int x = 0; x < kDim; ++x)
                    EXPECT_NEAR(out[static_cast<size_t>(h * kDim + x)],
                                fw.out[static_cast<size_t>(x)], 1e-4)
                        << "query " << i << " head " << h;
                for (const char e : fw.expanded)
                    (e ? expanded : summarised) += 1;
            }
        }
    }
}

} // namespace

TEST(ZoomModel, HardForwardIsSekvMemoryWithTheTrainedParameters) {
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    int expanded = 0, summarised = 0;
    expect_sekv_memory_is_the_hard_forward(p, *f, expanded, summarised);
    EXPECT_GT(expanded, 0);
    EXPECT_GT(summarised, 0);
}

// The components a span's factors have are min(gate outputs, rows, key dimension), counted by
// training (run_gate: the factors' rank) and by inference (TrainedRankGate: the spectrum's
// length and the key's dimension) in two places. Spans shorter than the gate's outputs (3 and
// 5 rows against 16) and longer than the key's dimension (12 and 14 rows against 8) make the
// three bounds differ; a gate counting outputs past them keeps another rank, and the outputs
// differ.
TEST(ZoomModel, HardForwardIsSekvMemoryWhenSpansHaveFewerComponentsThanTheGate) {
    constexpr int kWideRank = 16;
    const std::vector<TokenSpan> spans = {{3, 6}, {8, 20}, {22, 27}, {29, 43}};
    const auto p = tiny_params(9, kWideRank);
    auto f = make_fixture(p, {21, 22, 23}, spans, kWideRank);
    int expanded = 0, summarised = 0;
    expect_sekv_memory_is_the_hard_forward(p, *f, expanded, summarised);
    EXPECT_GT(expanded, 0);
    EXPECT_GT(summarised, 0);
    // The gate keeps fewer components than spans have, short and long ones both, so the count
    // decides the output.
    int truncated_short = 0, truncated_long = 0;
    for (const auto& set : f->sets)
        for (int64_t i = 0; i < set.record->n_queries(); ++i) {
            if (!set.record->visible(i, 0))
                continue;
            for (int h = 0; h < kHeads; ++h) {
                const auto fw = zoom_forward(p, set, {0, i, h}, ZoomLossOptions{});
                for (size_t s = 0; s < fw.rank_k.size(); ++s) {
                    const int rows = static_cast<int>(spans[s].end - spans[s].begin);
                    const int available = std::min({kWideRank, rows, kDim});
                    for (const int r : {fw.rank_k[s], fw.rank_v[s]})
                        if (r < available)
                            ++(rows < kDim ? truncated_short : truncated_long);
                }
            }
        }
    EXPECT_GT(truncated_short, 0);
    EXPECT_GT(truncated_long, 0);
}

// The residual form: at W = 0 the trained relevance logits are the training-free ones
// (q·k̄/√d + log|S|, written out here), and W = 0 is a stationary point of every loss (the
// correction is bilinear in W), which is why init_zoom_params starts W small but not zero.
TEST(ZoomModel, ZeroProjectionIsTheTrainingFreeRouterAndAStationaryPoint) {
    auto p = tiny_params(5);
    for (auto& x : p.layers[0].w)
        x = 0.0f;
    auto f = make_fixture(p, {21, 22});
    int compared = 0;
    for (const auto& [si, ex] : f->items) {
        const auto& set = f->sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        const int g = ex.head / kGroup;
        const float* q = L.rec->q.data() + (ex.query * kHeads + ex.head) * kDim;
        const auto fw = zoom_forward(p, set, ex, ZoomLossOptions{});
        for (size_t s = 0; s < fw.z.size(); ++s) {
            const auto& sp = L.spans[s];
            double qk = 0;
            for (int j = 0; j < kDim; ++j)
                qk += static_cast<double>(q[j]) * sp.summary_k[static_cast<size_t>(g * kDim + j)];
            EXPECT_NEAR(fw.z[s], qk / std::sqrt(kDim) + std::log(static_cast<double>(sp.size)),
                        1e-12);
            ++compared;
        }
    }
    EXPECT_GT(compared, 20);
    ThreadPool pool(2);
    ZoomLossOptions o;
    o.relax = true;
    ZoomParams grad;
    zoom_loss(p, f->sets, f->items, o, &grad, pool);
    for (const float x : grad.layers[0].w)
        EXPECT_EQ(x, 0.0f);
    double theta_grad = 0; // the other parameters do move: the check can fail
    for (const float x : grad.layers[0].theta)
        theta_grad += std::fabs(x);
    EXPECT_GT(theta_grad, 0.0);

    // The start: W's entries N(0, (w_scale/√d)²); sample RMS of 64 × 32 × 64 entries.
    ZoomLayerParams shape = p.layers[0];
    shape.head_dim = shape.gate.head_dim = 64;
    shape.n_head = 64;
    shape.d_out = 32;
    for (const double w_scale : {0.1, 1.0}) {
        const auto w = init_zoom_params({shape}, 3, w_scale).layers[0].w;
        double ss = 0;
        for (const float x : w)
            ss += static_cast<double>(x) * x;
        EXPECT_NEAR(std::sqrt(ss / static_cast<double>(w.size())), w_scale / 8.0,
                    0.02 * w_scale / 8.0);
    }
    EXPECT_THROW(init_zoom_params({shape}, 3, -1.0), std::invalid_argument);
}

// The gates' starting bias: b2 = gate_bias everywhere and nothing else changed (the same draws
// for W, w1 and w2); a bias well above the spread of w2·h keeps every available component from
// the start, as the training-free gate does, and no bias keeps fewer.
TEST(ZoomModel, GateBiasStartsTheGatesOpen) {
    const auto p = tiny_params(5);
    const auto undecided = init_zoom_params(p.layers, 3, kZoomInitWScale, 0.0);
    auto f = make_fixture(undecided, {31, 32});
    auto kept = [&](const ZoomParams& q, int& available) {
        int n = 0;
        available = 0;
        for (const auto& set : f->sets)
            for (int64_t i = 0; i < set.record->n_queries(); ++i) {
                if (!set.record->visible(i, 0))
                    continue;
                const auto fw = zoom_forward(q, set, {0, i, 0}, ZoomLossOptions{});
                for (size_t s = 0; s < fw.rank_k.size(); ++s) {
                    n += fw.rank_k[s] + fw.rank_v[s];
                    available += 2 * kRank; // spans of 6–8 rows, kRank < rows <= kDim
                }
            }
        return n;
    };
    int available = 0;
    const int at_zero = kept(undecided, available);
    for (const double bias : {1.0, 20.0}) {
        const auto open = init_zoom_params(p.layers, 3, kZoomInitWScale, bias);
        for (const float b : open.layers[0].gate.b2)
            EXPECT_EQ(b, static_cast<float>(bias));
        EXPECT_EQ(open.layers[0].w, undecided.layers[0].w);
        EXPECT_EQ(open.layers[0].gate.w2, undecided.layers[0].gate.w2);
        const int n = kept(open, available);
        EXPECT_GE(n, at_zero) << "bias " << bias;
        if (bias > 10) {
            EXPECT_EQ(n, available);
        }
    }
    EXPECT_LT(at_zero, available); // undecided gates drop some components: the check can fail
    EXPECT_THROW(init_zoom_params(p.layers, 3, kZoomInitWScale, std::nan("")),
                 std::invalid_argument);
}

// calibrate_theta: each head's θ expands round(rate · n) of its n visible spans (z > θ, the
// forward's rule), not one more because θ is stored in float (random scores have no ties).
TEST(ZoomModel, CalibratedThetaExpandsThatShareOfEachHeadsSpans) {
    auto p = tiny_params(5);
    auto f = make_fixture(p, {31, 32, 33});
    for (const double rate : {0.0, 0.1, 0.25, 0.5, 0.6, 0.9, 1.0}) {
        calibrate_theta(p, f->sets, f->items, rate);
        std::vector<int> n(kHeads, 0), expanded(kHeads, 0);
        for (const auto& item : f->items) {
            const auto& [set, ex] = item;
            const auto fw = zoom_forward(p, f->sets[static_cast<size_t>(set)], ex, {});
            n[static_cast<size_t>(ex.head)] += static_cast<int>(fw.expanded.size());
            for (const char e : fw.expanded)
                expanded[static_cast<size_t>(ex.head)] += e;
        }
        for (int h = 0; h < kHeads; ++h)
            EXPECT_EQ(expanded[static_cast<size_t>(h)],
                      std::llround(rate * n[static_cast<size_t>(h)]))
                << "rate " << rate << " head " << h << " of " << n[static_cast<size_t>(h)];
    }
}

TEST(ZoomModel, TrainingFreeReferenceAtItsExtremes) {
    // Every span expanded at full rank: the reference is the trained forward with every span
    // expanded and the rank gate ignored (full_rank), up to rounding; none expanded: no recall.
    auto p = tiny_params(5);
    p.layers[0].theta.assign(kHeads, -1e3f);
    auto f = make_fixture(p, {31, 32});
    ThreadPool pool(2);
    ZoomLossOptions o;
    o.full_rank = true;
    const auto all = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    ASSERT_DOUBLE_EQ(all.expansion_rate, 1.0);
    ZoomReferenceOptions ro;
    ro.expand_rate = 1.0;
    const auto ref = router_reference(f->sets, f->items, ro, pool);
    EXPECT_EQ(ref.examples, static_cast<int64_t>(f->items.size()));
    EXPECT_DOUBLE_EQ(ref.expansion_rate, 1.0);
    EXPECT_DOUBLE_EQ(ref.label_recall, 1.0);
    EXPECT_NEAR(ref.distill, all.distill, 1e-4 * all.distill); // float against double sums
    ro.expand_rate = 0.0;
    const auto none = router_reference(f->sets, f->items, ro, pool);
    EXPECT_EQ(none.expansion_rate, 0.0);
    EXPECT_EQ(none.label_recall, 0.0);
    EXPECT_GT(none.distill, ref.distill);
    ro.expand_rate = 1.5;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
}

// The reference with a trained W, each head alone, decides as the training's forward after
// calibrate_theta at the same rate (two implementations of one rule: zoom_model.cpp's logits
// against θ, zoom_reference.cpp's relevances against their quantile); with the KV group's union
// it expands at least as much and recalls at least as many labels; a W of zeros is the
// training-free router.
TEST(ZoomModel, RouterReferenceWithTheTrainedWIsTheTrainingsForward) {
    auto p = tiny_params(7);
    auto f = make_fixture(p, {41, 42, 43});
    ThreadPool pool(2);
    ZoomLossOptions lo;
    lo.full_rank = true; // the reference reconstructs every factor at full rank
    for (const double rate : {0.25, 0.5}) {
        auto at = p;
        calibrate_theta(at, f->sets, f->items, rate);
        const auto fw = zoom_loss(at, f->sets, f->items, lo, nullptr, pool);
        ZoomReferenceOptions ro;
        ro.expand_rate = rate;
        ro.share_group = false;
        ro.trained = &p;
        const auto ref = router_reference(f->sets, f->items, ro, pool);
        EXPECT_DOUBLE_EQ(ref.expansion_rate, fw.expansion_rate) << "rate " << rate;
        EXPECT_DOUBLE_EQ(ref.label_recall, fw.label_recall) << "rate " << rate;
        EXPECT_NEAR(ref.distill, fw.distill, 1e-4 * fw.distill) << "rate " << rate;
        ro.share_group = true;
        const auto group = router_reference(f->sets, f->items, ro, pool);
        EXPECT_GT(group.expansion_rate, ref.expansion_rate) << "rate " << rate;
        EXPECT_GE(group.label_recall, ref.label_recall) << "rate " << rate;
        // The training-free router differs from this W's choices, and a W of zeros is it.
        ro.trained = nullptr;
        const auto free = router_reference(f->sets, f->items, ro, pool);
        EXPECT_NE(free.distill, group.distill) << "rate " << rate;
        auto zero = p;
        std::fill(zero.layers[0].w.begin(), zero.layers[0].w.end(), 0.0f);
        ro.trained = &zero;
        const auto at_zero = router_reference(f->sets, f->items, ro, pool);
        EXPECT_EQ(at_zero.expansion_rate, free.expansion_rate) << "rate " << rate;
        EXPECT_EQ(at_zero.distill, free.distill) << "rate " << rate;
    }
    // A parameter file without the examples' layer is refused.
    auto other = p;
    other.layers[0].layer = 5;
    ZoomReferenceOptions ro;
    ro.trained = &other;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
}

TEST(ZoomModel, ExpandingEverySpanAtFullRankIsFullAttention) {
    auto p = tiny_params(5);
    p.layers[0].theta.assign(kHeads, -1e3f);
    for (auto& b : p.layers[0].gate.b2)
        b = 50.0f; // every gate open
    auto f = make_fixture(p, {31});
    ZoomLossOptions o;
    ThreadPool pool(1);
    const auto l = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    EXPECT_DOUBLE_EQ(l.expansion_rate, 1.0);
    // Rank 4 of 8-dimensional rows loses a little of each span; the teacher is exact attention.
    EXPECT_LT(l.distill, 0.02);
    EXPECT_NEAR(l.mean_rank, kRank, 1e-9);
    // What the hard rank loses: the components past rank 4 of each span's spectrum, by hand.
    double lost = 0;
    int64_t n = 0;
    for (const auto& [si, ex] : f->items) {
        const auto& L = f->sets[static_cast<size_t>(si)].layers[0];
        const int g = ex.head / kGroup;
        double per = 0;
        int64_t nv = 0;
        for (size_t s = 0; s < L.spans.size(); ++s) {
            if (!f->sets[static_cast<size_t>(si)].record->visible(ex.query, s))
                continue;
            ++nv;
            for (const auto* fs : {&L.spans[s].k, &L.spans[s].v}) {
                const auto& sig = (*fs)[static_cast<size_t>(g)].sigma2;
                double total = 0, tail = 0;
                for (size_t r = 0; r < sig.size(); ++r) {
                    total += sig[r];
                    tail += static_cast<int>(r) >= kRank ? sig[r] : 0.0;
                }
                per += 0.5 * tail / total;
            }
        }
        lost += per / static_cast<double>(nv);
        ++n;
    }
    EXPECT_NEAR(l.recon_hard, lost / static_cast<double>(n), 1e-9);
    EXPECT_GT(l.recon_hard, 0.0);
}

TEST(ZoomTrain, LearningRateWarmsUpAndDecays) {
    ZoomTrainOptions o;
    o.steps = 110;
    o.warmup = 10;
    o.lr = 1.0;
    o.min_lr_ratio = 0.1;
    EXPECT_NEAR(zoom_learning_rate(o, 0), 0.1, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 9), 1.0, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 10), 1.0, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 60), 0.55, 1e-12); // half way down the cosine
    EXPECT_NEAR(zoom_learning_rate(o, 110), 0.1, 1e-12);
}

TEST(ZoomTrain, AdamWStepByHand) {
    ZoomTrainOptions o;
    o.clip = 0;
    o.weight_decay = 0.5;
    auto p = tiny_params(1);
    auto s = start_training(p);
    ZoomParams g = p;
    for (auto& t : zoom_tensors(g))
        std::fill(t.values->begin(), t.values->end(), 0.0f);
    g.layers[0].w[0] = 2.0f;      // decayed matrix
    g.layers[0].theta[1] = -3.0f; // not decayed
    const float w0 = p.layers[0].w[0], w1 = p.layers[0].w[1], th1 = p.layers[0].theta[1];
    adamw_update(s, g, 0.01, o);
    // First step: m̂ = g, v̂ = g², so the step is lr · g / (|g| + eps) = ±lr.
    EXPECT_NEAR(s.params.layers[0].w[0], w0 - 0.01 * 0.5 * w0 - 0.01, 1e-6);
    EXPECT_NEAR(s.params.layers[0].w[1], w1 - 0.01 * 0.5 * w1, 1e-6);
    EXPECT_NEAR(s.params.layers[0].theta[1], th1 + 0.01, 1e-6);
    // Clipping scales the whole gradient: a norm of 10 clipped to 1.
    o.clip = 1.0;
    ZoomParams g2 = g;
    for (auto& t : zoom_tensors(g2))
        std::fill(t.values->begin(), t.values->end(), 0.0f);
    g2.layers[0].w[0] = 6.0f;
    g2.layers[0].w[1] = 8.0f;
    EXPECT_NEAR(adamw_update(s, g2, 0.0, o), 10.0, 1e-9);
    // ... and the moments take the clipped gradient (0.6, 0.8), not the raw one: from a fresh
    // state, m = (1 − β1) g and v = (1 − β2) g².
    auto fresh = start_training(p);
    EXPECT_NEAR(adamw_update(fresh, g2, 0.0, o), 10.0, 1e-9);
    auto names = zoom_tensors(fresh.params);
    size_t wi = names.size();
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i].values == &fresh.params.layers[0].w)
            wi = i;
    ASSERT_LT(wi, names.size());
    EXPECT_NEAR(fresh.m[wi][0], (1 - o.beta1) * 0.6, 1e-7);
    EXPECT_NEAR(fresh.m[wi][1], (1 - o.beta1) * 0.8, 1e-7);
    EXPECT_NEAR(fresh.v[wi][0], (1 - o.beta2) * 0.36, 1e-9);
    EXPECT_NEAR(fresh.v[wi][1], (1 - o.beta2) * 0.64, 1e-9);
}

TEST(ZoomTrain, MinibatchesDependOnSeedAndStepOnly) {
    ZoomTrainOptions o;
    o.batch = 16;
    const auto a = zoom_minibatch(o, 5, 100);
    EXPECT_EQ(a, zoom_minibatch(o, 5, 100));
    EXPECT_NE(a, zoom_minibatch(o, 6, 100));
    o.seed = 2;
    EXPECT_NE(a, zoom_minibatch(o, 5, 100));
    for (const auto i : a)
        EXPECT_TRUE(i >= 0 && i < 100);
}

// Training lowers every loss component on held-out recordings; a run stopped at a checkpoint
// and resumed ends with the same parameters as one that ran through.
TEST(ZoomTrain, LowersHeldOutLossesAndResumesExactly) {
    auto p = tiny_params(3);
    auto train = make_fixture(p, {41, 42, 43, 44, 45, 46});
    auto held = make_fixture(p, {51, 52});
    ThreadPool pool(2);
    ZoomTrainOptions o;
    o.steps = 120;
    o.batch = 24;
    o.warmup = 10;
    o.lr = 1e-2;
    o.eval_every = 40;
    o.checkpoint_every = 40;
    o.loss.w_recon = 1.0;
    o.loss.w_budget = 0.05;
    calibrate_theta(p, train->sets, train->items, 0.5);
    const auto before = zoom_loss(p, held->sets, held->items, o.loss, nullptr, pool);
    auto state = start_training(p);
    const auto ckpt =
        (std::filesystem::temp_directory_path() / "spanscope-zoom-ckpt-test.gguf").string();
    std::filesystem::remove(ckpt);
    ZoomLoss last;
    train_zoom(state, train->sets, train->items, held->sets, held->items, o, pool, ckpt, "cfg",
               [&](const ZoomProgress& pr) {
                   if (pr.evaluated)
                       last = pr.held_out;
               });
    EXPECT_EQ(state.step, 120);
    EXPECT_LT(last.zoom, before.zoom);
    EXPECT_LT(last.distill, before.distill);
    EXPECT_LT(last.recon, before.recon);
    EXPECT_LT(last.total, before.total);

    // Interrupted after step 50 (the last checkpoint: step 40), resumed to 120.
    struct Stop {};
    std::filesystem::remove(ckpt);
    auto s1 = start_training(p);
    EXPECT_THROW(train_zoom(s1, train->sets, train->items, held->sets, held->items, o, pool, ckpt,
                            "cfg",
                            [](const ZoomProgress& pr) {
                                if (pr.step == 50)
                                    throw Stop{};
                            }),
                 Stop);
    auto resumed = load_zoom_checkpoint(ckpt, "cfg", p);
    EXPECT_EQ(resumed.step, 40);
    train_zoom(resumed, train->sets, train->items, held->sets, held->items, o, pool, "", "cfg",
               nullptr);
    auto a = zoom_tensors(resumed.params);
    auto b = zoom_tensors(state.params);
    for (size_t t = 0; t < a.size(); ++t)
        EXPECT_EQ(*a[t].values, *b[t].values) << a[t].name;
    EXPECT_THROW(load_zoom_checkpoint(ckpt, "other", p), std::runtime_error);
    auto bigger = tiny_params(3);
    bigger.layers[0].gate.n_hidden = kHidden + 1;
    bigger = init_zoom_params(bigger.layers, 3);
    EXPECT_THROW(load_zoom_checkpoint(ckpt, "cfg", bigger), std::runtime_error);
    std::filesystem::remove(ckpt);
}
