// SEKV's trained zoom-in (issue 8): without relax, the training's forward is the engine's
// inference. Against the engine's pieces (the router's relevance, build_span, mixed attention)
// and against SekvMemory holding the same spans with the same parameters (alone, with a sketch
// basis, with the KV group's union, with spans of fewer components than the gate), and the hard
// budget is what the hard decisions spend. The fixture: zoom_model_fixture.h.
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/mixed_attention.h"
#include "engine/sekv/router.h"
#include "engine/sekv/router_params.h"
#include "engine/sekv/sekv_spans.h"
#include "engine/sekv/span_sketch.h"
#include "lab/router/zoom_model.h"
#include "zoom_model_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

using namespace spanscope;
using namespace spanscope::test;

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

namespace {

struct BudgetTally {
    double budget = 0; ///< mean over the examples
    int expanded = 0, summarised = 0, truncated = 0;
    int widened = 0; ///< spans a head leaves that its group expands
};
// The loss options the tally's weights stand for.
ZoomLossOptions budget_options() {
    ZoomLossOptions o;
    o.expansion_weight = 0.7;
    o.rank_weight = 0.3;
    return o;
}
// The hard budget 0.7 · expanded rows / visible rows + 0.3 · kept / available components, summed
// by hand from each example's own hard forward (each head alone); with `union_of_group`, a span
// counts as expanded when any head of the example's KV group expands it in its own forward.
BudgetTally tally_hard_budget(const RouterParams& p, const Fixture& f, bool union_of_group) {
    ZoomLossOptions alone;
    BudgetTally t;
    for (const auto& [si, ex] : f.items) {
        const auto& set = f.sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        const int g = ex.head / kGroup;
        const auto own = zoom_forward(p, set, ex, alone);
        std::vector<char> decided(own.expanded.begin(), own.expanded.end());
        for (int h = g * kGroup; union_of_group && h < (g + 1) * kGroup; ++h) {
            const auto fw = zoom_forward(p, set, ZoomExample{ex.layer, ex.query, h}, alone);
            for (size_t s = 0; s < decided.size(); ++s)
                decided[s] = decided[s] || fw.expanded[s];
        }
        double rows = 0, rows_expanded = 0, kept = 0, avail = 0;
        for (size_t s = 0; s < decided.size(); ++s) {
            const auto& sp = L.spans[s];
            rows += static_cast<double>(sp.size);
            rows_expanded += decided[s] ? static_cast<double>(sp.size) : 0.0;
            (decided[s] ? t.expanded : t.summarised) += 1;
            t.widened += decided[s] && !own.expanded[s];
            for (const auto& [fs, rank] :
                 {std::pair{&sp.k, own.rank_k[s]}, {&sp.v, own.rank_v[s]}}) {
                const int n = std::min((*fs)[static_cast<size_t>(g)].rank, p.layers[0].gate.n_rank);
                avail += n;
                kept += std::min(rank, n);
                t.truncated += rank < n;
            }
        }
        t.budget += 0.7 * rows_expanded / rows + 0.3 * kept / avail;
    }
    t.budget /= static_cast<double>(f.items.size());
    return t;
}

} // namespace

