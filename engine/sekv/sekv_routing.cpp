#include "engine/sekv/sekv_routing.h"

#include "engine/sekv/router.h"
#include "engine/sekv/span_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spanscope {

void check_router_options(const SekvRouterOptions& r, const AttentionShape& shape) {
    if (!(r.expand_rate >= 0.0 && r.expand_rate <= 1.0) || r.budget_rows < 0)
        throw std::invalid_argument("sekv router: expand rate must lie in [0, 1] and the row "
                                    "budget must not be negative");
    if (r.tau_per_query && (r.learned_tau || r.budget_rows > 0))
        throw std::invalid_argument("sekv router: τ per query calibrates each query's own "
                                    "threshold; it cannot be combined with the learned "
                                    "thresholds or a row budget");
    if (r.trained &&
        (r.trained->d_out < 1 ||
         r.trained->w.size() != static_cast<size_t>(shape.n_head) * r.trained->d_out *
                                    static_cast<size_t>(shape.head_dim) ||
         r.trained->tau.size() != static_cast<size_t>(shape.n_head) || r.trained->sketch_dim < 0 ||
         r.trained->sketch_basis.size() != static_cast<size_t>(shape.n_kv_head) *
                                               r.trained->sketch_dim *
                                               static_cast<size_t>(shape.head_dim)))
        throw std::invalid_argument("sekv router: trained parameters do not match the layer");
    if (r.oracle && (!r.tau_per_query || r.trained))
        throw std::invalid_argument("sekv router: the oracle router expands, per query head, as "
                                    "many spans as τ per query asks for; it needs τ per query "
                                    "and no trained parameters");
    if (r.rerank < 0 || r.rerank == 1 || r.rerank > kMaxRerank)
        throw std::invalid_argument("sekv router: rerank must be 0 (off) or a number of "
                                    "candidates per expanded span in [2, " +
                                    std::to_string(kMaxRerank) + "], not " +
                                    std::to_string(r.rerank));
    if (r.rerank > 0 && (!r.tau_per_query || r.oracle))
        throw std::invalid_argument("sekv router: two-stage routing (rerank) takes each query "
                                    "head's candidates by τ per query; it needs τ per query and "
                                    "not the oracle");
}

std::vector<double> span_relevances(const AttentionShape& shape, const SekvRouterOptions& options,
                                    const std::vector<SekvSpan>& spans, const float* qh, int head) {
    const int d = shape.head_dim;
    const int g = head / (shape.n_head / shape.n_kv_head);
    const auto* tr = options.trained.get();
    const int m = tr ? tr->sketch_dim : 0;
    const RelevanceScore score(
        qh, d, tr ? tr->w.data() + static_cast<size_t>(head) * tr->d_out * d : nullptr,
        tr ? tr->d_out : 0,
        m > 0 ? tr->sketch_basis.data() + static_cast<size_t>(g) * m * d : nullptr, m);
    std::vector<double> rel(spans.size());
    for (size_t s = 0; s < spans.size(); ++s)
        rel[s] = score.relevance(spans[s].summary_k.data() + g * d, spans[s].size,
                                 head_sketch(spans[s].sketch, shape.n_kv_head, m, g));
    return rel;
}

