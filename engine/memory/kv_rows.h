// Key/value rows moved between a model's memory and storage: exported at f16 precision (what
// the exact memories hold, memory.h), imported at the same or at shifted positions with the
// keys re-rotated with each layer's own RoPE frequencies (docs/linearkv.md; failure modes 1 and 3
// (tests/README.md)).
#pragma once

#include "engine/memory/memory.h"
#include "engine/model/model.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// One layer's rows for the consecutive positions [pos_begin, pos_begin + n_rows).
/// k, v: [n_rows][n_kv_head][head_dim] as IEEE f16 bits; keys rotated at their positions.
struct LayerRows {
    int layer = 0;
    int32_t pos_begin = 0;
    int64_t n_rows = 0;
    std::vector<uint16_t> k, v;
};

/// Rows of positions [pos_begin, pos_end) of each of `layers`.
/// Throws std::logic_error when a layer's memory cannot export rows or does not hold every
/// position of the range (the rows must be consecutive).
std::vector<LayerRows> export_rows(const ModelMemory& memory, const std::vector<int>& layers,
                                   int32_t pos_begin, int32_t pos_end);

/// Store `rows` into memory.layer(rows.layer) at positions moved by `delta`, re-rotating the
/// keys by delta with that layer's RoPE frequencies (info.layers[layer].rope) over the elements
/// its RoPE rotates (the whole head; the first rope_dims for partial RoPE; none for NoPE);
/// stored in pieces of at most max_piece rows (a sliding memory takes at most its ubatch size
/// per store()). Throws std::invalid_argument when the rows' shape does not match the layer or
/// the layer is recurrent; std::length_error when the memory is full.
void import_rows(ModelMemory& memory, const ModelInfo& info, const LayerRows& rows, int32_t delta,
                 int64_t max_piece);

/// Indices of the attention layers that keep every token (global) or only a window (sliding);
/// recurrent layers are in neither.
std::vector<int> global_layers(const ModelInfo& info);
std::vector<int> sliding_layers(const ModelInfo& info);

/// Rebuild every sliding-window layer from the rows a continuation at position n_past can
/// still see ([n_past - (W-1), n_past)): the state that restoring those rows from storage
/// gives, so that a prefill continued in the same process and one resumed from storage run on
/// identical memory.
void trim_sliding_layers(ModelMemory& memory, const ModelInfo& info, int64_t n_past,
                         int64_t max_piece);

} // namespace spanscope
