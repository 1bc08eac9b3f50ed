// The element-wise and reduction kernels of the CUDA forward pass. Each is the device
// counterpart of a CPU function in ops.h / surprisal.h / sampler.h, with the same shapes and
// formulas (the parity tests compare them); all pointers are device pointers, every launch is
// asynchronous on `stream`, and a launch failure throws CudaError.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace spanscope::cuda {

/// RMSNorm (ops.h rms_norm): x[r][:] <- x[r][:] / sqrt(mean(x[r]^2) + eps) * w.
/// x: [rows][n] in place; w: [n]. The sum of squares is accumulated in fp32 per thread and
/// reduced in fp32 (the CPU sums in double).
void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps, cudaStream_t stream);

/// Rotary position embedding, NeoX layout (ops.h rope_neox): (x[i], x[i + d/2]) rotated by
/// pos[t] · base^(−2i/d), the angle and its sine and cosine computed in double (fp64), as the
/// CPU's RopeTable does. x: [n_tokens][n_heads][d] in place; pos: [n_tokens].
void rope_neox(float* x, const int32_t* pos, int64_t n_tokens, int n_heads, int d, double base,
               cudaStream_t stream);

/// GeGLU with tanh GELU (ops.h geglu_tanh): g[i] <- gelu_tanh(g[i]) · u[i], n elements.
void geglu_tanh(float* g, const float* u, int64_t n, cudaStream_t stream);

/// y[i] += x[i], n elements.
void add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream);

/// y[i] = f16(x[i]) (round to nearest even), n elements: the activations cuBLAS multiplies.
void to_half(const float* x, __half* y, int64_t n, cudaStream_t stream);

/// x[t][:] = table[tokens[t]][:] · scale (fp32). table: [n_vocab][n_embd] f16; tokens: [n]
/// (checked by the caller); x: [n][n_embd].
void embed(const __half* table, int64_t n_embd, const int32_t* tokens, int64_t n, float scale,
           float* x, cudaStream_t stream);

/// y[r][:] = x[rows[r]][:] for r < m. x: [*][width]; rows: [m]; y: [m][width] (y ≠ x).
void gather_rows(const float* x, const int64_t* rows, int64_t m, int64_t width, float* y,
                 cudaStream_t stream);

/// Write n rows of keys and values into a ring of f16 rows: slot (first + i) % capacity gets
/// row i, rounded to f16 (nearest even, as memory.h's round_through_f16).
/// k, v: [n][width] fp32; K, V: [capacity][width] f16; kpos: [capacity], pos: [n].
void store_rows(const float* k, const float* v, const int32_t* pos, int64_t n, int64_t width,
                __half* K, __half* V, int32_t* kpos, int64_t first, int64_t capacity,
                cudaStream_t stream);

/// The same ring read back as fp32 rows in slot order: k, v: [count][width] from slots
/// [0, count). K, V as store_rows.
void load_rows(const __half* K, const __half* V, int64_t count, int64_t width, float* k, float* v,
               cudaStream_t stream);

/// out[r] = logsumexp(logits[r][:]) − logits[r][targets[r]] in nats (surprisal.h), NaN where
/// targets[r] < 0. logits: [rows][n_vocab]; targets, out: [rows].
void surprisal_rows(const float* logits, int64_t rows, int64_t n_vocab, const int32_t* targets,
                    float* out, cudaStream_t stream);

/// out[r] = the index of the largest logits[r][:] (the first on ties), the greedy sample
/// (sampler.h with temperature 0). logits: [rows][n_vocab]; out: [rows].
void argmax_rows(const float* logits, int64_t rows, int64_t n_vocab, int32_t* out,
                 cudaStream_t stream);

/// cudaSuccess when this build's kernels can run on the current device; an architecture this
/// build has neither machine code nor PTX for gives cudaErrorNoKernelImageForDevice (or
/// cudaErrorInvalidDeviceFunction). Launches nothing.
cudaError_t probe_kernels();

} // namespace spanscope::cuda
