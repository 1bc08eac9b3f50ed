// Small project-store states whose every value follows from its position: the unit tests' golden
// files (tests/unit) and the fuzz seeds (tests/fuzz/make_seeds.cpp) are written from them.
// Changing a value here changes both, and both are checked (the golden files by their tests, the
// seeds by regenerating them).
#pragma once

#include "storage/chunk_state.h"
#include "storage/sekv_state.h"
#include "storage/zoom_trace_blob.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spanscope::patterns {

/// n values sin(a + 0.37 i).
inline std::vector<float> ramp(int64_t n, float a) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        v[static_cast<size_t>(i)] = std::sin(a + 0.37f * static_cast<float>(i));
    return v;
}

/// One recurrent state per layer of `shapes`, each array a ramp; Gated DeltaNet layer 2 holds a
/// transition where `with_transition`.
inline std::vector<RecurrentLayerState>
recurrent_layers(const std::vector<RecurrentLayerShape>& shapes, bool with_transition) {
    std::vector<RecurrentLayerState> out;
    for (const auto& shape : shapes) {
        RecurrentLayerState r;
        r.layer = shape.layer;
        if (shape.mamba2) {
            Mamba2State m;
            m.ssm = ramp(shape.state, 1.0f);
            m.conv = ramp(shape.conv, 2.0f);
            m.log_decay = ramp(shape.decay, 3.0f);
            r.mamba2 = m;
        } else {
            GatedDeltaNetState g;
            g.s = ramp(shape.state, 4.0f + static_cast<float>(shape.layer));
            g.conv = ramp(shape.conv, 5.0f);
            if (with_transition && shape.layer == 2)
                g.transition = ramp(shape.transition, 6.0f);
            r.gated_deltanet = g;
        }
        out.push_back(r);
    }
    return out;
}

/// The options key of the SEKV pattern state.
inline const std::string kSekvPatternKey = "a1-m4-x32-r32-e0.999-b0.35-t128-l1.3";

/// What sekv_pattern_state(kSekvPatternKey, {1, 3}, 2, 4, ...) decodes against, for a model of
/// fingerprint `f`.
inline SekvExpectation sekv_pattern_expectation(const Fingerprint& f) {
    SekvExpectation e;
    e.fingerprint = f;
    e.options_key = kSekvPatternKey;
    e.n_tokens = 12;
    e.layers = {1, 3};
    e.n_kv_head = 2;
    e.head_dim = 4;
    return e;
}

/// A SEKV state of 12 tokens: anchors 0, 5, 11; spans [1, 5) and [6, 11); `n_kv` heads of dim
/// `d` in each of `layers`. `factors(rows, d, rank, phase)` makes each head's factors (rank 2
/// for K, 1 for V).
template <class Factors>
SekvUnitState sekv_pattern_state(const std::string& options_key, const std::vector<int>& layers,
                                 int n_kv, int d, Factors factors) {
    SekvUnitState s;
    s.options_key = options_key;
    s.n_tokens = 12;
    s.alpha = 1.25;
    s.segmentation.threshold = 4.5;
    s.segmentation.anchors = {0, 5, 11};
    s.segmentation.spans = {{1, 5}, {6, 11}};
    s.segmentation.full_resolution = {0, 5, 11};
    for (int i = 0; i < 12; ++i)
        s.token_surprisal.push_back(i == 0 ? NAN : 0.5f * static_cast<float>(i));
    s.anchor_chars = {-1, -1, 10, 14, 40, 45};
    s.span_chars = {0, 10, 14, 40};
    for (const int layer : layers) {
        SekvLayerState l;
        l.layer = layer;
        for (const auto& t : s.segmentation.spans) {
            SekvSpan sp;
            sp.begin = static_cast<int32_t>(t.begin);
            sp.size = t.size();
            for (int j = 0; j < n_kv * d; ++j) {
                sp.summary_k.push_back(0.125f * static_cast<float>(j + layer));
                sp.summary_v.push_back(-0.25f * static_cast<float>(j - layer));
            }
            for (int g = 0; g < n_kv; ++g) {
                sp.k.push_back(factors(t.size(), d, 2, static_cast<float>(layer + g)));
                sp.v.push_back(factors(t.size(), d, 1, static_cast<float>(layer - g)));
            }
            l.spans.push_back(std::move(sp));
        }
        s.layers.push_back(std::move(l));
    }
    return s;
}

/// A stored zoom trace of 3 steps over 7 spans from 2 sources, layers 1 and 3 with 2 heads each;
/// with_mass: layer 3's heads carry attention masses (format version 2), layer 1's none.
inline StoredZoomTrace zoom_trace_pattern(bool with_mass) {
    StoredZoomTrace t;
    t.trace.n_spans = 7;
    t.sources = {{4, 0, 0, 2, 0}, {9, 2, 2, 5, 12}};
    for (int step = 0; step < 3; ++step) {
        ZoomStep st;
        st.fast_tier_bytes = 1000 + step;
        st.host_tier_bytes = 2000 + step;
        for (const int layer : {1, 3}) {
            LayerZoom lz{layer, {}};
            for (int h = 0; h < 2; ++h) {
                lz.heads.push_back({{step, 6 - h}, {0.5f + 0.125f * h, 0.25f}, {}});
                if (with_mass && layer == 3)
                    lz.heads.back().mass = {0.375f, 0.0625f * static_cast<float>(h + step)};
            }
            st.layers.push_back(lz);
        }
        t.trace.steps.push_back(st);
        t.tokens.push_back(40 + step);
        t.token_texts.push_back(std::string("t") + static_cast<char>('a' + step));
    }
    return t;
}

} // namespace spanscope::patterns
