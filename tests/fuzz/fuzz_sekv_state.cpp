// libFuzzer target for the SEKV state reader: decode_sekv_state() on any bytes either returns a
// state that matches the expectation and its own segmentation (every size, range and rank
// consistent) or throws StateError — never crashes, reads out of bounds, allocates for a forged
// count, or throws anything else.
//
// Input: a mode byte (seed_shapes.h), then the blob. kReseal recomputes the trailing XXH3 first,
// so mutated fields reach the checks; kDerive takes the expectation from the blob itself
// (fingerprint, options key, token count <= 2^24, heads <= 256 of dims <= 1024, and each layer's
// index found by walking the stream, at most 64 layers), so a mutated blob gets into the spans'
// summaries and factors; otherwise the seeds' expectation. A state the reader accepts must be
// one the writer writes back byte for byte. Build and run: docs/fuzzing.md.
#include "seed_shapes.h"

#include "engine/kernels/tensor_type.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace spanscope;
using namespace spanscope::fuzz;

namespace {

// A forward reader over the blob that stops (ok = false) where the bytes end.
struct Cursor {
    const std::vector<uint8_t>& b;
    size_t at = 0;
    bool ok = true;
    bool skip(uint64_t n) {
        if (!ok || n > b.size() - at)
            return ok = false;
        at += static_cast<size_t>(n);
        return true;
    }
    template <class T> T get() {
        T v{};
        if (skip(sizeof v))
            std::memcpy(&v, b.data() + at - sizeof v, sizeof v);
        return v;
    }
};

SekvExpectation derived_expectation(const std::vector<uint8_t>& b) {
    SekvExpectation e = sekv_expectation();
    Cursor c{b};
    c.skip(12);
    if (c.skip(16))
        std::memcpy(e.fingerprint.data(), b.data() + c.at - 16, 16);
    const auto key_len = c.get<uint32_t>();
    if (c.skip(key_len))
        e.options_key.assign(reinterpret_cast<const char*>(b.data()) + c.at - key_len, key_len);
    const auto n_tokens = c.get<int64_t>();
    if (n_tokens >= 0 && n_tokens <= (int64_t{1} << 24))
        e.n_tokens = n_tokens;
    c.skip(16); // alpha, threshold
    const auto n_kv = c.get<uint32_t>(), d = c.get<uint32_t>();
    if (n_kv <= 256 && d <= 1024) {
        e.n_kv_head = static_cast<int>(n_kv);
        e.head_dim = static_cast<int>(d);
    }
    c.skip(4 * static_cast<uint64_t>(e.n_tokens));
    c.skip(3 * 8 * uint64_t{c.get<uint32_t>()}); // anchors and their character ranges
    const auto n_spans = c.get<uint32_t>();
    std::vector<int64_t> sizes;
    for (uint32_t i = 0; c.ok && i < n_spans; ++i) {
        const auto begin = c.get<uint64_t>(), end = c.get<uint64_t>();
        sizes.push_back(static_cast<int64_t>(end - begin)); // (any two values: no overflow)
    }
    c.skip(2 * 8 * uint64_t{n_spans}); // span character ranges
    const auto n_layers = std::min<uint32_t>(c.get<uint32_t>(), 64);
    e.layers.assign(n_layers, 0);
    const uint64_t summary = 2 * 2 * uint64_t{n_kv} * d;
    for (uint32_t l = 0; c.ok && l < n_layers; ++l) {
        e.layers[l] = static_cast<int>(c.get<uint32_t>());
        for (size_t i = 0; c.ok && i < sizes.size(); ++i) {
            c.skip(summary);
            for (uint64_t f = 0; c.ok && f < 2 * uint64_t{n_kv}; ++f) {
                const auto rank = c.get<uint32_t>(), type = c.get<uint32_t>();
                const uint64_t row = type == static_cast<uint32_t>(TensorType::Q8_0)
                                         ? uint64_t{d} / 32 * 34
                                         : 2 * uint64_t{d};
                if (sizes[i] < 0 || sizes[i] > (int64_t{1} << 24))
                    c.ok = false;
                c.skip(2 * rank * static_cast<uint64_t>(sizes[i]) + rank * row);
            }
        }
    }
    return e;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = decode_input(
        data, size, reseal_trailer, derived_expectation, [](uint8_t) { return sekv_expectation(); },
        decode_sekv_state);
    if (!in)
        return 0; // empty or refused: the expected outcome for most inputs
    const auto& [blob, e, s] = *in;
    const auto& seg = s.segmentation;
    const auto n_heads = static_cast<size_t>(e.n_kv_head);
    const auto summary = n_heads * static_cast<size_t>(e.head_dim);
    if (s.options_key != e.options_key || s.n_tokens != e.n_tokens ||
        s.token_surprisal.size() != static_cast<size_t>(e.n_tokens) ||
        s.anchor_chars.size() != 2 * seg.anchors.size() ||
        s.span_chars.size() != 2 * seg.spans.size() || s.layers.size() != e.layers.size())
        __builtin_trap();
    // Spans ascend inside the tokens; every other token is held at full resolution.
    int64_t prev = 0, covered = 0;
    for (const auto& t : seg.spans) {
        if (t.begin < prev || t.end <= t.begin || t.end > s.n_tokens)
            __builtin_trap();
        prev = t.end;
        covered += t.size();
    }
    if (covered + static_cast<int64_t>(seg.full_resolution.size()) != s.n_tokens)
        __builtin_trap();
    for (const auto a : seg.anchors)
        if (a < 0 || a >= s.n_tokens)
            __builtin_trap();
    volatile uint32_t sink = 0;
    volatile float fsink = 0;
    for (const float x : s.token_surprisal)
        fsink = fsink + x;
    for (size_t l = 0; l < s.layers.size(); ++l) {
        const auto& ls = s.layers[l];
        if (ls.layer != e.layers[l] || ls.spans.size() != seg.spans.size())
            __builtin_trap();
        for (size_t i = 0; i < ls.spans.size(); ++i) {
            const auto& sp = ls.spans[i];
            if (sp.begin != seg.spans[i].begin || sp.size != seg.spans[i].size() ||
                sp.summary_k.size() != summary || sp.summary_v.size() != summary ||
                sp.k.size() != n_heads || sp.v.size() != n_heads)
                __builtin_trap();
            for (size_t j = 0; j < summary; ++j)
                fsink = fsink + sp.summary_k[j] + sp.summary_v[j];
            for (size_t g = 0; g < n_heads; ++g)
                for (const auto* f : {&sp.k[g], &sp.v[g]}) {
                    if (!factors_fit(*f, sp.size, e.head_dim))
                        __builtin_trap();
                    for (const auto x : f->left)
                        sink = sink + x;
                    for (const auto x : f->right)
                        sink = sink + x;
                }
        }
    }
    // Written back, it is the same blob (the header's head shape is taken from the first span,
    // so only where there is one).
    const auto again = encode_sekv_state(s, e.fingerprint);
    if (!s.layers.empty() && !seg.spans.empty() && n_heads > 0 && again != blob)
        __builtin_trap();
    return 0;
}
