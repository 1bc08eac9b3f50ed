// What `spanscope-cli bench --bandwidth` measures besides speed: the machine's read bandwidth and
// the bytes a decode step reads, so that decode can be reported as a fraction of the bandwidth.
#pragma once

#include "engine/model/model.h"

#include <cstdint>

namespace spanscope::cli {

/// Read bandwidth in GB/s (1e9 bytes per second): a 1 GiB array, written once, then read whole by
/// `threads` threads (each its own contiguous share, summed with 8 independent accumulators);
/// the best of 5 passes.
double read_bandwidth_gb_per_s(int threads);

/// Bytes one decode step reads at context length n_ctx (the tokens already in memory): every
/// weight matrix (tensors of two or more dimensions, at their stored size; the output matrix is
/// read whole for the logits, also when it is the token embedding, which otherwise is only
/// gathered and not counted) and the key/value
/// rows each attention layer attends to (its window on sliding layers), at 4 bytes per element
/// as the CPU memories keep them.
double decode_bytes_per_token(const Model& model, int64_t n_ctx);

} // namespace spanscope::cli