namespace {

void check_head(const AttentionShape& shape, int head, const char* who) {
    if (head < 0 || head >= shape.n_head || shape.n_kv_head < 1 ||
        shape.n_head % shape.n_kv_head != 0)
        throw std::invalid_argument(std::string(who) + ": query head " + std::to_string(head) +
                                    " is not one of the layer's " + std::to_string(shape.n_head) +
                                    " (in KV groups of n_head / n_kv_head)");
}

// log Σ_{i∈S} exp(scale · qh·k_i) over span s's keys k_i = left_i · right rebuilt from its key
// factors of KV group g (the scores mixed_attention gives an expanded span).
double span_key_log_mass(const AttentionShape& shape, const std::vector<SekvSpan>& spans, size_t s,
                         const float* qh, int g, const char* who) {
    const int d = shape.head_dim;
    if (spans[s].k.size() <= static_cast<size_t>(g))
        throw std::invalid_argument(std::string(who) + ": span " + std::to_string(s) +
                                    " has no factors to score its keys with");
    const SpanFactors& f = spans[s].k[static_cast<size_t>(g)];
    if (f.rows != spans[s].size || f.dim != d)
        throw std::invalid_argument(std::string(who) + ": span " + std::to_string(s) +
                                    "'s key factors are not [size][head_dim]");
    const auto rq = project_rows(f.right_f32().data(), f.rank, d, qh); // right · q [rank]
    const auto left = f.left_f32();
    std::vector<double> score(static_cast<size_t>(f.rows));
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < f.rows; ++i) {
        double z = 0;
        for (int c = 0; c < f.rank; ++c)
            z += static_cast<double>(left[static_cast<size_t>(i * f.rank + c)]) *
                 rq[static_cast<size_t>(c)];
        score[static_cast<size_t>(i)] = z * shape.scale;
        m = std::max(m, score[static_cast<size_t>(i)]);
    }
    double sum = 0;
    for (const double z : score)
        sum += std::exp(z - m);
    return m + std::log(sum);
}

} // namespace

std::vector<double> span_attention_shares(const AttentionShape& shape,
                                          const std::vector<SekvSpan>& spans, const float* qh,
                                          int head) {
    check_head(shape, head, "span_attention_shares");
    const int g = head / (shape.n_head / shape.n_kv_head);
    std::vector<double> lse(spans.size());
    double top = -std::numeric_limits<double>::infinity();
    for (size_t s = 0; s < spans.size(); ++s) {
        lse[s] = span_key_log_mass(shape, spans, s, qh, g, "span_attention_shares");
        top = std::max(top, lse[s]);
    }
    double total = 0;
    for (auto& l : lse) {
        l = std::exp(l - top);
        total += l;
    }
    for (auto& l : lse)
        l /= total;
    return lse;
}

std::vector<int> rerank_candidates(const AttentionShape& shape, const std::vector<SekvSpan>& spans,
                                   const std::vector<int>& candidates, const float* qh, int head,
                                   size_t keep) {
    check_head(shape, head, "rerank_candidates");
    const int g = head / (shape.n_head / shape.n_kv_head);
    std::vector<std::pair<double, int>> scored;
    scored.reserve(candidates.size());
    for (const int s : candidates) {
        if (s < 0 || static_cast<size_t>(s) >= spans.size())
            throw std::invalid_argument("rerank_candidates: candidate " + std::to_string(s) +
                                        " is not one of the " + std::to_string(spans.size()) +
                                        " spans");
        scored.emplace_back(
            span_key_log_mass(shape, spans, static_cast<size_t>(s), qh, g, "rerank_candidates"), s);
    }
    // The largest log-mass first, ties to the lower index.
    const auto n = static_cast<std::ptrdiff_t>(std::min(keep, scored.size()));
    std::partial_sort(scored.begin(), scored.begin() + n, scored.end(),
                      [](const auto& a, const auto& b) {
                          return a.first > b.first || (a.first == b.first && a.second < b.second);
                      });
    std::vector<int> kept;
    for (std::ptrdiff_t i = 0; i < n; ++i)
        kept.push_back(scored[static_cast<size_t>(i)].second);
    std::sort(kept.begin(), kept.end());
    return kept;
}

std::vector<double> calibrate_router(const AttentionShape& shape, const SekvRouterOptions& options,
                                     const std::vector<SekvSpan>& spans, const float* q,
                                     int64_t n_q) {
    if (options.trained && options.learned_tau)
        return options.trained->tau;
    if (n_q < 1 || spans.empty())
        throw std::invalid_argument("calibrate_router: no query or no span to calibrate on");
    const int H = shape.n_head, d = shape.head_dim;
    std::vector<double> tau(static_cast<size_t>(H), 0.0);
    for (int h = 0; h < H; ++h) {
        std::vector<double> records;
        for (int64_t i = 0; i < n_q; ++i) {
            const auto rel = span_relevances(shape, options, spans, q + (i * H + h) * d, h);
            records.insert(records.end(), rel.begin(), rel.end());
        }
        tau[static_cast<size_t>(h)] = calibrate_tau(std::move(records), options.expand_rate);
    }
    return tau;
}

