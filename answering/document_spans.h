// A document's SEKV spans mapped back to its text (docs/sekv.md): for each span its character
// range, tokens, kept rank and summary-key norm, and the anchors — what a viewer of the document
// (the desktop application's document view and inspector) draws.
#pragma once

#include "answering/state_cache.h"
#include "storage/sekv_state.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace spanscope {

struct SpanExtent {
    int64_t char_begin = -1, char_end = -1; ///< bytes of the document text; -1: header tokens
    int64_t tokens = 0;
    int rank = 0;           ///< rank of the key factors (first SEKV layer, mean over KV heads,
                            ///< rounded)
    float summary_norm = 0; ///< L2 norm of the summary key (first SEKV layer, first KV head)
};

struct UnitSpans {
    int64_t document_id = 0;
    int unit = 0;
    std::vector<SpanExtent> spans;                    ///< unit-local span ids, in order
    std::vector<std::pair<int64_t, int64_t>> anchors; ///< byte ranges of the anchor tokens
};

/// One unit's SEKV spans and anchors mapped to the document's text (its unit-local span ids in
/// order).
UnitSpans unit_spans(const SekvUnitState& state, int64_t document_id, int unit);

/// The SEKV spans of every unit of a document for these options, built and stored where missing
/// (its chunk states must be stored: ingest first). Throws StateError when a unit's chunk
/// states are missing or unusable.
std::vector<UnitSpans> document_sekv_spans(StateCache& cache, int64_t document_id,
                                           const SekvOptions& options);

} // namespace spanscope
