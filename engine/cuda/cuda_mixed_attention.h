// SEKV's mixed-resolution attention on the device (the counterpart of mixed_attention.h): one
// online softmax per (query, head) over the rows held at full resolution, the summary row of
// every span the head does not zoom into (bias +log|S|), and the rows of the spans it does,
// reconstructed from their low-rank factors (span_factor_pack.h) by reconstruct_spans.
#pragma once

#include "engine/kernels/attention.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spanscope::cuda {

/// One KV head of one expanded span: where its packed factors are in the cache arena, and where
/// its reconstructed rows go.
struct ReconstructJob {
    int64_t left_k = 0, right_k = 0, left_v = 0, right_v = 0; ///< float offsets in the arena
    int64_t first_row = 0;                              ///< its first row in the reconstructed rows
    int32_t size = 0, rank_k = 0, rank_v = 0, head = 0; ///< rows, ranks, KV head
};

/// For every job, rows first_row .. first_row + size of rec_k / rec_v [n_rec][n_kv_head][dim],
/// at KV head job.head: left · right of its key and value factors (fp32, summed in rank
/// order as unpack_span_rows). jobs: [n_jobs] device; max_size: the largest job.size. Throws
/// std::invalid_argument for a span over 65535 rows (one grid row each), CudaError when the
/// launch fails.
void reconstruct_spans(const float* arena, const ReconstructJob* jobs, int n_jobs, int max_size,
                       int n_kv_head, int dim, float* rec_k, float* rec_v, cudaStream_t stream);

/// The rows and spans one mixed attention call reads (device pointers).
struct MixedKeys {
    /// Full-resolution rows in position order: k, v [n_full][n_kv_head][head_dim] f16; kpos.
    const __half* k = nullptr;
    const __half* v = nullptr;
    const int32_t* kpos = nullptr;
    int64_t n_full = 0;
    /// Summary rows [n_spans][n_kv_head][head_dim] fp32 and log|S| [n_spans].
    const float* summary_k = nullptr;
    const float* summary_v = nullptr;
    const float* log_size = nullptr;
    int64_t n_spans = 0;
    /// [n_q][n_head][n_spans]: 1 where that query head attends the span's rows (its summary row
    /// is then left out), 0 where it reads the summary.
    const uint8_t* expanded = nullptr;
    /// Reconstructed rows [n_rec][n_kv_head][head_dim] fp32 and the span of each [n_rec].
    const float* rec_k = nullptr;
    const float* rec_v = nullptr;
    const int32_t* rec_span = nullptr;
    int64_t n_rec = 0;
};

/// out[i][h] = softmax over the keys of `keys` visible to query i, head h (full rows with
/// kpos <= qpos[i]; every span lies before the queries) of scale · q·k (+ log|S| for a summary
/// row), times the values. q: [n_q][n_head][head_dim] (rotated at qpos); out likewise. fp32
/// scores, softmax and sums; a query head that sees nothing gets zeros. Throws
/// std::invalid_argument for head_dim > kMaxHeadDim or n_head not a multiple of n_kv_head,
/// CudaError when the launch fails.
void mixed_attention(const AttentionShape& shape, const float* q, const int32_t* qpos, int64_t n_q,
                     const MixedKeys& keys, float* out, cudaStream_t stream);

} // namespace spanscope::cuda