SpanRouting route_queries(const AttentionShape& shape, const SekvRouterOptions& options,
                          bool summaries_only, const std::vector<SekvSpan>& spans,
                          const std::vector<double>& tau, const float* q, int64_t n_q,
                          ThreadPool& pool) {
    const int H = shape.n_head, d = shape.head_dim;
    const bool all = options.expand_all && !summaries_only;
    if (!all && !summaries_only && !options.tau_per_query && tau.size() != static_cast<size_t>(H))
        throw std::invalid_argument("route_queries: τ must have one entry per query head");
    std::vector<int64_t> sizes(spans.size());
    for (size_t s = 0; s < spans.size(); ++s)
        sizes[s] = spans[s].size;
    const auto nt = static_cast<size_t>(n_q * H);
    SpanRouting r;
    r.used.resize(nt);
    r.relevance.resize(nt);
    if (summaries_only)
        return r; // chunk_summary: never zoomed into
    std::vector<std::vector<int>> routed(nt);
    pool.parallel_for(n_q * H, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            const int h = static_cast<int>(t % H);
            r.relevance[t] = options.oracle ? span_attention_shares(shape, spans, q + t * d, h)
                                            : span_relevances(shape, options, spans, q + t * d, h);
            if (all) {
                routed[t].resize(spans.size());
                for (size_t s = 0; s < spans.size(); ++s)
                    routed[t][s] = static_cast<int>(s);
            } else if (options.tau_per_query) {
                routed[t] = spans.empty()
                                ? std::vector<int>{}
                                : route_spans(r.relevance[t], sizes,
                                              calibrate_tau(r.relevance[t], options.expand_rate));
                if (options.rerank > 0 && !routed[t].empty()) {
                    const double wide = std::min(1.0, options.rerank * options.expand_rate);
                    const auto candidates =
                        route_spans(r.relevance[t], sizes, calibrate_tau(r.relevance[t], wide));
                    routed[t] =
                        rerank_candidates(shape, spans, candidates, q + t * d, h, routed[t].size());
                }
            } else {
                routed[t] = route_spans(r.relevance[t], sizes, tau[static_cast<size_t>(h)],
                                        options.budget_rows);
            }
        }
    });
    const int group = H / shape.n_kv_head;
    if (!(options.share_group && options.budget_rows == 0 && group > 1 && !all)) {
        r.used = std::move(routed);
        return r;
    }
    // A span that any query head of a KV group zooms into is expanded for the whole group:
    // its rows are reconstructed for that KV head anyway.
    for (int64_t i = 0; i < n_q; ++i)
        for (int g = 0; g < shape.n_kv_head; ++g) {
            std::vector<int> u;
            for (int h = g * group; h < (g + 1) * group; ++h) {
                const auto& x = routed[static_cast<size_t>(i * H + h)];
                u.insert(u.end(), x.begin(), x.end());
            }
            std::sort(u.begin(), u.end());
            u.erase(std::unique(u.begin(), u.end()), u.end());
            for (int h = g * group; h < (g + 1) * group; ++h)
                r.used[static_cast<size_t>(i * H + h)] = u;
        }
    return r;
}

std::vector<ZoomHead> last_query_zoom(const SpanRouting& routing, int64_t n_q, int n_head) {
    std::vector<ZoomHead> zoom(static_cast<size_t>(n_head));
    if (n_q < 1)
        return zoom;
    for (int h = 0; h < n_head; ++h) {
        const auto t = static_cast<size_t>((n_q - 1) * n_head + h);
        auto& z = zoom[static_cast<size_t>(h)];
        z.spans.assign(routing.used[t].begin(), routing.used[t].end());
        for (const int s : routing.used[t])
            z.relevance.push_back(static_cast<float>(routing.relevance[t][static_cast<size_t>(s)]));
    }
    return zoom;
}

} // namespace spanscope
