// The training examples of SEKV's trained zoom-in (issue 8; zoom_model.h trains on them): a
// recorded document (zoom_record.h) with its spans built at two resolutions as SekvMemory seals
// them, one example per (layer, query, query head), and the zoom labels of a query and head.
#pragma once

#include "engine/sekv/router_params.h"
#include "engine/sekv/sekv_spans.h"
#include "lab/router/zoom_record.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace spanscope {

/// A recorded document prepared for training: for every layer its spans at two resolutions
/// (built as SekvMemory::seal builds them, at full rank r_max) and each query's labels.
struct ZoomExampleSet {
    struct Layer {
        int layer = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
        float scale = 1.0f;
        std::vector<SekvSpan> spans; ///< the record's spans, factors at rank <= r_max
        const ZoomRecordLayer* rec = nullptr;
    };
    const ZoomRecord* record = nullptr; ///< must outlive the set
    std::vector<Layer> layers;          ///< as record->layers
};

/// Build the training view of a record (kept by pointer: it must outlive the set). Spans are
/// built with build_span at max_rank and the energy gate off, as SekvMemory::seal builds them;
/// with a sketch basis in `params`, each carries its key sketch (span_sketch.h).
/// Throws std::invalid_argument when the record's layers do not match `params` (a layer missing,
/// another n_head or head_dim).
ZoomExampleSet prepare_examples(const ZoomRecord& record, const RouterParams& params, int max_rank);

/// One example: record layer index, query index, query head.
struct ZoomExample {
    int layer = 0;     ///< index into ZoomExampleSet::layers
    int64_t query = 0; ///< index into the record's queries
    int head = 0;
};

/// Every (layer, query, head) of a set whose query sees at least one span.
std::vector<ZoomExample> list_examples(const ZoomExampleSet& set);

/// A set and one of its examples.
using ZoomItem = std::pair<int, ZoomExample>; ///< (index into the sets, example)

/// The zoom labels of one query and head: y_S = 1 for the fewest visible spans whose teacher
/// mass reaches coverage · (total mass on visible spans), taken by decreasing mass (ties by
/// index). mass: [n_spans]; visible: [n_spans]. A query whose visible spans carry no mass has
/// no positive label.
std::vector<char> zoom_labels(const float* mass, const std::vector<char>& visible, double coverage);

/// The spans query `query` of R sees: spans [0, n) with n the returned count (R.visible).
int64_t visible_span_count(const ZoomRecord& R, int64_t query);

/// The positions query position qpos attends at full resolution when spans [0, n_vis) are held
/// at two resolutions: every position <= qpos outside them, ascending.
std::vector<int64_t> full_resolution_positions(const ZoomRecord& R, int64_t n_vis, int32_t qpos);

} // namespace spanscope
