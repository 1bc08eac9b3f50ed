// SEKV's trained zoom-in (issue 8), the model: the hand-written gradients of every parameter
// group against central finite differences of the relaxed losses; the zoom labels by hand; the
// initial parameters, the calibration of θ and the ranking loss. The hard forward against the
// engine's inference: test_zoom_hard_forward.cpp. The fixture: zoom_model_fixture.h.
#include "engine/sekv/router_params.h"
#include "lab/router/zoom_model.h"
#include "zoom_model_fixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace spanscope;
using namespace spanscope::test;

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
namespace {
// zoom_loss's gradient of every parameter group against central differences of its total, at
// 6 elements of each group drawn with `seed`.
void expect_gradients_match_finite_differences(const RouterParams& p0, const Fixture& f,
                                               const ZoomLossOptions& o, ThreadPool& pool,
                                               uint32_t seed) {
    RouterParams grad;
    zoom_loss(p0, f.sets, f.items, o, &grad, pool);
    auto p = p0;
    auto pt = zoom_tensors(p);
    auto gt = zoom_tensors(grad);
    std::mt19937 rng(seed);
    for (size_t t = 0; t < pt.size(); ++t) {
        SCOPED_TRACE(pt[t].name);
        auto& vals = *pt[t].values;
        double gmax = 0;
        for (const float g : *gt[t].values)
            gmax = std::max(gmax, std::fabs(static_cast<double>(g)));
        for (int k = 0; k < 6; ++k) {
            const size_t j = std::uniform_int_distribution<size_t>(0, vals.size() - 1)(rng);
            const double fd =
                central_difference(vals, j, 2e-3f, [&] { return total_loss(p, f, o, pool); });
            const double an = (*gt[t].values)[j];
            EXPECT_NEAR(an, fd, 2e-3 * std::max(1e-3, gmax) + 1e-7)
                << "element " << j << " analytic " << an << " numeric " << fd;
        }
    }
}
} // namespace

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
        double z, d, r, b, k;
        bool share_group = false; // the KV group's union (distill and budget reach every head)
    };
    for (const Mix mix :
         {Mix{"all", 1, 1, 0.3, 0.2, 0.5}, Mix{"zoom", 1, 0, 0, 0, 0},
          Mix{"distill", 0, 1, 0, 0, 0}, Mix{"recon", 0, 0, 1, 0, 0}, Mix{"budget", 0, 0, 0, 1, 0},
          Mix{"ranking", 0, 0, 0, 0, 1}, Mix{"all, KV group union", 1, 1, 0.3, 0.2, 0.5, true},
          Mix{"distill, KV group union", 0, 1, 0, 0, 0, true},
          Mix{"budget, KV group union", 0, 0, 0, 1, 0, true}}) {
        SCOPED_TRACE(mix.name);
        ZoomLossOptions o = base;
        o.share_group = mix.share_group;
        o.w_zoom = mix.z;
        o.w_distill = mix.d;
        o.w_recon = mix.r;
        o.w_budget = mix.b;
        o.w_ranking = mix.k;
        expect_gradients_match_finite_differences(p0, *f, o, pool, 3);
    }
}

// The sketch's term is a constant of the parameters that are trained (the basis is fitted, not
// trained): the gradients still match finite differences with it in the logits, and it changes
// the logits (so the check is not the one above again).
TEST(ZoomModel, GradientsMatchFiniteDifferencesWithASketchBasis) {
    const auto plain = tiny_params(7);
    const auto p0 = with_sketch(plain, 11, 3);
    auto f = make_fixture(p0, {11, 12});
    auto fp = make_fixture(plain, {11, 12});
    const auto& ex = f->items.front();
    const auto zs = zoom_forward(p0, f->sets[0], ex.second, {}).z;
    const auto zp = zoom_forward(plain, fp->sets[0], ex.second, {}).z;
    ASSERT_EQ(zs.size(), zp.size());
    double moved = 0;
    for (size_t s = 0; s < zs.size(); ++s)
        moved = std::max(moved, std::fabs(zs[s] - zp[s]));
    EXPECT_GT(moved, 1e-3);
    // Examples prepared without the basis are refused, not read past their sketches' end.
    EXPECT_THROW(zoom_forward(p0, fp->sets[0], ex.second, {}), std::invalid_argument);
    ThreadPool pool(2);
    ZoomLossOptions o;
    o.relax = true;
    o.temperature = 0.7;
    o.w_recon = 0.3;
    o.w_budget = 0.2;
    o.w_ranking = 0.5;
    expect_gradients_match_finite_differences(p0, *f, o, pool, 5);
}

