// Recordings for SEKV's trained zoom-in (issue 8): what the frozen model does with full
// attention on a real document, at mined query positions, in each SEKV layer. One file per
// document (GGUF, keys spanscope.zoom_record.*): the document's segmentation and the layer's
// key/value rows, and per recorded query and query head the query, the full-attention output
// and the teacher's attention mass on each span. Training (zoom_train.h) reads nothing else.
//
// What a recorded query sees, as SEKV would hold the document: the spans that end at least
// `tail` tokens before the query position are held at two resolutions (visible spans); every
// other row up to the query position (anchors, short runs, the spans too close to the query,
// and the tail) stays at full resolution. Spans at or after that bound do not exist for the
// query.
#pragma once

#include "engine/sekv/segmentation.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// One SEKV layer of a recorded document.
struct ZoomRecordLayer {
    int layer = 0;      ///< the model's layer index
    int n_head = 0;     ///< query heads
    int n_kv_head = 0;  ///< key/value heads
    int head_dim = 0;   ///< d
    float scale = 1.0f; ///< the layer's attention scale (multiplies q·k)
    double rope_base = 0;
    std::vector<float> k, v; ///< [n_tokens][n_kv_head][head_dim], f16-rounded as the cache holds
                             ///< them; keys rotated at positions 0..n_tokens-1
    std::vector<float> q;    ///< [n_queries][n_head][head_dim], rotated at the query positions
    std::vector<float> out;  ///< [n_queries][n_head][head_dim]: full attention's output
    /// [n_queries][n_head][n_spans]: the teacher's (full attention's) probability mass on each
    /// span's rows; 0 for a span the query does not see (see above). Sums with the mass on the
    /// full-resolution rows to 1.
    std::vector<float> span_mass;
};

/// A recorded document.
struct ZoomRecord {
    static constexpr uint32_t kVersion = 1;
    // Provenance.
    std::string source;            ///< the document's path
    std::string model_fingerprint; ///< fingerprint_hex of the model recorded
    std::string command;           ///< the recording command line
    std::string commit;            ///< the source commit of the recorder
    /// The recorder's settings that decide the contents besides the model and the document
    /// (zoom_recorder.h zoom_record_settings_key), e.g. "max_tokens=4096 queries=32 ...": a
    /// resumed recording compares it (a recording made otherwise is refused, not mixed in).
    std::string settings;
    // The document, at positions 0..n_tokens-1 (BOS at 0).
    std::vector<int32_t> tokens;         ///< [n_tokens]
    std::vector<float> token_surprisal;  ///< [n_tokens], each token's own (nats; NaN at 0)
    std::vector<TokenSpan> spans;        ///< SEKV's segmentation of the document, ascending
    double budget = 0;                   ///< fast-tier budget the segmentation was made for
    int32_t tail = 0;                    ///< tokens before a query held at full resolution
    std::vector<int32_t> query_pos;      ///< [n_queries], ascending
    std::vector<ZoomRecordLayer> layers; ///< ascending layer index
    int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
    int64_t n_queries() const { return static_cast<int64_t>(query_pos.size()); }
    /// True when span s is visible to query i (spans[s].end <= query_pos[i] - tail).
    bool visible(int64_t i, size_t s) const {
        return spans[s].end <= static_cast<int64_t>(query_pos[static_cast<size_t>(i)]) - tail;
    }
};

/// A recording that cannot be used; what() names the file and says why.
struct ZoomRecordError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Check a record's sizes and structure: tokens, surprisal and spans of one document (spans
/// ascending, disjoint, non-empty, inside it), query positions ascending and inside, tail >= 0,
/// layers ascending and distinct with positive shapes (n_head a multiple of n_kv_head), every
/// array of the size its shape gives, every value finite (token_surprisal may be NaN), and
/// span_mass in [0, 1], 0 on spans the query does not see, summing to at most 1 per query and
/// head. Throws std::invalid_argument saying what is wrong.
void check_zoom_record(const ZoomRecord& r);

/// Write atomically (gguf_writer.h). Integer arrays (tokens, spans, query positions, layer ids)
/// are int32 metadata arrays; token_surprisal, q, out and span_mass are F32 tensors, k and v F16
/// tensors (exact: the rows are f16-rounded). Throws std::invalid_argument when the record does
/// not pass check_zoom_record (so no file is written that load refuses), std::system_error when
/// the file cannot be written. Throws std::invalid_argument when an array's size does not
/// match the shapes, std::system_error when the file cannot be written.
void save_zoom_record(const ZoomRecord& r, const std::string& path);

/// Read and check every size, the spans (ascending, disjoint, inside the document) and the
/// query positions (ascending, inside the document): every declared shape against the arrays
/// and tensors, then check_zoom_record. Throws ZoomRecordError naming the file, for a file that
/// cannot be opened, is not GGUF, is of another version, or fails a check.
ZoomRecord load_zoom_record(const std::string& path);

/// A key of the recording's whole contents (content_hash.h: 16 hex digits): its provenance,
/// settings, tokens, surprisal, spans, query positions and every layer's tensors. zoom-train
/// keeps it in its checkpoint, so a run is resumed only on the recordings it started with.
std::string zoom_record_digest(const ZoomRecord& r);

} // namespace spanscope
