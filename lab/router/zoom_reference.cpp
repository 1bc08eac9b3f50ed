#include "lab/router/zoom_reference.h"

#include "engine/sekv/mixed_attention.h"
#include "engine/sekv/router.h"
#include "engine/sekv/span_sketch.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace spanscope {

namespace {

// The relevances of the first nv (visible) spans for query i and head h of layer L; W from
// `trained` (the layer's parameters) or none (training-free form). One RelevanceScore per query
// and head, as inference scores (sekv_routing.cpp span_relevances).
std::vector<double> relevances(const ZoomExampleSet::Layer& L, const RouterLayerParams* trained,
                               int64_t i, int h, size_t nv) {
    const int64_t d = L.head_dim;
    const int g = h / (L.n_head / L.n_kv_head);
    const int m = trained ? trained->sketch_dim : 0;
    const RelevanceScore score(
        L.rec->q.data() + (i * L.n_head + h) * d, d,
        trained ? trained->w.data() + static_cast<size_t>(h) * trained->d_out * d : nullptr,
        trained ? trained->d_out : 0,
        m > 0 ? trained->sketch.data() + static_cast<size_t>(g) * m * d : nullptr, m);
    std::vector<double> r(nv);
    for (size_t s = 0; s < nv; ++s)
        r[s] = score.relevance(L.spans[s].summary_k.data() + g * d, L.spans[s].size,
                               head_sketch(L.spans[s].sketch, L.n_kv_head, m, g));
    return r;
}

} // namespace

