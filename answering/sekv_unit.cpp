#include "answering/sekv_unit.h"

#include "engine/kernels/fp16.h"
#include "engine/sekv/router_params.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace spanscope {

std::string sekv_options_key(const SekvOptions& o, const std::vector<int>& layers) {
    if (o.uniform_summary)
        throw std::invalid_argument("SEKV: the project store keeps the design's surprisal-weighted "
                                    "summary rows; uniform summaries are an evaluation setting");
    char buf[160];
    std::snprintf(buf, sizeof buf, "a%.4g-m%lld-x%lld-r%d-e%.6g-b%.4g-t%lld", o.segmentation.alpha,
                  static_cast<long long>(o.segmentation.min_span),
                  static_cast<long long>(o.segmentation.max_span), o.rank.max_rank, o.rank.energy,
                  o.budget > 0 && o.budget < 1 ? o.budget : 0.0,
                  static_cast<long long>(o.reserve_rows));
    std::string key = buf;
    // Right factors in Q8_0 (the default) carry it in the key; F16 states keep the key they had.
    if (o.rank.right_type != TensorType::F16)
        key += "-f" + std::string(traits(o.rank.right_type).name);
    key += "-l";
    for (size_t i = 0; i < layers.size(); ++i) {
        if (i > 0)
            key += '.';
        key += std::to_string(layers[i]);
    }
    // The trained rank gates keep other ranks than the energy gate: spans they built are kept
    // under their own key (the training-free key is unchanged, so stored states stay valid).
    if (o.router_params && o.trained_rank_gate)
        key += "-g" + o.router_params->rank_gate_digest();
    // A key sketch makes each span cost more of the budget, so the segmentation is coarser:
    // those states have their own key (without a sketch the key is unchanged).
    if (const double span_rows = sekv_span_rows(o); span_rows > 1.0) {
        char rows[32];
        std::snprintf(rows, sizeof rows, "-s%.6g", span_rows);
        key += rows;
    } else if (o.rank.predictor)
        throw std::invalid_argument("SEKV: spans built by a rank gate that is not from a zoom "
                                    "parameter file cannot be keyed for the project store");
    return key;
}

