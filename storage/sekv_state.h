// The SEKV state of one unit (a document section prefilled from position 0), as the project
// keeps it beside the unit's chunk states (docs/sekv.md, §4): the segmentation with the
// character ranges of its spans and anchors, each token's surprisal, and per SEKV layer every
// span's summary rows and factors, keys rotated at unit-local positions (moved on restore).
//
// Format version 2 (version 1 held fp32 summaries and factors; such a state is refused and
// rebuilt from the chunk states), little-endian: magic "SSSEKV\0\0", u32 version, 16-byte model
// fingerprint, the options key (u32 length + bytes), i64 n_tokens, f64 α used, f64 threshold, u32
// n_kv_head, u32 head_dim, f32 token surprisal [n_tokens], u32 n_anchors, i64 anchors [n_anchors],
// i64 anchor character ranges [n_anchors][2], u32 n_spans, i64 spans [n_spans][2] (token begin,
// end), i64 span character ranges [n_spans][2], u32 n_layers; per layer u32 layer index and per
// span: f16 summary K and V [n_kv_head][head_dim], then per KV head the key factors and the value
// factors, each u32 rank, u32 right type (GGUF's: 1 F16, 8 Q8_0), f16 left [size][rank], right
// [rank] rows of head_dim entries in that type; then XXH3-64 of everything before it.
#pragma once

#include "engine/sekv/sekv_spans.h"
#include "storage/chunk_state.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {

struct SekvLayerState {
    int layer = 0;
    std::vector<SekvSpan> spans; ///< one per segmentation span, unit-local positions
};

struct SekvUnitState {
    std::string options_key; ///< segmentation, rank and budget options the state was built with
    int64_t n_tokens = 0;
    double alpha = 0;
    Segmentation segmentation;                     ///< unit-local positions
    std::vector<float> token_surprisal;            ///< [n_tokens] nats (NaN for the first)
    std::vector<int64_t> span_chars, anchor_chars; ///< [spans][2], [anchors][2]: byte ranges of
                                                   ///< the document text; -1 for header tokens
    std::vector<SekvLayerState> layers;
};

/// What a reader requires of a SEKV state before using it.
struct SekvExpectation {
    Fingerprint fingerprint{};
    std::string options_key;
    int64_t n_tokens = 0;
    std::vector<int> layers;
    int n_kv_head = 0, head_dim = 0;
};

/// Serialise. Throws std::invalid_argument when the spans do not match the segmentation.
std::vector<uint8_t> encode_sekv_state(const SekvUnitState& s, const Fingerprint& fingerprint);

/// Parse and check everything (sizes, ranges, ranks, checksum, the expectation).
/// Throws StateError naming the first mismatch.
SekvUnitState decode_sekv_state(const uint8_t* data, size_t size, const SekvExpectation& expect);

} // namespace spanscope
