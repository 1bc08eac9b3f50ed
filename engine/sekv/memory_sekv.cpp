#include "engine/sekv/memory_sekv.h"

#include "engine/sekv/span_sketch.h"

#include "engine/sekv/mixed_attention.h"
#include "engine/sekv/router_params.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope {

SekvOptions sekv_layer_options(const SekvOptions& options, int layer, const AttentionShape& shape) {
    SekvOptions o = options;
    if (options.summaries_only)
        o.router_params.reset(); // chunk_summary never routes and keeps no factors: nothing to take
    if (!o.router_params)
        return o;
    if (options.uniform_summary)
        throw std::invalid_argument("SEKV layer " + std::to_string(layer) +
                                    ": the trained router reads surprisal-weighted summary rows "
                                    "(its training builds them so): not with uniform summaries");
    const auto* l = options.router_params->find(layer);
    const std::string file = options.router_params->model_name.empty()
                                 ? std::string("the zoom parameters")
                                 : "the zoom parameters for " + options.router_params->model_name;
    if (!l)
        throw std::invalid_argument("SEKV layer " + std::to_string(layer) + ": " + file +
                                    " have no entry for it (trained for other layers; choose "
                                    "the training-free router or the layers they cover)");
    if (l->n_head != shape.n_head || l->head_dim != shape.head_dim)
        throw std::invalid_argument("SEKV layer " + std::to_string(layer) + ": " + file +
                                    " were trained for " + std::to_string(l->n_head) +
                                    " query heads of " + std::to_string(l->head_dim) +
                                    " dimensions, the layer has " + std::to_string(shape.n_head) +
                                    " of " + std::to_string(shape.head_dim));
    if (l->sketch_dim > 0 && l->n_kv_head != shape.n_kv_head)
        throw std::invalid_argument("SEKV layer " + std::to_string(layer) + ": " + file +
                                    " hold a sketch basis for " + std::to_string(l->n_kv_head) +
                                    " KV heads, the layer has " + std::to_string(shape.n_kv_head));
    o.router.trained = trained_router(*l);
    if (!options.trained_rank_gate)
        return o; // the energy gate of options.rank, as without router parameters
    o.rank.predictor = trained_rank_gate(*l);
    // The gate was trained on factors of at most gate.n_rank components and decides among
    // them: a lower max_rank would cut its choices, a higher one is never used.
    o.rank.max_rank = l->gate.n_rank;
    return o;
}

double sekv_span_rows(const SekvOptions& options) {
    double rows = 1.0;
    if (!options.router_params || options.summaries_only)
        return rows;
    for (const auto& l : options.router_params->layers)
        if (l.sketch_dim > 0 && l.head_dim > 0)
            rows = std::max(rows, 1.0 + static_cast<double>(sketch_length(l.sketch_dim)) /
                                            (2.0 * static_cast<double>(l.head_dim)));
    return rows;
}

SekvMemory::SekvMemory(const AttentionShape& shape, int64_t capacity, const RopeFrequencies& rope,
                       const SekvOptions& options)
    : shape_(shape), capacity_(capacity), rope_(rope), options_(options),
      rows_(static_cast<int64_t>(shape.n_kv_head) * shape.head_dim) {
    if (shape.window > 0)
        throw std::invalid_argument("sekv serves global-attention layers; a sliding-window layer "
                                    "keeps its exact ring buffer");
    check_router_options(options.router, shape);
}

void SekvMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    if (n_stored_ + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_stored_ + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    rows_.append(k, v, pos, n, spans_.empty() ? INT32_MIN : spans_.back().end() - 1);
    n_stored_ += n;
}

int64_t SekvMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                              std::vector<float>& v, std::vector<int32_t>& pos) const {
    check_rows_outside_spans(spans_, pos_begin, pos_end);
    return rows_.read(pos_begin, pos_end, k, v, pos);
}

void SekvMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                        ThreadPool& pool) {
    const int H = shape_.n_head, d = shape_.head_dim;
    last_zoom_.assign(static_cast<size_t>(H), ZoomHead{});
    if (n_q < 1)
        return;
    if (spans_.empty()) {
        attention_with_mass(shape_, q, qpos, n_q, rows_.k(), rows_.v(), rows_.positions().data(),
                            rows_.size(), out, pool, mass_sink());
        return;
    }
    if (qpos[0] < spans_.back().end())
        throw std::logic_error("sekv memory: a query at position " + std::to_string(qpos[0]) +
                               " precedes the end of a span held at two resolutions");
    const bool all = options_.router.expand_all && !options_.summaries_only;
    if (tau_.empty() && !all && !options_.summaries_only && !options_.router.tau_per_query)
        tau_ = calibrate_router(shape_, options_.router, spans_, q, n_q);
    const auto routing =
        route_queries(shape_, options_.router, options_.summaries_only, spans_, tau_, q, n_q, pool);
    const auto& used = routing.used;
    const int group = H / shape_.n_kv_head;
    const int64_t stride = static_cast<int64_t>(shape_.n_kv_head) * d;
    // The last query's attention mass per span and head, for its zoom (ZoomHead::mass).
    std::vector<std::vector<float>> last_mass(static_cast<size_t>(H),
                                              std::vector<float>(spans_.size(), 0.0f));
    // The sink's query (if in this ubatch): its mass per span and full row, per head.
    AttentionMass* sink = mass_sink();
    int64_t sink_at = -1;
    for (int64_t i = 0; sink && i < n_q; ++i)
        if (sink->wants(qpos[i]))
            sink_at = i;
    const int64_t sink_rows = sink_at >= 0 ? rows_.lower_bound(qpos[sink_at] + 1) : 0;
    std::vector<std::vector<float>> sink_span(sink_at >= 0 ? static_cast<size_t>(H) : 0,
                                              std::vector<float>(spans_.size(), 0.0f));
    std::vector<std::vector<float>> sink_row(sink_at >= 0 ? static_cast<size_t>(H) : 0,
                                             std::vector<float>(static_cast<size_t>(sink_rows)));
    pool.parallel_for(n_q * H, [&](int64_t b, int64_t e, int) {
        std::vector<SpanView> views(spans_.size());
        for (int64_t t = b; t < e; ++t) {
            const int64_t i = t / H;
            const int h = static_cast<int>(t % H);
            const int g = h / group;
            for (size_t s = 0; s < spans_.size(); ++s) {
                const auto& sp = spans_[s];
                const bool factors = !sp.k.empty();
                views[s] = SpanView{sp.size,
                                    sp.summary_k.data() + g * d,
                                    sp.summary_v.data() + g * d,
                                    factors ? &sp.k[g] : nullptr,
                                    factors ? &sp.v[g] : nullptr,
                                    false};
            }
            for (const int s : used[t])
                views[static_cast<size_t>(s)].expanded = true;
            const int64_t m = rows_.lower_bound(qpos[i] + 1); // the rows at or before qpos
            if (i == sink_at) {
                mixed_attention(q + t * d, d, shape_.scale, rows_.k() + g * d, rows_.v() + g * d, m,
                                stride, views, out + t * d,
                                sink_span[static_cast<size_t>(h)].data(),
                                sink_row[static_cast<size_t>(h)].data());
                if (i == n_q - 1)
                    last_mass[static_cast<size_t>(h)] = sink_span[static_cast<size_t>(h)];
            } else {
                mixed_attention(q + t * d, d, shape_.scale, rows_.k() + g * d, rows_.v() + g * d, m,
                                stride, views, out + t * d,
                                i == n_q - 1 ? last_mass[static_cast<size_t>(h)].data() : nullptr);
            }
        }
    });
    const auto& pos = rows_.positions();
    for (size_t h = 0; h < sink_span.size(); ++h) {
        for (size_t s = 0; s < spans_.size(); ++s)
            sink->add_range(spans_[s].begin, spans_[s].end(), sink_span[h][s]);
        for (int64_t j = 0; j < sink_rows; ++j)
            sink->add(pos[static_cast<size_t>(j)], sink_row[h][static_cast<size_t>(j)]);
    }
    last_zoom_ = last_query_zoom(routing, n_q, H);
    for (int h = 0; h < H; ++h) {
        auto& z = last_zoom_[static_cast<size_t>(h)];
        z.mass.clear();
        for (const int s : z.spans)
            z.mass.push_back(last_mass[static_cast<size_t>(h)][static_cast<size_t>(s)]);
    }
}