SekvUnitState build_sekv_unit(const DocumentUnit& unit, const UnitStates& states,
                              const ModelInfo& info, const SekvOptions& options) {
    const int64_t n = unit.n_tokens();
    if (states.rows.size() != unit.chunks.size() || n < 1)
        throw std::invalid_argument("SEKV: the unit's chunk states are incomplete");
    // Per-row surprisal and each token's byte offset, over the whole unit.
    std::vector<float> row_surprisal;
    std::vector<int64_t> token_chars;
    for (size_t c = 0; c < unit.chunks.size(); ++c) {
        const auto& s = states.rows[c].surprisal;
        row_surprisal.insert(row_surprisal.end(), s.begin(), s.end());
        const auto& tc = unit.chunks[c].token_chars;
        token_chars.insert(token_chars.end(), tc.begin(), tc.end());
    }
    if (static_cast<int64_t>(row_surprisal.size()) != n ||
        static_cast<int64_t>(token_chars.size()) != n)
        throw std::invalid_argument("SEKV: the unit's surprisal or offsets do not cover it");
    SekvUnitState st;
    const auto layers = sekv_layers(info, options);
    st.options_key = sekv_options_key(options, layers);
    st.n_tokens = n;
    st.token_surprisal = token_surprisals(row_surprisal.data(), n);
    st.segmentation =
        segment_within_budget(st.token_surprisal.data(), n, options.segmentation, options.budget,
                              options.reserve_rows, &st.alpha, nullptr, sekv_span_rows(options));
    const auto& seg = st.segmentation;
    // Byte range of tokens [b, e): from the first document byte in it to the next one after.
    auto char_range = [&](int64_t b, int64_t e) {
        int64_t cb = -1;
        for (int64_t i = b; i < e && cb < 0; ++i)
            cb = token_chars[static_cast<size_t>(i)];
        int64_t ce = -1;
        for (int64_t i = e; i < n && ce < 0; ++i)
            ce = token_chars[static_cast<size_t>(i)];
        if (cb < 0)
            return std::pair<int64_t, int64_t>{-1, -1};
        return std::pair<int64_t, int64_t>{cb, ce < 0 ? unit.char_end : ce};
    };
    for (const auto& t : seg.spans) {
        const auto [b, e] = char_range(t.begin, t.end);
        st.span_chars.push_back(b);
        st.span_chars.push_back(e);
    }
    for (const auto a : seg.anchors) {
        const auto [b, e] = char_range(a, a + 1);
        st.anchor_chars.push_back(b);
        st.anchor_chars.push_back(e);
    }
    // Each SEKV layer's rows over the unit (fp32 from the stored f16), then its spans.
    for (const int il : layers) {
        const auto& shape = info.layers[static_cast<size_t>(il)].attn;
        const int64_t row = static_cast<int64_t>(shape.n_kv_head) * shape.head_dim;
        std::vector<float> k(static_cast<size_t>(n * row)), v(k.size());
        int64_t at = 0;
        for (const auto& chunk : states.rows) {
            const LayerRows* lr = nullptr;
            for (const auto& l : chunk.layers)
                if (l.layer == il)
                    lr = &l;
            if (!lr || lr->n_rows * row != static_cast<int64_t>(lr->k.size()) ||
                lr->n_rows * row != static_cast<int64_t>(lr->v.size()) || at + lr->n_rows > n)
                throw std::invalid_argument("SEKV: a chunk state lacks layer " +
                                            std::to_string(il));
            for (int64_t i = 0; i < lr->n_rows * row; ++i) {
                k[static_cast<size_t>(at * row + i)] = fp16_to_fp32(lr->k[static_cast<size_t>(i)]);
                v[static_cast<size_t>(at * row + i)] = fp16_to_fp32(lr->v[static_cast<size_t>(i)]);
            }
            at += lr->n_rows;
        }
        if (at != n)
            throw std::invalid_argument("SEKV: the chunk states hold " + std::to_string(at) +
                                        " rows of layer " + std::to_string(il) + ", the unit has " +
                                        std::to_string(n) + " tokens");
        SekvLayerState ls;
        ls.layer = il;
        // This layer's rank gate: the trained one when options.router_params holds it and
        // options.trained_rank_gate is on, else the energy gate.
        const auto rank = sekv_layer_options(options, il, shape).rank;
        for (const auto& t : seg.spans)
            ls.spans.push_back(build_span(k.data() + t.begin * row, v.data() + t.begin * row,
                                          st.token_surprisal.data() + t.begin, t.size(),
                                          shape.n_kv_head, shape.head_dim,
                                          static_cast<int32_t>(t.begin), rank));
        st.layers.push_back(std::move(ls));
    }
    return st;
}

int64_t hold_sekv_unit(Session& session, const SekvUnitState& state, int64_t offset) {
    auto& memory = session.memory();
    const auto sealing = memory.sealing_layers();
    if (sealing.size() != state.layers.size())
        throw std::invalid_argument("SEKV: the session's SEKV layers differ from the state's");
    for (size_t i = 0; i < sealing.size(); ++i) {
        auto* m = dynamic_cast<SekvMemory*>(&memory.layer(sealing[i]));
        if (!m || state.layers[i].layer != sealing[i])
            throw std::invalid_argument("SEKV: the session's SEKV layers differ from the state's");
        m->hold_spans(state.layers[i].spans, static_cast<int32_t>(offset));
    }
    return static_cast<int64_t>(state.segmentation.spans.size());
}

std::vector<SekvLayerBytes> sekv_layer_bytes(const SekvUnitState& state) {
    std::vector<SekvLayerBytes> out;
    for (const auto& l : state.layers) {
        SekvLayerBytes b{l.layer, 0, 0};
        for (const auto& s : l.spans) {
            b.fast += span_fast_bytes(s);
            b.host += span_host_bytes(s);
        }
        out.push_back(b);
    }
    return out;
}

} // namespace spanscope
