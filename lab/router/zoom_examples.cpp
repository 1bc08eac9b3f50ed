#include "lab/router/zoom_examples.h"

#include "engine/sekv/span_sketch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope {

ZoomExampleSet prepare_examples(const ZoomRecord& record, const RouterParams& params,
                                int max_rank) {
    ZoomExampleSet set;
    set.record = &record;
    const SpanRankOptions rank{max_rank, 1.0, nullptr};
    for (const auto& rl : record.layers) {
        const auto* P = params.find(rl.layer);
        if (!P)
            throw std::invalid_argument(record.source + ": the parameters have no layer " +
                                        std::to_string(rl.layer));
        if (P->n_head != rl.n_head || P->head_dim != rl.head_dim)
            throw std::invalid_argument(record.source + ": layer " + std::to_string(rl.layer) +
                                        " has another shape than the parameters");
        ZoomExampleSet::Layer L;
        L.layer = rl.layer;
        L.n_head = rl.n_head;
        L.n_kv_head = rl.n_kv_head;
        L.head_dim = rl.head_dim;
        L.scale = rl.scale;
        L.rec = &rl;
        const int64_t row = static_cast<int64_t>(rl.n_kv_head) * rl.head_dim;
        for (const auto& ts : record.spans)
            L.spans.push_back(build_span(rl.k.data() + ts.begin * row, rl.v.data() + ts.begin * row,
                                         record.token_surprisal.data() + ts.begin, ts.size(),
                                         rl.n_kv_head, rl.head_dim, static_cast<int32_t>(ts.begin),
                                         rank));
        if (P->sketch_dim > 0) {
            if (P->n_kv_head != rl.n_kv_head)
                throw std::invalid_argument(record.source + ": layer " + std::to_string(rl.layer) +
                                            " has another number of KV heads than the "
                                            "parameters' sketch basis");
            for (size_t s = 0; s < L.spans.size(); ++s) { // from the rows, as seal_spans
                auto& sp = L.spans[s];
                sp.sketch = span_key_sketch_rows(rl.k.data() + record.spans[s].begin * row, sp.size,
                                                 rl.n_kv_head, sp.summary_k.data(), P->sketch,
                                                 P->sketch_dim, rl.head_dim);
            }
        }
        set.layers.push_back(std::move(L));
    }
    return set;
}

std::vector<ZoomExample> list_examples(const ZoomExampleSet& set) {
    std::vector<ZoomExample> out;
    const auto& R = *set.record;
    for (int l = 0; l < static_cast<int>(set.layers.size()); ++l)
        for (int64_t i = 0; i < R.n_queries(); ++i) {
            if (R.spans.empty() || !R.visible(i, 0))
                continue;
            for (int h = 0; h < set.layers[static_cast<size_t>(l)].n_head; ++h)
                out.push_back({l, i, h});
        }
    return out;
}

std::vector<char> zoom_labels(const float* mass, const std::vector<char>& visible,
                              double coverage) {
    std::vector<char> y(visible.size(), 0);
    std::vector<size_t> idx;
    double total = 0;
    for (size_t s = 0; s < visible.size(); ++s)
        if (visible[s]) {
            idx.push_back(s);
            total += std::max(0.0f, mass[s]);
        }
    if (!(total > 0))
        return y;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return mass[a] > mass[b]; });
    double acc = 0;
    for (const size_t s : idx) {
        if (acc >= coverage * total)
            break;
        y[s] = 1;
        acc += std::max(0.0f, mass[s]);
    }
    return y;
}

int64_t visible_span_count(const ZoomRecord& R, int64_t query) {
    int64_t n = 0;
    while (n < static_cast<int64_t>(R.spans.size()) && R.visible(query, static_cast<size_t>(n)))
        ++n;
    return n;
}

std::vector<int64_t> full_resolution_positions(const ZoomRecord& R, int64_t n_vis, int32_t qpos) {
    std::vector<int64_t> pos;
    int64_t next = 0;
    for (int64_t s = 0; s <= n_vis; ++s) {
        const int64_t stop =
            s < n_vis ? R.spans[static_cast<size_t>(s)].begin : static_cast<int64_t>(qpos) + 1;
        for (int64_t p = next; p < stop; ++p)
            pos.push_back(p);
        if (s < n_vis)
            next = R.spans[static_cast<size_t>(s)].end;
    }
    return pos;
}

} // namespace spanscope