std::vector<SekvSpan> seal_spans(const RowStore& rows, const SealRequest& r,
                                 const AttentionShape& shape, const RopeFrequencies& rope,
                                 const SekvOptions& options) {
    if (!r.segmentation || (!r.token_surprisal && r.n > 0))
        throw std::invalid_argument("seal: no segmentation or surprisal");
    const int64_t row = static_cast<int64_t>(shape.n_kv_head) * shape.head_dim;
    SpanRankOptions rank = options.rank;
    rank.rope = rope;
    if (options.summaries_only)
        rank.max_rank = 1; // the caller drops the factors: build the smallest
    const auto* tr = options.router.trained.get();
    std::vector<SekvSpan> spans;
    spans.reserve(r.segmentation->spans.size());
    for (const auto& ts : r.segmentation->spans) {
        if (ts.begin < 0 || ts.end > r.n || ts.size() < 1)
            throw std::invalid_argument("seal: a span lies outside the sealed context");
        const int32_t p0 = r.pos_begin + static_cast<int32_t>(ts.begin);
        const auto& pos = rows.positions();
        const int64_t idx = rows.lower_bound(p0);
        if (idx + ts.size() > rows.size() ||
            pos[static_cast<size_t>(idx + ts.size() - 1)] != p0 + ts.size() - 1 ||
            pos[static_cast<size_t>(idx)] != p0)
            throw std::logic_error("seal: the rows of positions " + std::to_string(p0) + ".." +
                                   std::to_string(p0 + ts.size() - 1) +
                                   " are not all held at full resolution");
        // Equal weights give the plain mean (span_weights: s_i / Σ s).
        const std::vector<float> equal(options.uniform_summary ? ts.size() : 0, 1.0f);
        spans.push_back(
            build_span(rows.k() + idx * row, rows.v() + idx * row,
                       options.uniform_summary ? equal.data() : r.token_surprisal + ts.begin,
                       ts.size(), shape.n_kv_head, shape.head_dim, p0, rank));
        // A trained router's key sketch, from the exact rows as training computes it
        // (prepare_examples), before the rank gate's cut factors are all that is left.
        if (tr && tr->sketch_dim > 0 && !options.summaries_only)
            spans.back().sketch = span_key_sketch_rows(
                rows.k() + idx * row, ts.size(), shape.n_kv_head, spans.back().summary_k.data(),
                tr->sketch_basis, tr->sketch_dim, shape.head_dim);
    }
    return spans;
}

void SekvMemory::seal(const SealRequest& r) {
    hold(seal_spans(rows_, r, shape_, rope_, options_), 0, true);
    if (options_.summaries_only)
        for (auto& sp : spans_) {
            sp.k.clear();
            sp.v.clear();
        }
}

void check_spans(const std::vector<SekvSpan>& spans, const AttentionShape& shape) {
    const auto n_kv = static_cast<size_t>(shape.n_kv_head);
    const auto d = static_cast<int64_t>(shape.head_dim);
    for (size_t i = 0; i < spans.size(); ++i) {
        const auto& s = spans[i];
        bool ok = s.size >= 1 && s.k.size() == n_kv && s.v.size() == n_kv &&
                  s.summary_k.size() == n_kv * static_cast<size_t>(d) &&
                  s.summary_v.size() == n_kv * static_cast<size_t>(d) &&
                  (i == 0 || spans[i - 1].end() <= s.begin);
        for (size_t g = 0; ok && g < n_kv; ++g)
            for (const auto* f : {&s.k[g], &s.v[g]})
                ok = ok && factors_fit(*f, s.size, d);
        if (!ok)
            throw std::invalid_argument("sekv memory: span " + std::to_string(i) +
                                        " does not match the layer or overlaps the previous one");
    }
}

