// The host tier of SEKV on the GPU (cuda/cuda_sekv_memory.h): a span's low-rank factors
// packed into one contiguous block of floats, so that one copy moves a span to the device and
// one kernel reconstructs its rows there. Plain C++ (no CUDA), so that the layout is tested on
// every machine.
//
// Block layout, per KV head g in order: left_k [size][rank_k], right_k [rank_k][head_dim],
// left_v [size][rank_v], right_v [rank_v][head_dim] (row-major, the f16 factors SpanFactors
// holds widened to fp32: rows ≈ left · right).
#pragma once

#include "engine/sekv/sekv_spans.h"

#include <cstdint>
#include <vector>

namespace spanscope {

/// Where one KV head's factors lie in a span's packed block (offsets in floats from the
/// block's start) and their ranks.
struct PackedHeadFactors {
    int64_t left_k = 0, right_k = 0, left_v = 0, right_v = 0;
    int32_t rank_k = 0, rank_v = 0;
};

/// Floats the packed block of `span` takes (0 for a span without factors).
int64_t packed_factor_floats(const SekvSpan& span);

/// Pack the factors of `span` into out [packed_factor_floats(span)]; returns the descriptor
/// of each KV head [span.k.size()]. Throws std::invalid_argument when the key and value
/// factors are not one per KV head or do not match the span's size and one dimension.
std::vector<PackedHeadFactors> pack_span_factors(const SekvSpan& span, float* out);

/// The rows of KV head `head` reconstructed from a packed block (the host reference of the
/// device kernel cuda/cuda_mixed_attention.h reconstruct_spans): k, v [size][dim] =
/// left · right of the head's key and value factors.
void unpack_span_rows(const float* block, const PackedHeadFactors& head, int64_t size, int64_t dim,
                      float* k, float* v);

} // namespace spanscope
