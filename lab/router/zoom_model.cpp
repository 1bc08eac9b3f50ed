#include "lab/router/zoom_model.h"

#include "engine/sekv/router.h"
#include "lab/router/zoom_example_pass.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

// Gradient arrays shaped like p, zeroed.
RouterParams zeros_like(const RouterParams& p) {
    RouterParams g;
    g.layers = p.layers;
    for (auto& l : g.layers)
        for (auto* v : {&l.w, &l.theta, &l.gate.w1, &l.gate.b1, &l.gate.w2, &l.gate.b2})
            std::fill(v->begin(), v->end(), 0.0f);
    return g;
}

void add_into(RouterParams& a, const RouterParams& b) {
    for (size_t il = 0; il < a.layers.size(); ++il) {
        auto& x = a.layers[il];
        const auto& y = b.layers[il];
        const std::vector<float>* src[] = {&y.w,       &y.theta,   &y.gate.w1,
                                           &y.gate.b1, &y.gate.w2, &y.gate.b2};
        std::vector<float>* dst[] = {&x.w,       &x.theta,   &x.gate.w1,
                                     &x.gate.b1, &x.gate.w2, &x.gate.b2};
        for (int t = 0; t < 6; ++t)
            for (size_t i = 0; i < dst[t]->size(); ++i)
                (*dst[t])[i] += (*src[t])[i];
    }
}

} // namespace

ZoomLoss& ZoomLoss::operator+=(const ZoomLoss& o) {
    zoom += o.zoom;
    ranking += o.ranking;
    distill += o.distill;
    recon += o.recon;
    recon_hard += o.recon_hard;
    budget += o.budget;
    budget_soft += o.budget_soft;
    total += o.total;
    expansion_rate += o.expansion_rate;
    mean_rank += o.mean_rank;
    label_rate += o.label_rate;
    label_recall += o.label_recall;
    examples += o.examples;
    spans += o.spans;
    return *this;
}

ZoomForward zoom_forward(const RouterParams& params, const ZoomExampleSet& set,
                         const ZoomExample& example, const ZoomLossOptions& options) {
    const auto v = zoom_example_view(params, set, example);
    ZoomForward f;
    ZoomLoss unused;
    zoom_example_pass(v, *set.record, options, 1.0, nullptr, unused, &f);
    return f;
}

ZoomLoss zoom_loss(const RouterParams& params, const std::vector<ZoomExampleSet>& sets,
                   const std::vector<ZoomItem>& examples, const ZoomLossOptions& options,
                   RouterParams* grad, ThreadPool& pool) {
    if (!(options.temperature > 0) || !(options.coverage > 0 && options.coverage <= 1))
        throw std::invalid_argument("zoom loss: temperature must be > 0 and coverage in (0, 1]");
    std::vector<ZoomExampleView> views;
    views.reserve(examples.size());
    for (const auto& [si, ex] : examples) {
        if (si < 0 || si >= static_cast<int>(sets.size()))
            throw std::invalid_argument("zoom example: no set " + std::to_string(si));
        views.push_back(zoom_example_view(params, sets[static_cast<size_t>(si)], ex));
    }
    const int T = pool.size();
    std::vector<ZoomLoss> part(static_cast<size_t>(T));
    std::vector<RouterParams> gpart;
    if (grad)
        for (int t = 0; t < T; ++t)
            gpart.push_back(zeros_like(params));
    const double weight = examples.empty() ? 0.0 : 1.0 / static_cast<double>(examples.size());
    pool.parallel_for(static_cast<int64_t>(views.size()), [&](int64_t b, int64_t e, int t) {
        for (int64_t i = b; i < e; ++i) {
            const auto& v = views[static_cast<size_t>(i)];
            RouterLayerParams* g = nullptr;
            if (grad) {
                auto& gp = gpart[static_cast<size_t>(t)];
                g = &gp.layers[static_cast<size_t>(v.P - params.layers.data())];
            }
            zoom_example_pass(
                v, *sets[static_cast<size_t>(examples[static_cast<size_t>(i)].first)].record,
                options, weight, g, part[static_cast<size_t>(t)], nullptr);
        }
    });
    ZoomLoss sum;
    for (const auto& p : part)
        sum += p;
    if (grad) {
        *grad = zeros_like(params);
        for (const auto& gp : gpart)
            add_into(*grad, gp);
    }
    if (sum.examples > 0) {
        const auto n = static_cast<double>(sum.examples);
        sum.zoom /= n;
        sum.ranking /= n;
        sum.distill /= n;
        sum.recon /= n;
        sum.recon_hard /= n;
        sum.budget /= n;
        sum.budget_soft /= n;
        sum.total /= n;
    }
    sum.label_recall = sum.label_rate > 0 ? sum.label_recall / sum.label_rate : 0.0;
    if (sum.spans > 0) {
        sum.expansion_rate /= static_cast<double>(sum.spans);
        sum.label_rate /= static_cast<double>(sum.spans);
        sum.mean_rank /= 2.0 * static_cast<double>(sum.spans);
    }
    return sum;
}

