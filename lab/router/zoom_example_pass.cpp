#include "lab/router/zoom_example_pass.h"

#include "engine/sekv/router.h"
#include "engine/sekv/span_factors.h"
#include "engine/sekv/span_sketch.h"
#include "lab/router/zoom_gate_train.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

namespace {

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

double dot(const float* a, const float* b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
        s += static_cast<double>(a[i]) * b[i];
    return s;
}

} // namespace

ZoomExampleView zoom_example_view(const RouterParams& params, const ZoomExampleSet& set,
                                  const ZoomExample& ex) {
    if (ex.layer < 0 || ex.layer >= static_cast<int>(set.layers.size()))
        throw std::invalid_argument("zoom example: no layer " + std::to_string(ex.layer));
    const auto& L = set.layers[static_cast<size_t>(ex.layer)];
    const auto& R = *set.record;
    if (ex.query < 0 || ex.query >= R.n_queries() || ex.head < 0 || ex.head >= L.n_head)
        throw std::invalid_argument("zoom example: query or head out of range");
    const auto* P = params.find(L.layer);
    if (!P || P->n_head != L.n_head || P->head_dim != L.head_dim)
        throw std::invalid_argument("zoom parameters do not cover layer " +
                                    std::to_string(L.layer));
    ZoomExampleView v{};
    v.L = &L;
    v.P = P;
    const int64_t d = L.head_dim, H = L.n_head;
    const size_t qi = static_cast<size_t>((ex.query * H + ex.head) * d);
    v.q = L.rec->q.data() + qi;
    v.target = L.rec->out.data() + qi;
    v.mass =
        L.rec->span_mass.data() + static_cast<size_t>((ex.query * H + ex.head)) * R.spans.size();
    v.g = ex.head / (L.n_head / L.n_kv_head);
    v.qpos = R.query_pos[static_cast<size_t>(ex.query)];
    v.n_vis = visible_span_count(R, ex.query);
    return v;
}

