// SEKV structures of a document section (unit): built from its stored chunk states (rows at
// f16 precision and per-row surprisal), stored in the project beside them, and held in a
// session's SEKV layers at the unit's position in the assembled context (docs/sekv.md).
#pragma once

#include "answering/state_cache.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/session/session.h"
#include "engine/text/chunking.h"
#include "storage/sekv_state.h"

#include <string>
#include <vector>

namespace spanscope {

/// The options that shape a SEKV state (segmentation, rank gate, budget, layers) as a short
/// key: states built with other options are not reused. layers: sekv_layers(). With
/// options.router_params and options.trained_rank_gate the key ends in "-g" and the parameters'
/// rank_gate_digest(), so spans built by the trained rank gates are never served to the
/// training-free mode, nor the reverse. Throws std::invalid_argument for a rank.predictor that
/// is not the trained gate of options.router_params (without them, or with trained_rank_gate off):
/// nothing identifies it, and for options.uniform_summary (build_sekv_unit builds the design's
/// surprisal-weighted summary rows only).
std::string sekv_options_key(const SekvOptions& options, const std::vector<int>& layers);

/// Build the unit's SEKV state from its decoded chunk states: the segmentation of the whole
/// unit within options.budget (segment_within_budget over each token's own surprisal), its
/// character ranges (from the chunks' token offsets), and every SEKV layer's spans.
/// Throws std::invalid_argument when the states do not cover the unit.
SekvUnitState build_sekv_unit(const DocumentUnit& unit, const UnitStates& states,
                              const ModelInfo& info, const SekvOptions& options);

/// Hold the unit's spans, moved to `offset`, in every SEKV layer of the session (after its rows
/// were restored there: restore_unit). Returns the spans held per layer. Throws
/// std::invalid_argument when the session's SEKV layers are not the state's.
int64_t hold_sekv_unit(Session& session, const SekvUnitState& state, int64_t offset);

/// Bytes one SEKV layer's structures of a unit take: summaries (fast tier) and factors (host
/// tier), as held in memory.
struct SekvLayerBytes {
    int layer = 0;
    int64_t fast = 0, host = 0;
};
std::vector<SekvLayerBytes> sekv_layer_bytes(const SekvUnitState& state);

} // namespace spanscope
