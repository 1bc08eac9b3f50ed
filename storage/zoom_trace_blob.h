// The zoom trace of an answer as the project keeps it with the answer's message
// (docs/architecture.md, Storage): the trace (zoom_trace.h), where the context's spans came from
// (which document section, at which span ids), and the text of each generated token, so that a
// reopened chat can show which spans each answer token zoomed into.
//
// Format version 2: zlib-compressed stream of magic "SSZOOM\0\0", u32 version, i32 n_spans,
// u32 n_sources, per source (i64 document id, i32 unit, i32 first span, i32 spans,
// i64 position offset), u32 n_steps, per step (i32 token id, token text (u32 length + bytes),
// i64 fast-tier bytes, i64 host-tier bytes, u32 n_layers, per layer (u32 layer, u32 n_heads, per
// head (u32 n, i32 span ids [n], f32 relevances [n], u8 1 if attention masses follow, f32
// masses [n] then))), then XXH3-64 of everything before it. Version 1 (read as well) has no
// mass flag and no masses.
#pragma once

#include "engine/sekv/zoom_trace.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// The spans of one document section in an answer's context: ids [first_span,
/// first_span + n_spans) are that section's spans 0 .. n_spans - 1, in order.
struct ZoomSource {
    int64_t document_id = 0;
    int unit = 0;
    int first_span = 0, n_spans = 0;
    int64_t offset = 0; ///< position of the section's first token in the context
};

struct StoredZoomTrace {
    ZoomTrace trace;
    std::vector<ZoomSource> sources;
    std::vector<int32_t> tokens;          ///< [steps] generated token ids
    std::vector<std::string> token_texts; ///< [steps] each token's text (UTF-8 bytes)
};

/// Serialise and compress. Throws std::invalid_argument when tokens or texts do not match the
/// steps, or a head's masses are not one share in [0, 1] per span (clear_invalid_masses first
/// where they come from a computation that may have gone wrong).
std::vector<uint8_t> encode_zoom_trace(const StoredZoomTrace& t);

/// Empties the masses of every head whose masses are not one finite share in [0, 1] per span
/// (a NaN from an attention gone wrong), so that the trace can still be saved: its spans and
/// relevances stay, the mass reads as not measured. Returns the number of heads cleared.
int clear_invalid_masses(ZoomTrace& trace);

/// decode_zoom_trace's refusal of a blob: too short, an impossible declared size, not
/// decompressing, a checksum mismatch, or content that breaks the format (wrong magic or
/// version, a count past the bytes left, a span id outside the context, trailing bytes, ...).
/// Its message names the problem. Every other exception from decode_zoom_trace is a failure of
/// the process (std::bad_alloc), not of the blob.
class ZoomTraceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Decompress, parse and check (span ids inside n_spans, sizes, checksum).
/// Throws ZoomTraceError (a std::runtime_error) with a message that names the problem.
StoredZoomTrace decode_zoom_trace(const std::vector<uint8_t>& blob);

} // namespace spanscope