void calibrate_theta(RouterParams& params, const std::vector<ZoomExampleSet>& sets,
                     const std::vector<ZoomItem>& examples, double rate) {
    ZoomLossOptions o;
    for (auto& P : params.layers)
        for (int h = 0; h < P.n_head; ++h) {
            std::vector<double> z;
            for (const auto& [si, ex] : examples) {
                const auto& set = sets[static_cast<size_t>(si)];
                if (set.layers[static_cast<size_t>(ex.layer)].layer != P.layer || ex.head != h)
                    continue;
                const auto f = zoom_forward(params, set, ex, o);
                z.insert(z.end(), f.z.begin(), f.z.end());
            }
            if (z.empty())
                throw std::invalid_argument("calibrate_theta: no example of layer " +
                                            std::to_string(P.layer) + " head " + std::to_string(h));
            // calibrate_tau works on any monotone score: logits here. θ is stored in float,
            // and the rounding must not change which spans pass z > θ: the float at or above
            // the quantile (rounded down it would expand the span at the quantile too), or, when
            // every span expands (θ below the smallest z), the float below the smallest z.
            const double zmin = *std::min_element(z.begin(), z.end());
            const double t = calibrate_tau(std::move(z), rate);
            float tf = static_cast<float>(t);
            if (t < zmin) {
                while (static_cast<double>(tf) >= zmin)
                    tf = std::nextafter(tf, -std::numeric_limits<float>::infinity());
            } else if (static_cast<double>(tf) < t) {
                tf = std::nextafter(tf, std::numeric_limits<float>::infinity());
            }
            P.theta[static_cast<size_t>(h)] = tf;
        }
}

RouterParams init_router_params(const std::vector<RouterLayerParams>& shapes, uint64_t seed,
                                double w_scale, double gate_bias) {
    if (!(w_scale >= 0) || !std::isfinite(w_scale))
        throw std::invalid_argument("init_router_params: W's scale must be a finite number >= 0");
    if (!std::isfinite(gate_bias))
        throw std::invalid_argument("init_router_params: the gate's bias must be a finite number");
    RouterParams p;
    std::mt19937_64 rng(seed);
    for (const auto& s : shapes) {
        RouterLayerParams l = s;
        const int d = s.head_dim, R = s.gate.n_rank, Hd = s.gate.n_hidden;
        if (d < 1 || s.d_out < 1 || s.n_head < 1 || R < 1 || Hd < 1 || s.gate.head_dim != d)
            throw std::invalid_argument("init_router_params: bad shape of layer " +
                                        std::to_string(s.layer));
        auto fill = [&](std::vector<float>& v, size_t n, double sd) {
            std::normal_distribution<double> nd(0.0, sd);
            v.resize(n);
            for (auto& x : v)
                x = static_cast<float>(nd(rng));
        };
        fill(l.w, static_cast<size_t>(s.n_head) * s.d_out * d, w_scale / std::sqrt(d));
        l.theta.assign(static_cast<size_t>(s.n_head), 0.0f);
        const int I = R + d;
        fill(l.gate.w1, static_cast<size_t>(Hd) * I, 1.0 / std::sqrt(I));
        l.gate.b1.assign(static_cast<size_t>(Hd), 0.0f);
        fill(l.gate.w2, static_cast<size_t>(R) * Hd, 1.0 / std::sqrt(Hd));
        l.gate.b2.assign(static_cast<size_t>(R), static_cast<float>(gate_bias));
        p.layers.push_back(std::move(l));
    }
    return p;
}

std::vector<ZoomTensorRef> zoom_tensors(RouterParams& p) {
    std::vector<ZoomTensorRef> out;
    for (auto& l : p.layers) {
        out.push_back({&l.w, true, "w"});
        out.push_back({&l.theta, false, "theta"});
        out.push_back({&l.gate.w1, true, "gate.w1"});
        out.push_back({&l.gate.b1, false, "gate.b1"});
        out.push_back({&l.gate.w2, true, "gate.w2"});
        out.push_back({&l.gate.b2, false, "gate.b2"});
    }
    return out;
}

} // namespace spanscope
