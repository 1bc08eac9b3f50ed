// One block per (query, head): the keys are read in chunks of kChunk, one key per thread for
// the score, then every thread accumulates its own output elements over the chunk's
// probabilities (kept in shared memory), with the online softmax rescaling between chunks.
#include "engine/cuda/cuda_attention.h"
#include "engine/cuda/cuda_check.h"

#include <cfloat>
#include <stdexcept>
#include <string>

namespace spanscope::cuda {
namespace {

constexpr int kChunk = 128; // keys per step = threads per block
constexpr int kPerThread = kMaxHeadDim / kChunk;

__device__ float warp_reduce_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ float warp_reduce_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void attention_kernel(const float* q, const int32_t* qpos, const __half* k,
                                 const __half* v, const int32_t* kpos, int64_t n_kv, float* out,
                                 int n_head, int n_kv_head, int head_dim, float scale, int window,
                                 bool keys_sorted) {
    extern __shared__ float smem[]; // [head_dim] query, [kChunk] probabilities, [32] scratch
    float* sq = smem;
    float* sp = smem + head_dim;
    float* scratch = sp + kChunk;
    const int64_t i = blockIdx.x;
    const int h = blockIdx.y;
    const int g = h / (n_head / n_kv_head);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const float* qrow = q + (i * n_head + h) * head_dim;
    for (int d = tid; d < head_dim; d += kChunk)
        sq[d] = qrow[d];
    const int32_t qp = qpos[i];
    const int64_t kv_stride = static_cast<int64_t>(n_kv_head) * head_dim;
    float acc[kPerThread];
    for (int r = 0; r < kPerThread; ++r)
        acc[r] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    for (int64_t j0 = 0; j0 < n_kv; j0 += kChunk) {
        if (keys_sorted && kpos[j0] > qp)
            break; // every later key is past the query (uniform over the block)
        const int64_t j = j0 + tid;
        float s = -INFINITY;
        if (j < n_kv) {
            const int32_t kp = kpos[j];
            if (kp <= qp && (window == 0 || qp - kp < window)) {
                const __half* krow = k + j * kv_stride + static_cast<int64_t>(g) * head_dim;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d)
                    dot += sq[d] * __half2float(krow[d]);
                s = dot * scale;
            }
        }
        // The chunk's maximum, shared by the block.
        float cm = warp_reduce_max(s);
        if (lane == 0)
            scratch[warp] = cm;
        __syncthreads();
        cm = lane < kChunk / 32 ? scratch[lane] : -INFINITY;
        cm = warp_reduce_max(cm);
        __syncthreads();
        if (cm == -INFINITY)
            continue; // nothing visible in this chunk
        const float m_new = fmaxf(m, cm);
        const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
        const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
        sp[tid] = p;
        float ps = warp_reduce_sum(p);
        if (lane == 0)
            scratch[warp] = ps;
        __syncthreads();
        ps = lane < kChunk / 32 ? scratch[lane] : 0.0f;
        ps = warp_reduce_sum(ps);
        l = l * corr + ps;
        const int64_t n_here = n_kv - j0 < kChunk ? n_kv - j0 : kChunk;
        for (int r = 0; r < kPerThread; ++r) {
            const int d = tid + r * kChunk;
            if (d >= head_dim)
                break;
            float a = acc[r] * corr;
            const __half* vcol = v + j0 * kv_stride + static_cast<int64_t>(g) * head_dim + d;
            for (int64_t t = 0; t < n_here; ++t)
                a += sp[t] * __half2float(vcol[t * kv_stride]);
            acc[r] = a;
        }
        m = m_new;
        __syncthreads(); // sp and scratch are rewritten by the next chunk
    }
    float* orow = out + (i * n_head + h) * head_dim;
    for (int r = 0; r < kPerThread; ++r) {
        const int d = tid + r * kChunk;
        if (d < head_dim)
            orow[d] = l > 0.0f ? acc[r] / l : 0.0f;
    }
}

} // namespace

void attention(const AttentionShape& shape, const float* q, const int32_t* qpos, int64_t n_q,
               const __half* k, const __half* v, const int32_t* kpos, int64_t n_kv, float* out,
               bool keys_sorted, cudaStream_t stream) {
    if (shape.head_dim <= 0 || shape.head_dim > kMaxHeadDim)
        throw std::invalid_argument("CUDA attention: head_dim " + std::to_string(shape.head_dim) +
                                    " outside 1.." + std::to_string(kMaxHeadDim));
    if (shape.n_kv_head <= 0 || shape.n_head % shape.n_kv_head != 0)
        throw std::invalid_argument("CUDA attention: n_head is not a multiple of n_kv_head");
    if (n_q == 0)
        return;
    if (n_kv == 0) {
        cuda_check(cudaMemsetAsync(out, 0,
                                   static_cast<size_t>(n_q) * shape.n_head * shape.head_dim *
                                       sizeof(float),
                                   stream),
                   "attention: zero output");
        return;
    }
    const dim3 grid(static_cast<unsigned>(n_q), static_cast<unsigned>(shape.n_head));
    const size_t smem = (static_cast<size_t>(shape.head_dim) + kChunk + 32) * sizeof(float);
    attention_kernel<<<grid, kChunk, smem, stream>>>(q, qpos, k, v, kpos, n_kv, out, shape.n_head,
                                                     shape.n_kv_head, shape.head_dim, shape.scale,
                                                     shape.window, keys_sorted);
    cuda_check_launch("attention");
}

} // namespace spanscope::cuda
