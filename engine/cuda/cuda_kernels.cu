// Kernels of cuda_kernels.h. One block per row for the reductions (RMSNorm, surprisal,
// argmax), a grid-stride loop for the element-wise ones.
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_kernels.h"

#include <cfloat>
#include <cmath>

namespace spanscope::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
    const int64_t b = (n + kThreads - 1) / kThreads;
    return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide reductions over blockDim.x (a multiple of 32, at most 1024) threads; every thread
// gets the result. `scratch`: 32 floats of shared memory.
__device__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x / 32;
    v = lane < n_warps ? scratch[lane] : 0.0f;
    return warp_sum(v);
}

__device__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    const int n_warps = blockDim.x / 32;
    v = lane < n_warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

__global__ void rms_norm_kernel(float* x, const float* w, int64_t n, float eps) {
    __shared__ float scratch[32];
    float* row = x + blockIdx.x * n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        ss += row[i] * row[i];
    ss = block_sum(ss, scratch);
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(ss) / n + eps));
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        row[i] = row[i] * scale * w[i];
}

__global__ void rope_neox_kernel(float* x, const int32_t* pos, int64_t n_tokens, int n_heads, int d,
                                 double base) {
    const int half = d / 2;
    const int64_t total = n_tokens * n_heads * half;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int i = static_cast<int>(idx % half);
        const int64_t th = idx / half; // token * n_heads + head
        const int64_t t = th / n_heads;
        const double angle = pos[t] * pow(base, -2.0 * i / d);
        const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
        float* v = x + th * d;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = a * s + b * c;
    }
}

__global__ void geglu_tanh_kernel(float* g, const float* u, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const float v = g[i];
        // gelu_tanh(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
        const float t = tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v));
        g[i] = 0.5f * v * (1.0f + t) * u[i];
    }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] += x[i];
}

__global__ void to_half_kernel(const float* x, __half* y, int64_t n) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

__global__ void embed_kernel(const __half* table, int64_t n_embd, const int32_t* tokens,
                             float scale, float* x) {
    const __half* src = table + static_cast<int64_t>(tokens[blockIdx.x]) * n_embd;
    float* dst = x + blockIdx.x * n_embd;
    for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x)
        dst[i] = __half2float(src[i]) * scale;
}

__global__ void gather_rows_kernel(const float* x, const int64_t* rows, int64_t width, float* y) {
    const float* src = x + rows[blockIdx.x] * width;
    float* dst = y + blockIdx.x * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x)
        dst[i] = src[i];
}

__global__ void store_rows_kernel(const float* k, const float* v, const int32_t* pos, int64_t width,
                                  __half* K, __half* V, int32_t* kpos, int64_t first,
                                  int64_t capacity) {
    const int64_t i = blockIdx.x;
    const int64_t slot = (first + i) % capacity;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
        K[slot * width + c] = __float2half_rn(k[i * width + c]);
        V[slot * width + c] = __float2half_rn(v[i * width + c]);
    }
    if (threadIdx.x == 0)
        kpos[slot] = pos[i];
}

__global__ void load_rows_kernel(const __half* K, const __half* V, int64_t n, float* k, float* v) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        k[i] = __half2float(K[i]);
        v[i] = __half2float(V[i]);
    }
}

__global__ void surprisal_kernel(const float* logits, int64_t n_vocab, const int32_t* targets,
                                 float* out) {
    __shared__ float scratch[32];
    const float* row = logits + blockIdx.x * n_vocab;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n_vocab; i += blockDim.x)
        m = fmaxf(m, row[i]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n_vocab; i += blockDim.x)
        s += expf(row[i] - m);
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) {
        const int32_t t = targets[blockIdx.x];
        out[blockIdx.x] = t < 0 ? NAN : (m + logf(s)) - row[t];
    }
}

