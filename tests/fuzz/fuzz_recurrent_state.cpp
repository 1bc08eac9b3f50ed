// libFuzzer target for the chunk state reader, kind 3 (recurrent states of a hybrid model):
// decode_chunk_state() on any bytes either returns one state per expected recurrent layer, each
// array of exactly the expected size, or throws StateError — never crashes, reads out of bounds,
// allocates for a forged count, or throws anything else.
//
// Input: a mode byte (seed_shapes.h), then the blob. kReseal recomputes both XXH3 checksums
// first, so mutated fields reach the record checks; kDerive takes the expected layer shapes from
// the blob's own layer index and records (at most 64 layers, counts as written), so a mutated
// blob gets through them to the payload's sizes; otherwise the seeds' model (seed_shapes.h).
// Build and run: docs/fuzzing.md.
#include "seed_shapes.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace spanscope;
using namespace spanscope::fuzz;

namespace {

StateExpectation derived_expectation(const std::vector<uint8_t>& b) {
    StateExpectation e;
    e.kind = StateKind::RecurrentStates;
    if (b.size() >= 32)
        std::memcpy(e.fingerprint.data(), b.data() + 16, 16);
    e.n_rows = load<uint32_t>(b, 56);
    e.token_hash = load<uint64_t>(b, 64);
    const uint32_t n_layers = std::min<uint32_t>(load<uint32_t>(b, 40), 64);
    const size_t records = kChunkStateHeaderBytes + (n_layers * size_t{4} + 7) / 8 * 8;
    for (uint32_t i = 0; i < n_layers; ++i) {
        const size_t rec = records + 24 * size_t{i};
        RecurrentLayerShape r;
        r.layer = static_cast<int>(load<uint32_t>(b, kChunkStateHeaderBytes + 4 * i));
        r.mamba2 = load<uint32_t>(b, rec) != 2;
        r.state = load<uint32_t>(b, rec + 4);
        r.conv = load<uint32_t>(b, rec + 8);
        // As a model's shapes are: decay for Mamba-2 only, a transition for Gated DeltaNet only.
        r.decay = r.mamba2 ? load<uint32_t>(b, rec + 12) : 0;
        r.transition = r.mamba2 ? 0 : load<uint32_t>(b, rec + 16);
        e.recurrent.push_back(r);
    }
    return e;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = decode_input(
        data, size, reseal_chunk_state, derived_expectation,
        [](uint8_t) { return recurrent_expectation(); }, decode_chunk_state);
    if (!in)
        return 0; // empty or refused: the expected outcome for most inputs
    const auto& [blob, e, s] = *in;
    // What the reader promises: one state per expected layer, of that layer's kind and sizes.
    if (s.kind != StateKind::RecurrentStates || s.fingerprint != e.fingerprint ||
        s.token_hash != e.token_hash || s.n_rows != e.n_rows || !s.layers.empty() ||
        !s.surprisal.empty() || s.recurrent.size() != e.recurrent.size())
        __builtin_trap();
    volatile float fsink = 0;
    auto touch = [&](const std::vector<float>& v, int64_t want) {
        if (static_cast<int64_t>(v.size()) != want)
            __builtin_trap();
        for (const float x : v)
            fsink = fsink + x;
    };
    for (size_t i = 0; i < s.recurrent.size(); ++i) {
        const auto& r = s.recurrent[i];
        const auto& want = e.recurrent[i];
        if (r.layer != want.layer || r.mamba2.has_value() != want.mamba2 ||
            r.gated_deltanet.has_value() == want.mamba2)
            __builtin_trap();
        if (r.mamba2) {
            touch(r.mamba2->ssm, want.state);
            touch(r.mamba2->conv, want.conv);
            touch(r.mamba2->log_decay, want.decay);
        } else {
            const auto& g = *r.gated_deltanet;
            touch(g.s, want.state);
            touch(g.conv, want.conv);
            touch(g.transition, g.transition.empty() ? 0 : want.transition);
        }
    }
    // A state the reader accepts is one the writer writes again, to the same size.
    if (encode_chunk_state(s).size() != blob.size())
        __builtin_trap();
    return 0;
}