ZoomReference router_reference(const std::vector<ZoomExampleSet>& sets,
                               const std::vector<ZoomItem>& examples, const ZoomReferenceOptions& o,
                               ThreadPool& pool) {
    if (!(o.expand_rate >= 0 && o.expand_rate <= 1))
        throw std::invalid_argument("router reference: expand_rate outside [0, 1]");
    for (const auto& [si, ex] : examples) {
        if (si < 0 || si >= static_cast<int>(sets.size()) || ex.layer < 0 ||
            ex.layer >= static_cast<int>(sets[static_cast<size_t>(si)].layers.size()))
            throw std::invalid_argument("router reference: an example outside the sets");
        const auto& set = sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        if (ex.head < 0 || ex.head >= L.n_head || ex.query < 0 ||
            ex.query >= set.record->n_queries())
            throw std::invalid_argument("router reference: an example's head or query outside "
                                        "its layer");
        if (o.trained) {
            const auto* lp = o.trained->find(L.layer);
            if (!lp || lp->n_head != L.n_head || lp->head_dim != L.head_dim || lp->d_out < 1 ||
                lp->w.size() != static_cast<size_t>(L.n_head) * lp->d_out * L.head_dim)
                throw std::invalid_argument("router reference: no trained W of the layer's shape "
                                            "[n_head][d_out][head_dim] for layer " +
                                            std::to_string(L.layer));
        }
    }
    auto params_of = [&](const ZoomExampleSet::Layer& L) {
        return o.trained ? o.trained->find(L.layer) : nullptr;
    };

    // τ per (model layer, head): the (1 − rate) quantile of the examples' relevances (not
    // needed when each query calibrates its own).
    std::map<std::pair<int, int>, std::vector<double>> records;
    for (const auto& [si, ex] : examples) {
        if (o.tau_per_query)
            break;
        const auto& set = sets[static_cast<size_t>(si)];
        const auto& L = set.layers[static_cast<size_t>(ex.layer)];
        auto& r = records[{L.layer, ex.head}];
        const auto rel = relevances(L, params_of(L), ex.query, ex.head,
                                    static_cast<size_t>(visible_span_count(*set.record, ex.query)));
        r.insert(r.end(), rel.begin(), rel.end());
    }
    std::map<std::pair<int, int>, double> tau;
    for (auto& [key, r] : records)
        tau[key] = calibrate_tau(std::move(r), o.expand_rate);
    auto tau_of = [&](int layer, int head) {
        const auto it = tau.find({layer, head});
        // A head with no example of its own at this layer asks for nothing.
        return it == tau.end() ? 2.0 : it->second;
    };

    const int T = pool.size();
    std::vector<ZoomReference> part(static_cast<size_t>(T));
    std::vector<double> hits(static_cast<size_t>(T), 0.0), positives(static_cast<size_t>(T), 0.0);
    pool.parallel_for(static_cast<int64_t>(examples.size()), [&](int64_t b, int64_t e, int t) {
        auto& acc = part[static_cast<size_t>(t)];
        for (int64_t x = b; x < e; ++x) {
            const auto& [si, ex] = examples[static_cast<size_t>(x)];
            const auto& set = sets[static_cast<size_t>(si)];
            const auto& R = *set.record;
            const auto& L = set.layers[static_cast<size_t>(ex.layer)];
            const int64_t d = L.head_dim, row = static_cast<int64_t>(L.n_kv_head) * d;
            const int group = L.n_head / L.n_kv_head, g = ex.head / group;
            const size_t nv = static_cast<size_t>(visible_span_count(R, ex.query));
            const int32_t qpos = R.query_pos[static_cast<size_t>(ex.query)];
            const auto* lp = params_of(L);

            std::vector<char> visible(R.spans.size(), 0), expanded(nv, 0);
            std::fill(visible.begin(), visible.begin() + static_cast<int64_t>(nv), 1);
            const int h0 = o.share_group ? g * group : ex.head;
            const int h1 = o.share_group ? h0 + group : ex.head + 1;
            for (int h = h0; h < h1; ++h) {
                const auto rel = relevances(L, lp, ex.query, h, nv);
                if (rel.empty()) // no visible span: nothing to decide
                    break;
                const double tau =
                    o.tau_per_query ? calibrate_tau(rel, o.expand_rate) : tau_of(L.layer, h);
                for (size_t s = 0; s < nv; ++s)
                    expanded[s] = expanded[s] || rel[s] > tau;
            }
            const float* mass = L.rec->span_mass.data() +
                                static_cast<size_t>(ex.query * L.n_head + ex.head) * R.spans.size();
            const auto labels = zoom_labels(mass, visible, o.coverage);

            // Full-resolution rows: every position <= qpos outside the visible spans.
            const auto full = full_resolution_positions(R, static_cast<int64_t>(nv), qpos);
            const auto m = static_cast<int64_t>(full.size());
            std::vector<float> fk, fv;
            for (const int64_t p : full) {
                fk.insert(fk.end(), L.rec->k.begin() + p * row + g * d,
                          L.rec->k.begin() + p * row + (g + 1) * d);
                fv.insert(fv.end(), L.rec->v.begin() + p * row + g * d,
                          L.rec->v.begin() + p * row + (g + 1) * d);
            }
            std::vector<SpanView> views;
            views.reserve(nv);
            for (size_t s = 0; s < nv; ++s) {
                const auto& sp = L.spans[s];
                views.push_back({sp.size, sp.summary_k.data() + g * d, sp.summary_v.data() + g * d,
                                 &sp.k[static_cast<size_t>(g)], &sp.v[static_cast<size_t>(g)],
                                 expanded[s] != 0});
                acc.expansion_rate += expanded[s];
                positives[static_cast<size_t>(t)] += labels[s];
                hits[static_cast<size_t>(t)] += labels[s] && expanded[s];
            }
            std::vector<float> out(static_cast<size_t>(d));
            const float* q = L.rec->q.data() + (ex.query * L.n_head + ex.head) * d;
            mixed_attention(q, d, L.scale, fk.data(), fv.data(), m, views, out.data());
            const float* target = L.rec->out.data() + (ex.query * L.n_head + ex.head) * d;
            double err = 0, t2 = 0;
            for (int64_t c = 0; c < d; ++c) {
                err += (out[static_cast<size_t>(c)] - static_cast<double>(target[c])) *
                       (out[static_cast<size_t>(c)] - static_cast<double>(target[c]));
                t2 += static_cast<double>(target[c]) * target[c];
            }
            acc.distill += err / std::max(t2, 1e-12);
            acc.spans += static_cast<int64_t>(nv);
            acc.examples += 1;
        }
    });
    ZoomReference sum;
    double hit = 0, pos = 0;
    for (int t = 0; t < T; ++t) {
        const auto& p = part[static_cast<size_t>(t)];
        sum.distill += p.distill;
        sum.expansion_rate += p.expansion_rate;
        sum.examples += p.examples;
        sum.spans += p.spans;
        hit += hits[static_cast<size_t>(t)];
        pos += positives[static_cast<size_t>(t)];
    }
    if (sum.examples > 0)
        sum.distill /= static_cast<double>(sum.examples);
    if (sum.spans > 0)
        sum.expansion_rate /= static_cast<double>(sum.spans);
    sum.label_recall = pos > 0 ? hit / pos : 0.0;
    return sum;
}

} // namespace spanscope