__global__ void argmax_kernel(const float* logits, int64_t n_vocab, int32_t* out) {
    __shared__ float best_v[kThreads];
    __shared__ int64_t best_i[kThreads];
    const float* row = logits + blockIdx.x * n_vocab;
    float bv = -INFINITY;
    int64_t bi = n_vocab; // none yet
    for (int64_t i = threadIdx.x; i < n_vocab; i += blockDim.x)
        if (row[i] > bv || (bi == n_vocab && row[i] == bv)) {
            bv = row[i];
            bi = i;
        }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            const float ov = best_v[threadIdx.x + s];
            const int64_t oi = best_i[threadIdx.x + s];
            if (ov > best_v[threadIdx.x] ||
                (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
                best_v[threadIdx.x] = ov;
                best_i[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = static_cast<int32_t>(best_i[0] < n_vocab ? best_i[0] : 0);
}

} // namespace

cudaError_t probe_kernels() {
    cudaFuncAttributes attr{};
    const cudaError_t st = cudaFuncGetAttributes(&attr, add_kernel);
    cudaGetLastError(); // do not leave the error for the next call to find
    return st;
}

void rms_norm(float* x, const float* w, int64_t rows, int64_t n, float eps, cudaStream_t stream) {
    if (rows == 0)
        return;
    rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, n, eps);
    cuda_check_launch("rms_norm");
}

void rope_neox(float* x, const int32_t* pos, int64_t n_tokens, int n_heads, int d, double base,
               cudaStream_t stream) {
    const int64_t total = n_tokens * n_heads * (d / 2);
    if (total == 0)
        return;
    rope_neox_kernel<<<blocks_for(total), kThreads, 0, stream>>>(x, pos, n_tokens, n_heads, d,
                                                                 base);
    cuda_check_launch("rope_neox");
}

void geglu_tanh(float* g, const float* u, int64_t n, cudaStream_t stream) {
    if (n == 0)
        return;
    geglu_tanh_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, u, n);
    cuda_check_launch("geglu_tanh");
}

void add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream) {
    if (n == 0)
        return;
    add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
    cuda_check_launch("add_inplace");
}

void to_half(const float* x, __half* y, int64_t n, cudaStream_t stream) {
    if (n == 0)
        return;
    to_half_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
    cuda_check_launch("to_half");
}

void embed(const __half* table, int64_t n_embd, const int32_t* tokens, int64_t n, float scale,
           float* x, cudaStream_t stream) {
    if (n == 0)
        return;
    embed_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(table, n_embd, tokens, scale,
                                                                    x);
    cuda_check_launch("embed");
}

void gather_rows(const float* x, const int64_t* rows, int64_t m, int64_t width, float* y,
                 cudaStream_t stream) {
    if (m == 0)
        return;
    gather_rows_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(x, rows, width, y);
    cuda_check_launch("gather_rows");
}

void store_rows(const float* k, const float* v, const int32_t* pos, int64_t n, int64_t width,
                __half* K, __half* V, int32_t* kpos, int64_t first, int64_t capacity,
                cudaStream_t stream) {
    if (n == 0)
        return;
    store_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(k, v, pos, width, K, V,
                                                                         kpos, first, capacity);
    cuda_check_launch("store_rows");
}

void load_rows(const __half* K, const __half* V, int64_t count, int64_t width, float* k, float* v,
               cudaStream_t stream) {
    const int64_t n = count * width;
    if (n == 0)
        return;
    load_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(K, V, n, k, v);
    cuda_check_launch("load_rows");
}

void surprisal_rows(const float* logits, int64_t rows, int64_t n_vocab, const int32_t* targets,
                    float* out, cudaStream_t stream) {
    if (rows == 0)
        return;
    surprisal_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, n_vocab, targets,
                                                                           out);
    cuda_check_launch("surprisal_rows");
}

void argmax_rows(const float* logits, int64_t rows, int64_t n_vocab, int32_t* out,
                 cudaStream_t stream) {
    if (rows == 0)
        return;
    argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, n_vocab, out);
    cuda_check_launch("argmax_rows");
}

} // namespace spanscope::cuda