void zoom_example_pass(const ZoomExampleView& v, const ZoomRecord& R, const ZoomLossOptions& o,
                       double weight, RouterLayerParams* grad, ZoomLoss& loss, ZoomForward* fwd) {
    const auto& L = *v.L;
    const auto& P = *v.P;
    const int64_t d = L.head_dim, dp = P.d_out;
    const int h = static_cast<int>((v.q - L.rec->q.data()) / d % L.n_head);
    const int64_t query = (v.q - L.rec->q.data()) / d / L.n_head;
    const double rs = 1.0 / std::sqrt(static_cast<double>(dp));
    const int64_t nv = v.n_vis;
    const int64_t n_kv = L.n_kv_head;

    // Routing: router.h's score, the one inference uses, for this head and, with share_group,
    // every head of its KV group (their decisions are united).
    const int group = L.n_head / L.n_kv_head;
    const bool unite = o.share_group && group > 1;
    const int h_first = unite ? v.g * group : h, h_count = unite ? group : 1;
    struct HeadRoute {
        int head = 0;
        const float* q = nullptr;
        std::vector<double> a;                  // W q
        std::vector<std::vector<double>> bproj; // W k̄ per span
        std::vector<double> z, soft;            // logits and soft gates σ((z − θ)/T)
        std::vector<char> hard;                 // z > θ
        double theta = 0;
    };
    std::vector<HeadRoute> routes(static_cast<size_t>(h_count));
    for (int i = 0; i < h_count; ++i) {
        auto& rt = routes[static_cast<size_t>(i)];
        rt.head = h_first + i;
        rt.q = L.rec->q.data() + static_cast<size_t>((query * L.n_head + rt.head) * d);
        rt.theta = P.theta[static_cast<size_t>(rt.head)];
        const int m = P.sketch_dim;
        const RelevanceScore score(
            rt.q, d, P.w.data() + static_cast<size_t>(rt.head) * dp * d, dp,
            m > 0 ? P.sketch.data() + static_cast<size_t>(v.g) * m * d : nullptr, m);
        rt.a = score.projected_query();
        rt.bproj.resize(static_cast<size_t>(nv));
        rt.z.resize(static_cast<size_t>(nv));
        rt.soft.resize(static_cast<size_t>(nv));
        rt.hard.resize(static_cast<size_t>(nv));
        for (int64_t s = 0; s < nv; ++s) {
            const auto& sp = L.spans[static_cast<size_t>(s)];
            auto& b = rt.bproj[static_cast<size_t>(s)];
            b.resize(static_cast<size_t>(dp));
            const double zs = score.logit(sp.summary_k.data() + v.g * d, sp.size, b.data(),
                                          head_sketch(sp.sketch, static_cast<int>(n_kv), m, v.g));
            rt.z[static_cast<size_t>(s)] = zs;
            rt.soft[static_cast<size_t>(s)] = sigmoid((zs - rt.theta) / o.temperature);
            rt.hard[static_cast<size_t>(s)] = zs > rt.theta;
        }
    }
    const HeadRoute& own = routes[static_cast<size_t>(h - h_first)];
    const std::vector<double>& z = own.z;
    const double theta = own.theta;
    // The forward's expansion of each span: this head's decision, or with share_group the union
    // of its group's, 1 − Π(1 − s) relaxed and their OR hard.
    std::vector<double> soft(static_cast<size_t>(nv)), ev(static_cast<size_t>(nv));
    std::vector<char> hard(static_cast<size_t>(nv));
    for (int64_t s = 0; s < nv; ++s) {
        double none = 1.0;
        bool any = false;
        for (const auto& rt : routes) {
            none *= 1.0 - rt.soft[static_cast<size_t>(s)];
            any = any || rt.hard[static_cast<size_t>(s)];
        }
        soft[static_cast<size_t>(s)] =
            routes.size() == 1 ? own.soft[static_cast<size_t>(s)] : 1.0 - none;
        hard[static_cast<size_t>(s)] = any;
        ev[static_cast<size_t>(s)] =
            o.relax ? soft[static_cast<size_t>(s)] : (hard[static_cast<size_t>(s)] ? 1.0 : 0.0);
    }
    std::vector<char> visible(R.spans.size(), 0);
    std::fill(visible.begin(), visible.begin() + nv, 1);
    const auto labels = zoom_labels(v.mass, visible, o.coverage);

    // Rank gates, key and value factors of each visible span.
    std::vector<GateRun> gk(static_cast<size_t>(nv)), gv(static_cast<size_t>(nv));
    std::vector<std::vector<double>> hk(static_cast<size_t>(nv)), hv(static_cast<size_t>(nv));
    for (int64_t s = 0; s < nv; ++s) {
        const auto& sp = L.spans[static_cast<size_t>(s)];
        // The gate reads the summary key at position 0, as SekvMemory's spans give it.
        const auto kbar =
            gate_summary_key(sp.summary_k.data() + v.g * d, d, sp.begin, L.rec->rope_base);
        for (int t = 0; t < 2; ++t) {
            const SpanFactors& f =
                t == 0 ? sp.k[static_cast<size_t>(v.g)] : sp.v[static_cast<size_t>(v.g)];
            auto& run = (t == 0 ? gk : gv)[static_cast<size_t>(s)];
            run = run_gate(P.gate, f, kbar.data());
            if (o.full_rank && !o.relax)
                run.rank_hard = run.n_avail; // the router alone (evaluation)
            auto& hh = (t == 0 ? hk : hv)[static_cast<size_t>(s)];
            hh.assign(static_cast<size_t>(f.rank), 0.0);
            for (int r = 0; r < std::min(f.rank, P.gate.n_rank); ++r)
                hh[static_cast<size_t>(r)] =
                    o.relax ? run.m[static_cast<size_t>(r)] : (r < run.rank_hard ? 1.0 : 0.0);
        }
    }

    // Mixed attention: exponents of every term first (max for stability).
    const float c = L.scale;
    const auto fpos = full_resolution_positions(R, nv, v.qpos);
    const int64_t row = n_kv * d;
    const float* K = L.rec->k.data();
    const float* V = L.rec->v.data();
    std::vector<double> uf(fpos.size());
    double M = -INFINITY;
    for (size_t j = 0; j < fpos.size(); ++j) {
        uf[j] = c * dot(v.q, K + fpos[j] * row + v.g * d, d);
        M = std::max(M, uf[j]);
    }
    std::vector<double> us(static_cast<size_t>(nv));
    std::vector<std::vector<double>> tk(static_cast<size_t>(nv)), ue(static_cast<size_t>(nv));
    for (int64_t s = 0; s < nv; ++s) {
        const auto& sp = L.spans[static_cast<size_t>(s)];
        us[static_cast<size_t>(s)] =
            c * dot(v.q, sp.summary_k.data() + v.g * d, d) + std::log(static_cast<double>(sp.size));
        M = std::max(M, us[static_cast<size_t>(s)]);
        const SpanFactors& f = sp.k[static_cast<size_t>(v.g)];
        const auto f_left = f.left_f32(), f_right = f.right_f32();
        auto& t = tk[static_cast<size_t>(s)];
        t.resize(static_cast<size_t>(f.rank));
        for (int r = 0; r < f.rank; ++r)
            t[static_cast<size_t>(r)] = dot(f_right.data() + static_cast<size_t>(r) * d, v.q, d);
        auto& u = ue[static_cast<size_t>(s)];
        u.resize(static_cast<size_t>(sp.size));
        const auto& hh = hk[static_cast<size_t>(s)];
        for (int64_t i = 0; i < sp.size; ++i) {
            double acc = 0;
            for (int r = 0; r < f.rank; ++r)
                acc += static_cast<double>(f_left[static_cast<size_t>(i * f.rank + r)]) *
                       hh[static_cast<size_t>(r)] * t[static_cast<size_t>(r)];
            u[static_cast<size_t>(i)] = c * acc;
            M = std::max(M, u[static_cast<size_t>(i)]);
        }
    }
    // Weighted sums. Expanded span values: Σ_i w_i v̂_i = Σ_r hv_r (Σ_i w_i Lv_ir) Rv_r.
    double Z = 0;
    std::vector<double> num(static_cast<size_t>(d), 0.0);
    std::vector<double> bf(fpos.size());
    for (size_t j = 0; j < fpos.size(); ++j) {
        bf[j] = std::exp(uf[j] - M);
        Z += bf[j];
        const float* vr = V + fpos[j] * row + v.g * d;
        for (int64_t x = 0; x < d; ++x)
            num[static_cast<size_t>(x)] += bf[j] * vr[x];
    }
    std::vector<double> bsum(static_cast<size_t>(nv));
    std::vector<std::vector<double>> be(static_cast<size_t>(nv)), cv(static_cast<size_t>(nv));
    for (int64_t s = 0; s < nv; ++s) {
        const auto& sp = L.spans[static_cast<size_t>(s)];
        const double e = ev[static_cast<size_t>(s)];
        bsum[static_cast<size_t>(s)] = std::exp(us[static_cast<size_t>(s)] - M);
        const double ws = (1.0 - e) * bsum[static_cast<size_t>(s)];
        Z += ws;
        const float* vbar = sp.summary_v.data() + v.g * d;
        for (int64_t x = 0; x < d; ++x)
            num[static_cast<size_t>(x)] += ws * vbar[x];
        auto& b = be[static_cast<size_t>(s)];
        b.resize(static_cast<size_t>(sp.size));
        const SpanFactors& fv = sp.v[static_cast<size_t>(v.g)];
        const auto fv_left = fv.left_f32(), fv_right = fv.right_f32();
        auto& cc = cv[static_cast<size_t>(s)];
        cc.assign(static_cast<size_t>(fv.rank), 0.0); // Σ_i β_i Lv_ir (before the factor e)
        for (int64_t i = 0; i < sp.size; ++i) {
            b[static_cast<size_t>(i)] =
                std::exp(ue[static_cast<size_t>(s)][static_cast<size_t>(i)] - M);
            Z += e * b[static_cast<size_t>(i)];
            for (int r = 0; r < fv.rank; ++r)
                cc[static_cast<size_t>(r)] +=
                    b[static_cast<size_t>(i)] * fv_left[static_cast<size_t>(i * fv.rank + r)];
        }
        if (e > 0)
            for (int r = 0; r < fv.rank; ++r) {
                const double coef = e * hv[static_cast<size_t>(s)][static_cast<size_t>(r)] *
                                    cc[static_cast<size_t>(r)];
                if (coef == 0.0)
                    continue;
                const float* rv = fv_right.data() + static_cast<size_t>(r) * d;
                for (int64_t x = 0; x < d; ++x)
                    num[static_cast<size_t>(x)] += coef * rv[x];
            }
    }
    std::vector<double> out(static_cast<size_t>(d));
    for (int64_t x = 0; x < d; ++x)
        out[static_cast<size_t>(x)] = num[static_cast<size_t>(x)] / Z;

    // Losses.
    double t2 = 0, err = 0;
    for (int64_t x = 0; x < d; ++x) {
        const double diff = out[static_cast<size_t>(x)] - v.target[x];
        err += diff * diff;
        t2 += static_cast<double>(v.target[x]) * v.target[x];
    }
    const double tden = std::max(t2, 1e-12);
    const double l_distill = err / tden;
    double l_zoom = 0, l_recon = 0, recon_hard = 0, exp_rows = 0, all_rows = 0, rank_sum = 0;
    double exp_rows_hard = 0;
    int64_t rank_terms = 0, n_pos = 0, n_exp = 0, kept = 0, pos_hit = 0, kept_avail = 0;
    for (int64_t s = 0; s < nv; ++s) {
        const double p = sigmoid(z[static_cast<size_t>(s)] - theta);
        const bool y = labels[static_cast<size_t>(s)];
        n_pos += y;
        n_exp += hard[static_cast<size_t>(s)];
        pos_hit += y && hard[static_cast<size_t>(s)];
        l_zoom -=
            y ? o.pos_weight * std::log(std::max(p, 1e-300)) : std::log(std::max(1.0 - p, 1e-300));
        const auto size = static_cast<double>(L.spans[static_cast<size_t>(s)].size);
        exp_rows += soft[static_cast<size_t>(s)] * size;
        exp_rows_hard += hard[static_cast<size_t>(s)] ? size : 0.0;
        all_rows += size;
        for (int t = 0; t < 2; ++t) {
            const auto& sp = L.spans[static_cast<size_t>(s)];
            const SpanFactors& f =
                t == 0 ? sp.k[static_cast<size_t>(v.g)] : sp.v[static_cast<size_t>(v.g)];
            const auto& run = (t == 0 ? gk : gv)[static_cast<size_t>(s)];
            kept += run.rank_hard;
            kept_avail += std::min(run.rank_hard, run.n_avail);
            const double total = std::accumulate(f.sigma2.begin(), f.sigma2.end(), 0.0);
            if (total > 0) {
                double e = 0;
                for (size_t r = 0; r < f.sigma2.size(); ++r) {
                    const double keep = static_cast<int>(r) < run.n_avail ? run.m[r] : 0.0;
                    e += (1.0 - keep) * (1.0 - keep) * f.sigma2[r];
                }
                l_recon += 0.5 * e / total;
                double lost = 0; // the hard gate: components from rank_hard on are dropped
                for (size_t r = static_cast<size_t>(run.rank_hard); r < f.sigma2.size(); ++r)
                    lost += f.sigma2[r];
                recon_hard += 0.5 * lost / total;
            }
            for (int r = 0; r < run.n_avail; ++r) {
                rank_sum += run.m[static_cast<size_t>(r)];
                ++rank_terms;
            }
        }
    }
    // The ranking loss: KL(P ‖ softmax(z)) over the visible spans (ZoomLoss::ranking).
    std::vector<double> rank_p(static_cast<size_t>(nv), 0.0), rank_q(static_cast<size_t>(nv), 0.0);
    double l_ranking = 0;
    bool rank_target = false; // the teacher put mass on a visible span
    if (nv > 0) {
        double mass = 0, zmax = -std::numeric_limits<double>::infinity(), zsum = 0;
        for (int64_t s = 0; s < nv; ++s) {
            mass += std::max(0.0, static_cast<double>(v.mass[s]));
            zmax = std::max(zmax, z[static_cast<size_t>(s)]);
        }
        for (int64_t s = 0; s < nv; ++s)
            zsum += std::exp(z[static_cast<size_t>(s)] - zmax);
        const double log_zsum = std::log(zsum) + zmax;
        for (int64_t s = 0; s < nv; ++s) {
            const double ps = mass > 0 ? std::max(0.0, static_cast<double>(v.mass[s])) / mass : 0.0;
            const double log_q = z[static_cast<size_t>(s)] - log_zsum;
            rank_p[static_cast<size_t>(s)] = ps;
            rank_q[static_cast<size_t>(s)] = std::exp(log_q);
            if (ps > 0)
                l_ranking += ps * (std::log(ps) - log_q);
        }
        rank_target = mass > 0; // else no loss and no gradient
    }
    const double inv_nv = nv > 0 ? 1.0 / static_cast<double>(nv) : 0.0;
    l_zoom *= inv_nv;
    l_recon *= inv_nv;
    loss.recon_hard += recon_hard * inv_nv;
    // The budget penalty of expanded rows and kept components, of the forward's decisions (the
    // loss; the hard ones unless relaxed) and of the soft gates (the surrogate). It is linear in
    // the decisions, so the surrogate's gradient is the straight-through gradient of either.
    auto budget_of = [&](double rows, double components) {
        return o.expansion_weight * (all_rows > 0 ? rows / all_rows : 0.0) +
               o.rank_weight *
                   (rank_terms > 0 ? components / static_cast<double>(rank_terms) : 0.0);
    };
    const double budget_soft = budget_of(exp_rows, rank_sum);
    const double l_budget =
        o.relax ? budget_soft : budget_of(exp_rows_hard, static_cast<double>(kept_avail));
    loss.budget_soft += budget_soft;
    loss.zoom += l_zoom;
    loss.ranking += l_ranking;
    loss.distill += l_distill;
    loss.recon += l_recon;
    loss.budget += l_budget;
    loss.total += o.w_zoom * l_zoom + o.w_distill * l_distill + o.w_recon * l_recon +
                  o.w_budget * l_budget + o.w_ranking * l_ranking;
    loss.expansion_rate += static_cast<double>(n_exp);
    loss.label_rate += static_cast<double>(n_pos);
    loss.label_recall += static_cast<double>(pos_hit);
    loss.mean_rank += static_cast<double>(kept);
    loss.spans += nv;
    loss.examples += 1;

    if (fwd) {
        fwd->out.assign(out.begin(), out.end());
        fwd->z = z;
        fwd->expanded = hard;
        fwd->rank_k.clear();
        fwd->rank_v.clear();
        for (int64_t s = 0; s < nv; ++s) {
            fwd->rank_k.push_back(gk[static_cast<size_t>(s)].rank_hard);
            fwd->rank_v.push_back(gv[static_cast<size_t>(s)].rank_hard);
        }
        fwd->full_rows = fpos;
    }
    if (!grad)
        return;

    // Backward. G = dL/dout.
    std::vector<double> G(static_cast<size_t>(d));
    double Gout = 0;
    for (int64_t x = 0; x < d; ++x) {
        G[static_cast<size_t>(x)] =
            weight * o.w_distill * 2.0 * (out[static_cast<size_t>(x)] - v.target[x]) / tden;
        Gout += G[static_cast<size_t>(x)] * out[static_cast<size_t>(x)];
    }
    // dL/dz and dL/dθ of each routed head (this one alone, or its KV group with share_group).
    std::vector<std::vector<double>> dz(routes.size(),
                                        std::vector<double>(static_cast<size_t>(nv)));
    std::vector<double> dtheta(routes.size(), 0.0);
    const size_t io = static_cast<size_t>(h - h_first); // this head among them
    auto& gg = grad->gate;
    for (int64_t s = 0; s < nv; ++s) {
        const auto& sp = L.spans[static_cast<size_t>(s)];
        const double e = ev[static_cast<size_t>(s)];
        const SpanFactors& fk = sp.k[static_cast<size_t>(v.g)];
        const SpanFactors& fv = sp.v[static_cast<size_t>(v.g)];
        const auto fv_left = fv.left_f32(), fv_right = fv.right_f32();
        const auto fk_left = fk.left_f32();
        // G·v̄ and G·Rv_r.
        const double Gvbar = [&] {
            double acc = 0;
            const float* vbar = sp.summary_v.data() + v.g * d;
            for (int64_t x = 0; x < d; ++x)
                acc += G[static_cast<size_t>(x)] * vbar[x];
            return acc;
        }();
        std::vector<double> GR(static_cast<size_t>(fv.rank));
        for (int r = 0; r < fv.rank; ++r) {
            double acc = 0;
            const float* rv = fv_right.data() + static_cast<size_t>(r) * d;
            for (int64_t x = 0; x < d; ++x)
                acc += G[static_cast<size_t>(x)] * rv[x];
            GR[static_cast<size_t>(r)] = acc;
        }
        const auto& hvs = hv[static_cast<size_t>(s)];
        const auto& hks = hk[static_cast<size_t>(s)];
        // dL/de: the summary's weight (1 − e)·β̄ and the rows' weights e·β_i.
        double de = -bsum[static_cast<size_t>(s)] * (Gvbar - Gout) / Z;
        std::vector<double> dhk(static_cast<size_t>(fk.rank), 0.0),
            dhv(static_cast<size_t>(fv.rank), 0.0);
        for (int64_t i = 0; i < sp.size; ++i) {
            double Gv = 0; // G·v̂_i
            for (int r = 0; r < fv.rank; ++r)
                Gv += hvs[static_cast<size_t>(r)] * fv_left[static_cast<size_t>(i * fv.rank + r)] *
                      GR[static_cast<size_t>(r)];
            const double b = be[static_cast<size_t>(s)][static_cast<size_t>(i)];
            de += b * (Gv - Gout) / Z;
            if (e > 0) {
                const double du = e * b * (Gv - Gout) / Z; // dL/dû_i
                for (int r = 0; r < fk.rank; ++r)
                    dhk[static_cast<size_t>(r)] +=
                        du * c * fk_left[static_cast<size_t>(i * fk.rank + r)] *
                        tk[static_cast<size_t>(s)][static_cast<size_t>(r)];
            }
        }
        if (e > 0)
            for (int r = 0; r < fv.rank; ++r)
                dhv[static_cast<size_t>(r)] = GR[static_cast<size_t>(r)] * e *
                                              cv[static_cast<size_t>(s)][static_cast<size_t>(r)] /
                                              Z;
        (void)hks;
        // The expansion (straight through without relax) and the budget on it, to each routed
        // head's soft gate: with the union u = 1 − Π_j(1 − s_j), du/ds_i = Π_{j≠i}(1 − s_j).
        const double du =
            de + weight * o.w_budget * o.expansion_weight * static_cast<double>(sp.size) / all_rows;
        // The cross-entropy on σ(z − θ), this head's own decision.
        const double p = sigmoid(z[static_cast<size_t>(s)] - theta);
        const double dce = weight * o.w_zoom * inv_nv *
                           (labels[static_cast<size_t>(s)] ? o.pos_weight * (p - 1.0) : p);
        for (size_t i = 0; i < routes.size(); ++i) {
            double others = 1.0;
            for (size_t j = 0; j < routes.size(); ++j)
                if (j != i)
                    others *= 1.0 - routes[j].soft[static_cast<size_t>(s)];
            const double sg = routes[i].soft[static_cast<size_t>(s)];
            const double dzs = du * others * sg * (1.0 - sg) / o.temperature;
            // Summed before θ takes it, as for a head alone.
            const double g = i == io ? dzs + dce : dzs;
            dz[i][static_cast<size_t>(s)] += g;
            dtheta[i] -= g;
        }
        // The ranking loss: d/dz_S KL(P ‖ softmax(z)) = softmax(z)_S − P_S (θ-free).
        if (rank_target)
            dz[io][static_cast<size_t>(s)] +=
                weight * o.w_ranking *
                (rank_q[static_cast<size_t>(s)] - rank_p[static_cast<size_t>(s)]);
        // Rank gates: distillation (straight through), reconstruction, budget.
        for (int t = 0; t < 2; ++t) {
            const SpanFactors& f = t == 0 ? fk : fv;
            const auto& run = (t == 0 ? gk : gv)[static_cast<size_t>(s)];
            const auto& dh = t == 0 ? dhk : dhv;
            std::vector<double> dm(static_cast<size_t>(P.gate.n_rank), 0.0);
            const double total = std::accumulate(f.sigma2.begin(), f.sigma2.end(), 0.0);
            for (int r = 0; r < run.n_avail; ++r) {
                double g = dh[static_cast<size_t>(r)];
                if (total > 0)
                    g += weight * o.w_recon * inv_nv * 0.5 * (-2.0) *
                         (1.0 - run.m[static_cast<size_t>(r)]) * f.sigma2[static_cast<size_t>(r)] /
                         total;
                g += weight * o.w_budget * o.rank_weight / static_cast<double>(rank_terms);
                dm[static_cast<size_t>(r)] = g;
            }
            gate_backward(P.gate, run, dm, gg);
        }
    }
    // z → W of each routed head: z = q·k̄/√d + ⟨a, b⟩/√d′ + log|S| with a = W q, b = W k̄ (the
    // first and last terms do not depend on W): dz/da = b/√d′, dz/db = a/√d′; dW = da qᵀ + Σ db
    // k̄ᵀ.
    for (size_t i = 0; i < routes.size(); ++i) {
        const auto& rt = routes[i];
        grad->theta[static_cast<size_t>(rt.head)] += static_cast<float>(dtheta[i]);
        std::vector<double> da(static_cast<size_t>(dp), 0.0);
        float* gW = grad->w.data() + static_cast<size_t>(rt.head) * dp * d;
        for (int64_t s = 0; s < nv; ++s) {
            const double dzs = dz[i][static_cast<size_t>(s)];
            if (dzs == 0.0)
                continue;
            const auto& b = rt.bproj[static_cast<size_t>(s)];
            const float* kbar = L.spans[static_cast<size_t>(s)].summary_k.data() + v.g * d;
            for (int64_t r = 0; r < dp; ++r) {
                da[static_cast<size_t>(r)] += dzs * b[static_cast<size_t>(r)] * rs;
                const double db = dzs * rt.a[static_cast<size_t>(r)] * rs;
                float* gr = gW + r * d;
                for (int64_t x = 0; x < d; ++x)
                    gr[x] += static_cast<float>(db * kbar[x]);
            }
        }
        for (int64_t r = 0; r < dp; ++r) {
            float* gr = gW + r * d;
            for (int64_t x = 0; x < d; ++x)
                gr[x] += static_cast<float>(da[static_cast<size_t>(r)] * rt.q[x]);
        }
    }
}

} // namespace spanscope
