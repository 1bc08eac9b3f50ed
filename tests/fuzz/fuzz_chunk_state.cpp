// libFuzzer target for the chunk state reader, kinds 1 (attention rows) and 2 (sliding tail):
// decode_chunk_state() on any bytes either returns a state of exactly the expected shape or
// throws StateError — never crashes, reads out of bounds, allocates for a forged count, or
// throws anything else.
//
// Input: a mode byte (seed_shapes.h), then the blob. kReseal recomputes both XXH3 checksums
// first, so mutated fields reach the shape checks; kDerive takes the expectation from the blob's
// own header and layer index (bounded to realistic models: <= 512 layers, <= 256 KV heads of
// <= 1024 dims), so a mutated blob gets through them into the payload; otherwise the fixed
// expectation of the seeds, its kind chosen by mode bit 2. Build and run: docs/fuzzing.md.
#include "seed_shapes.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace spanscope;
using namespace spanscope::fuzz;

namespace {

StateExpectation derived_expectation(const std::vector<uint8_t>& b) {
    StateExpectation e;
    e.kind = load<uint32_t>(b, 32) == 2 ? StateKind::SlidingTail : StateKind::AttentionRows;
    if (b.size() >= 32)
        std::memcpy(e.fingerprint.data(), b.data() + 16, 16);
    const auto n_layers = load<uint32_t>(b, 40), n_kv = load<uint32_t>(b, 44),
               dim = load<uint32_t>(b, 48);
    e.n_kv_head = n_kv <= 256 ? static_cast<int>(n_kv) : 2;
    e.head_dim = dim <= 1024 ? static_cast<int>(dim) : 4;
    e.pos_begin = load<int32_t>(b, 52);
    e.n_rows = load<uint32_t>(b, 56);
    e.token_hash = load<uint64_t>(b, 64);
    for (uint32_t i = 0; i < n_layers && i < 512; ++i)
        e.layers.push_back(static_cast<int>(load<uint32_t>(b, kChunkStateHeaderBytes + 4 * i)));
    return e;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = decode_input(
        data, size, reseal_chunk_state, derived_expectation,
        [](uint8_t mode) {
            return attention_expectation((mode & 4) ? StateKind::SlidingTail
                                                    : StateKind::AttentionRows);
        },
        decode_chunk_state);
    if (!in)
        return 0; // empty or refused: the expected outcome for most inputs
    const auto& [blob, e, s] = *in;
    // What the reader promises: the expectation's shape, every layer in order.
    const auto per_matrix = static_cast<size_t>(e.n_rows) * e.n_kv_head * e.head_dim;
    if (s.kind != e.kind || s.fingerprint != e.fingerprint || s.token_hash != e.token_hash ||
        s.pos_begin != e.pos_begin || s.n_rows != e.n_rows || s.n_kv_head != e.n_kv_head ||
        s.head_dim != e.head_dim || s.layers.size() != e.layers.size() || !s.recurrent.empty())
        __builtin_trap();
    if (s.surprisal.size() !=
        (e.kind == StateKind::AttentionRows ? static_cast<size_t>(e.n_rows) : 0))
        __builtin_trap();
    // Touch every value so that a wrong length shows under AddressSanitizer here.
    volatile uint32_t sink = 0;
    volatile float fsink = 0;
    for (size_t i = 0; i < s.layers.size(); ++i) {
        const auto& l = s.layers[i];
        if (l.layer != e.layers[i] || l.pos_begin != e.pos_begin || l.n_rows != e.n_rows ||
            l.k.size() != per_matrix || l.v.size() != per_matrix)
            __builtin_trap();
        for (size_t j = 0; j < per_matrix; ++j)
            sink = sink + l.k[j] + l.v[j];
    }
    for (const float x : s.surprisal)
        fsink = fsink + x;
    // A state the reader accepts is one the writer writes again, to the same size.
    if (encode_chunk_state(s).size() != blob.size())
        __builtin_trap();
    return 0;
}