// The residual form: at W = 0 the trained relevance logits are the training-free ones
// (q·k̄/√d + log|S|, written out here), and W = 0 is a stationary point of every loss (the
// correction is bilinear in W), which is why init_router_params starts W small but not zero.
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
    RouterParams grad;
    zoom_loss(p, f->sets, f->items, o, &grad, pool);
    for (const float x : grad.layers[0].w)
        EXPECT_EQ(x, 0.0f);
    double theta_grad = 0; // the other parameters do move: the check can fail
    for (const float x : grad.layers[0].theta)
        theta_grad += std::fabs(x);
    EXPECT_GT(theta_grad, 0.0);

    // The start: W's entries N(0, (w_scale/√d)²); sample RMS of 64 × 32 × 64 entries.
    RouterLayerParams shape = p.layers[0];
    shape.head_dim = shape.gate.head_dim = 64;
    shape.n_head = 64;
    shape.d_out = 32;
    for (const double w_scale : {0.1, 1.0}) {
        const auto w = init_router_params({shape}, 3, w_scale).layers[0].w;
        double ss = 0;
        for (const float x : w)
            ss += static_cast<double>(x) * x;
        EXPECT_NEAR(std::sqrt(ss / static_cast<double>(w.size())), w_scale / 8.0,
                    0.02 * w_scale / 8.0);
    }
    EXPECT_THROW(init_router_params({shape}, 3, -1.0), std::invalid_argument);
}

// The gates' starting bias: b2 = gate_bias everywhere and nothing else changed (the same draws
// for W, w1 and w2); a bias well above the spread of w2·h keeps every available component from
// the start, as the training-free gate does, and no bias keeps fewer.
TEST(ZoomModel, GateBiasStartsTheGatesOpen) {
    const auto p = tiny_params(5);
    const auto undecided = init_router_params(p.layers, 3, kZoomInitWScale, 0.0);
    auto f = make_fixture(undecided, {31, 32});
    auto kept = [&](const RouterParams& q, int& available) {
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
        const auto open = init_router_params(p.layers, 3, kZoomInitWScale, bias);
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
    EXPECT_THROW(init_router_params(p.layers, 3, kZoomInitWScale, std::nan("")),
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

// The ranking loss's value, computed here from the forward's logits and the recording's span
// masses: KL(P ‖ softmax(z)) over the visible spans, P the masses over their sum; its weight
// changes the total and nothing else. (The gradient is checked in
// GradientsMatchFiniteDifferences.)
TEST(ZoomModel, RankingLossIsTheKlOfTheTeachersSpanMassesToTheSoftmaxOfTheLogits) {
    const auto p = tiny_params(13);
    auto f = make_fixture(p, {61, 62});
    ThreadPool pool(1);
    ZoomLossOptions o;
    double expected = 0;
    int with_target = 0;
    for (const auto& item : f->items) {
        const auto& [si, ex] = item;
        const auto& set = f->sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        const auto z = zoom_forward(p, set, ex, o).z;
        const size_t n_spans = set.record->spans.size();
        const float* m = L.rec->span_mass.data() + (ex.query * kHeads + ex.head) * n_spans;
        double mass = 0, norm = 0;
        for (size_t s = 0; s < z.size(); ++s) {
            mass += m[s];
            norm += std::exp(z[s]);
        }
        double kl = 0;
        for (size_t s = 0; s < z.size() && mass > 0; ++s)
            if (m[s] > 0)
                kl += m[s] / mass * std::log((m[s] / mass) / (std::exp(z[s]) / norm));
        with_target += mass > 0;
        const auto one = zoom_loss(p, f->sets, {item}, o, nullptr, pool);
        EXPECT_NEAR(one.ranking, kl, 1e-9 + 1e-6 * kl);
        expected += kl;
    }
    ASSERT_GT(with_target, 0);
    const auto all = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    EXPECT_NEAR(all.ranking, expected / static_cast<double>(f->items.size()), 1e-9);
    EXPECT_GT(all.ranking, 0.0);
    o.w_ranking = 2.0;
    const auto weighted = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    EXPECT_NEAR(weighted.total, all.total + 2.0 * all.ranking, 1e-9 * std::fabs(all.total) + 1e-12);
    EXPECT_EQ(weighted.distill, all.distill);
    EXPECT_EQ(weighted.expansion_rate, all.expansion_rate);
}