void check_rows_outside_spans(const std::vector<SekvSpan>& spans, int32_t pos_begin,
                              int32_t pos_end) {
    for (const auto& s : spans)
        if (s.begin < pos_end && s.end() > pos_begin)
            throw std::logic_error("sekv memory: positions " + std::to_string(s.begin) + ".." +
                                   std::to_string(s.end() - 1) +
                                   " are held at two resolutions, not as rows");
}

void drop_span_rows(RowStore& rows, const std::vector<SekvSpan>& spans) {
    std::vector<char> keep(static_cast<size_t>(rows.size()), 1);
    for (const auto& s : spans) {
        const int64_t b = rows.lower_bound(s.begin);
        const int64_t e = rows.lower_bound(s.end());
        if (e - b != s.size)
            throw std::invalid_argument("sekv memory: the rows of the span at position " +
                                        std::to_string(s.begin) + " are not all held");
        std::fill(keep.begin() + b, keep.begin() + e, 0);
    }
    rows.compact(keep);
}

void SekvMemory::hold_spans(std::vector<SekvSpan> spans, int32_t delta) {
    hold(std::move(spans), delta, false);
}

void set_span_sketches(std::vector<SekvSpan>& spans, const SekvRouterOptions& router, int head_dim,
                       bool sketched) {
    const auto* tr = router.trained.get();
    for (auto& s : spans) {
        if (!tr || tr->sketch_dim < 1) {
            s.sketch.clear(); // no router reads one: it would only count in the fast tier
            continue;
        }
        if (!sketched)
            s.sketch = span_key_sketch(s, tr->sketch_basis, tr->sketch_dim, head_dim);
        else if (s.sketch.size() != s.k.size() * static_cast<size_t>(sketch_length(tr->sketch_dim)))
            throw std::logic_error("sekv: a sealed span at position " + std::to_string(s.begin) +
                                   " lacks the key sketch of the router's basis");
    }
}

void SekvMemory::hold(std::vector<SekvSpan> spans, int32_t delta, bool sketched) {
    check_spans(spans, shape_);
    for (auto& s : spans)
        move_span(s, delta, rope_);
    set_span_sketches(spans, options_.router, shape_.head_dim, sketched);
    drop_span_rows(rows_, spans); // held at two resolutions from now on
    spans_.insert(spans_.end(), std::make_move_iterator(spans.begin()),
                  std::make_move_iterator(spans.end()));
    std::sort(spans_.begin(), spans_.end(),
              [](const SekvSpan& a, const SekvSpan& b) { return a.begin < b.begin; });
    tau_.clear();
}

MemoryStats SekvMemory::stats() const {
    MemoryStats s;
    s.rows_resident = rows_.size() + static_cast<int64_t>(spans_.size());
    s.fast_tier_bytes = rows_.bytes();
    for (const auto& sp : spans_) {
        s.fast_tier_bytes += span_fast_bytes(sp);
        s.host_tier_bytes += span_host_bytes(sp);
    }
    s.full_kv_bytes = n_stored_ * rows_.row_bytes();
    s.spans = static_cast<int64_t>(spans_.size());
    return s;
}

std::unique_ptr<LayerMemory> SekvMemory::clone() const {
    return std::make_unique<SekvMemory>(*this);
}

void SekvMemory::clear() {
    n_stored_ = 0;
    rows_.clear();
    spans_.clear();
    tau_.clear();
    last_zoom_.clear();
}

} // namespace spanscope