// The budget loss is the penalty of what the hard forward did, summed by hand from each
// example's decisions: expanded rows over visible rows, kept over available components. Its
// straight-through gradient (dL/ds_S := dL/de_S, dL/dm_r := dL/dh_r) is the gradient of the soft
// surrogate's value budget_soft, since the penalty is linear in the decisions.
TEST(ZoomModel, HardBudgetIsWhatTheHardDecisionsSpend) {
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    auto o = budget_options();
    ThreadPool pool(1);
    const auto l = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    const auto t = tally_hard_budget(p, *f, false);
    EXPECT_GT(t.expanded, 0);
    EXPECT_GT(t.summarised, 0) << "decisions of both kinds, so the row share is not 0 or 1";
    EXPECT_GT(t.truncated, 0) << "some factors cut below their available rank";
    EXPECT_NEAR(l.budget, t.budget, 1e-12);
    EXPECT_GT(std::fabs(l.budget - l.budget_soft), 0.01) << "the surrogate is another value";

    // The gradient of the budget alone, straight through the hard decisions, is the gradient of
    // the surrogate's value: central differences of budget_soft in the same hard forward (a
    // smooth function of every parameter there: σ((z − θ)/T) and m).
    o.w_zoom = o.w_distill = o.w_recon = 0;
    o.w_budget = 1;
    RouterParams grad;
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

TEST(ZoomModel, HardBudgetWithTheGroupsUnionIsWhatTheUnionSpends) {
    // With share_group the budget counts the rows of every span any head of the query head's KV
    // group expands: here the union is taken from each head's own forward (share_group off).
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    const auto alone = budget_options();
    auto united = alone;
    united.share_group = true;
    ThreadPool pool(1);
    const auto l = zoom_loss(p, f->sets, f->items, united, nullptr, pool);
    const auto l_alone = zoom_loss(p, f->sets, f->items, alone, nullptr, pool);
    const auto t = tally_hard_budget(p, *f, true);
    EXPECT_GT(t.widened, 0) << "heads of a group that decide differently";
    EXPECT_NEAR(l.budget, t.budget, 1e-12);
    EXPECT_GT(l.budget, l_alone.budget);
    EXPECT_GT(l.expansion_rate, l_alone.expansion_rate);
}

namespace {

// SekvMemory with the parameters p (sekv_layer_options: trained router per query head, trained
// rank gate, its max rank) holding each query's visible spans at two resolutions, against the
// training's hard forward of every head; counts the expanded and summarised (span, head) pairs.
void expect_sekv_memory_is_the_hard_forward(const RouterParams& p, const Fixture& fx, int& expanded,
                                            int& summarised, bool share_group = false,
                                            int* united = nullptr) {
    const AttentionShape shape{kHeads, kKv, kDim, 0.5f, 0};
    SekvOptions base;
    base.router_params = std::make_shared<RouterParams>(p);
    auto options = sekv_layer_options(base, 3, shape);
    // As the training: each query head decides with its learned threshold, alone or (with
    // share_group) expanding what any head of its KV group asks for.
    options.router.learned_tau = true;
    options.router.share_group = share_group;
    ThreadPool pool(1);
    ZoomLossOptions o;
    o.share_group = share_group;
    ZoomLossOptions alone;
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
                if (united) { // spans expanded for this head only because another asked
                    const auto own = zoom_forward(p, set, {0, i, h}, alone).expanded;
                    for (size_t s = 0; s < own.size(); ++s)
                        *united += fw.expanded[s] && !own[s];
                }
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

// With a sketch basis, training's forward routes as SekvMemory does with the file's router: both
// compute each span's sketch (prepare_examples, SekvMemory::hold_spans) and add its term.
TEST(ZoomModel, HardForwardWithASketchBasisIsSekvMemory) {
    const auto plain = tiny_params(9);
    const auto p = with_sketch(plain, 21, 3, 4.0f);
    auto f = make_fixture(p, {21, 22});
    int expanded = 0, summarised = 0;
    expect_sekv_memory_is_the_hard_forward(p, *f, expanded, summarised);
    EXPECT_GT(expanded, 0);
    EXPECT_GT(summarised, 0);
    // The sketch decides: a good share of the decisions differ from the plain parameters'.
    auto fp = make_fixture(plain, {21, 22});
    int differ = 0, total = 0;
    for (const auto& [si, ex] : f->items) {
        const auto a = zoom_forward(p, f->sets[static_cast<size_t>(si)], ex, {}).expanded;
        const auto b = zoom_forward(plain, fp->sets[static_cast<size_t>(si)], ex, {}).expanded;
        for (size_t s = 0; s < a.size(); ++s)
            differ += a[s] != b[s];
        total += static_cast<int>(a.size());
    }
    EXPECT_GE(differ * 10, total) << differ << " of " << total;
}

// With share_group, training's forward expands what any head of the KV group asks for, as
// SekvMemory does with SekvRouterOptions::share_group.
TEST(ZoomModel, HardForwardWithTheGroupsUnionIsSekvMemoryWithSharedGroups) {
    const auto p = tiny_params(9);
    auto f = make_fixture(p, {21, 22});
    int expanded = 0, summarised = 0, united = 0;
    expect_sekv_memory_is_the_hard_forward(p, *f, expanded, summarised, true, &united);
    EXPECT_GT(summarised, 0);
    EXPECT_GT(united, 0) << "no span was expanded for a head that did not ask for it";
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
