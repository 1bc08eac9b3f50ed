#include "answering/document_spans.h"

#include <cmath>

namespace spanscope {

UnitSpans unit_spans(const SekvUnitState& st, int64_t document_id, int unit) {
    UnitSpans out;
    out.document_id = document_id;
    out.unit = unit;
    const auto& seg = st.segmentation;
    for (size_t i = 0; i < seg.spans.size(); ++i) {
        SpanExtent s;
        s.char_begin = st.span_chars[2 * i];
        s.char_end = st.span_chars[2 * i + 1];
        s.tokens = seg.spans[i].size();
        if (!st.layers.empty()) {
            const auto& sp = st.layers.front().spans[i];
            double rank = 0;
            for (const auto& f : sp.k)
                rank += f.rank;
            s.rank = sp.k.empty() ? 0 : static_cast<int>(std::lround(rank / sp.k.size()));
            const size_t d = sp.k.empty() ? 0 : sp.summary_k.size() / sp.k.size();
            double n2 = 0;
            for (size_t j = 0; j < d; ++j)
                n2 += static_cast<double>(sp.summary_k[j]) * sp.summary_k[j];
            s.summary_norm = static_cast<float>(std::sqrt(n2));
        }
        out.spans.push_back(s);
    }
    for (size_t i = 0; i < seg.anchors.size(); ++i)
        out.anchors.emplace_back(st.anchor_chars[2 * i], st.anchor_chars[2 * i + 1]);
    return out;
}

std::vector<UnitSpans> document_sekv_spans(StateCache& cache, int64_t document_id,
                                           const SekvOptions& options) {
    std::vector<std::vector<int64_t>> ids;
    const auto units = cache.units(document_id, &ids);
    std::vector<UnitSpans> out;
    for (size_t u = 0; u < units.size(); ++u) {
        const auto states = cache.load_unit(units[u], ids[u]);
        const auto st = cache.sekv_state(units[u], ids[u], states, options);
        out.push_back(unit_spans(st, document_id, static_cast<int>(u)));
    }
    return out;
}

} // namespace spanscope
