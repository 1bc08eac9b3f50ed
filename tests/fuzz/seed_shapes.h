// The shapes of the project-store blobs in the committed seed corpora (make_seeds.cpp writes
// them) and the fixed expectations the fuzz targets decode against in their fixed mode, so that
// an unmutated seed decodes there. Also the input's mode byte, the XXH3 re-sealing and the
// decoding of an input that the targets share.
#pragma once

#include "storage/chunk_state.h"
#include "storage/sekv_state.h"
#include "tests/state_patterns.h"

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace spanscope::fuzz {

// Every target reads its first input byte as a mode and the rest as the blob (or file).
// Bit 0: re-seal the blob's checksums before decoding, so mutations reach the field checks.
// Bit 1: derive the expectation from the blob's own header (bounded), else the fixed one below.
constexpr uint8_t kReseal = 1, kDerive = 2;

inline Fingerprint seed_fingerprint() {
    Fingerprint f{};
    for (size_t i = 0; i < f.size(); ++i)
        f[i] = static_cast<uint8_t>(0xA0 + i);
    return f;
}

inline std::vector<int32_t> seed_token_ids() {
    return {2, 17, 42};
}

// Attention rows and sliding tails: layers {1, 3}, 3 rows from position 5, 2 KV heads of dim 4.
inline StateExpectation attention_expectation(StateKind kind) {
    StateExpectation e;
    e.kind = kind;
    e.fingerprint = seed_fingerprint();
    e.token_hash = token_ids_hash(seed_token_ids());
    e.pos_begin = 5;
    e.n_rows = 3;
    e.layers = {1, 3};
    e.n_kv_head = 2;
    e.head_dim = 4;
    return e;
}

// A small hybrid model: layer 0 Mamba-2, layer 1 attention, layers 2 and 3 Gated DeltaNet.
inline ModelInfo seed_hybrid_info() {
    ModelInfo info;
    info.n_layer = 4;
    info.layers.resize(4);
    auto& m = info.layers[0].mamba2;
    info.layers[0].kind = LayerKind::Mamba2;
    m.d_model = 8;
    m.n_heads = 2;
    m.head_dim = 3;
    m.d_inner = 6;
    m.d_state = 4;
    m.n_groups = 1;
    m.d_conv = 4;
    for (const size_t il : {2u, 3u}) {
        auto& g = info.layers[il].gated_deltanet;
        info.layers[il].kind = LayerKind::GatedDeltaNet;
        g.d_model = 8;
        g.n_k_heads = 1;
        g.n_v_heads = 2;
        g.d_k = 3;
        g.d_v = 2;
        g.d_conv = 3;
    }
    return info;
}

// Recurrent states of that model's unit, standing for 40 tokens.
inline StateExpectation recurrent_expectation() {
    StateExpectation e;
    e.kind = StateKind::RecurrentStates;
    e.fingerprint = seed_fingerprint();
    e.token_hash = token_ids_hash(seed_token_ids());
    e.n_rows = 40;
    e.recurrent = recurrent_layer_shapes(seed_hybrid_info());
    return e;
}

// SEKV state: 12 tokens, layers {1, 3}, 2 KV heads of dim 4.
inline SekvExpectation sekv_expectation() {
    return patterns::sekv_pattern_expectation(seed_fingerprint());
}

// The router parameters' model fingerprint (fingerprint_hex of seed_fingerprint()).
inline std::string seed_fingerprint_hex() {
    return fingerprint_hex(seed_fingerprint());
}

/// Re-seal a chunk state blob (chunk_state.h): the payload checksum over every byte after the
/// 96-byte header, then the header checksum. Shorter blobs are left as they are.
inline void reseal_chunk_state(std::vector<uint8_t>& b) {
    if (b.size() < kChunkStateHeaderBytes)
        return;
    const uint64_t payload =
        XXH3_64bits(b.data() + kChunkStateHeaderBytes, b.size() - kChunkStateHeaderBytes);
    std::memcpy(b.data() + 80, &payload, 8);
    const uint64_t header = XXH3_64bits(b.data(), 88);
    std::memcpy(b.data() + 88, &header, 8);
}

/// Re-seal a blob whose last 8 bytes are the XXH3-64 of everything before them.
inline void reseal_trailer(std::vector<uint8_t>& b) {
    if (b.size() < 8)
        return;
    const uint64_t h = XXH3_64bits(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &h, 8);
}

template <class T> T load(const std::vector<uint8_t>& b, size_t at) {
    T v{};
    if (at + sizeof v <= b.size())
        std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

/// A target's input as the reader accepted it: the blob after the mode byte (re-sealed where the
/// mode asked), the expectation it was decoded against and the state decoded.
template <class State, class Expectation> struct DecodedInput {
    std::vector<uint8_t> blob;
    Expectation expected;
    State state;
};

/// Splits `data` into its mode byte and blob, re-seals the blob with `reseal` where the mode has
/// kReseal, takes the expectation from the blob with `derive` where it has kDerive (else
/// `fixed(mode)`) and decodes the blob with `decode`. Nothing for an empty input or a blob the
/// reader refuses with StateError, the expected outcome for most inputs.
template <class State, class Expectation, class Fixed>
std::optional<DecodedInput<State, Expectation>>
decode_input(const uint8_t* data, size_t size, void (*reseal)(std::vector<uint8_t>&),
             Expectation (*derive)(const std::vector<uint8_t>&), Fixed fixed,
             State (*decode)(const uint8_t*, size_t, const Expectation&)) {
    if (size < 1)
        return std::nullopt;
    const uint8_t mode = data[0];
    DecodedInput<State, Expectation> in{{data + 1, data + size}, {}, {}};
    if (mode & kReseal)
        reseal(in.blob);
    in.expected = (mode & kDerive) ? derive(in.blob) : fixed(mode);
    try {
        in.state = decode(in.blob.data(), in.blob.size(), in.expected);
    } catch (const StateError&) {
        return std::nullopt;
    }
    return in;
}

} // namespace spanscope::fuzz
