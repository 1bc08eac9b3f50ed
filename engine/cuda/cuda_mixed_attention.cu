// reconstruct_spans: one block per (job, row), one thread per output element pair (key, value).
// mixed_attention: one block per (query, head), as cuda_attention.cu, over the three kinds of
// keys laid end to end (full rows, summary rows, reconstructed rows), in chunks of kChunk keys
// with the online softmax rescaling between chunks.
#include "engine/cuda/cuda_attention.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_mixed_attention.h"

#include <stdexcept>
#include <string>

namespace spanscope::cuda {
namespace {

constexpr int kChunk = 128;
constexpr int kPerThread = kMaxHeadDim / kChunk;

__global__ void reconstruct_kernel(const float* arena, const ReconstructJob* jobs, int n_kv,
                                   int dim, float* rec_k, float* rec_v) {
    const ReconstructJob J = jobs[blockIdx.x];
    const int i = blockIdx.y;
    if (i >= J.size)
        return;
    const float* lk = arena + J.left_k + static_cast<int64_t>(i) * J.rank_k;
    const float* rk = arena + J.right_k;
    const float* lv = arena + J.left_v + static_cast<int64_t>(i) * J.rank_v;
    const float* rv = arena + J.right_v;
    const int64_t row = (J.first_row + i) * n_kv * dim + static_cast<int64_t>(J.head) * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
        float a = 0.0f, b = 0.0f;
        for (int r = 0; r < J.rank_k; ++r)
            a += lk[r] * rk[static_cast<int64_t>(r) * dim + j];
        for (int r = 0; r < J.rank_v; ++r)
            b += lv[r] * rv[static_cast<int64_t>(r) * dim + j];
        rec_k[row + j] = a;
        rec_v[row + j] = b;
    }
}

__device__ float block_max(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0)
        scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x % 32 < kChunk / 32 ? scratch[threadIdx.x % 32] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();
    return v;
}

__device__ float block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0)
        scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x % 32 < kChunk / 32 ? scratch[threadIdx.x % 32] : 0.0f;
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}

__global__ void mixed_attention_kernel(const float* q, const int32_t* qpos, MixedKeys K, float* out,
                                       int n_head, int n_kv_head, int head_dim, float scale) {
    extern __shared__ float smem[]; // [head_dim] query, [kChunk] probabilities, [32] scratch
    float* sq = smem;
    float* sp = smem + head_dim;
    float* scratch = sp + kChunk;
    const int64_t i = blockIdx.x;
    const int h = blockIdx.y;
    const int g = h / (n_head / n_kv_head);
    const int tid = threadIdx.x;
    const float* qrow = q + (i * n_head + h) * head_dim;
    for (int d = tid; d < head_dim; d += kChunk)
        sq[d] = qrow[d];
    const int32_t qp = qpos[i];
    const int64_t stride = static_cast<int64_t>(n_kv_head) * head_dim;
    const int64_t goff = static_cast<int64_t>(g) * head_dim;
    const uint8_t* expanded = K.expanded + (i * n_head + h) * K.n_spans;
    const int64_t n_all = K.n_full + K.n_spans + K.n_rec;
    float acc[kPerThread];
    for (int r = 0; r < kPerThread; ++r)
        acc[r] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    __syncthreads();

    int64_t j0 = 0;
    while (j0 < n_all) {
        // Full rows are in position order: past the query's position none is visible.
        if (j0 < K.n_full && K.kpos[j0] > qp) {
            j0 = K.n_full;
            continue;
        }
        const int64_t j = j0 + tid;
        float s = -INFINITY;
        if (j < K.n_full) {
            if (K.kpos[j] <= qp) {
                const __half* kr = K.k + j * stride + goff;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d)
                    dot += sq[d] * __half2float(kr[d]);
                s = dot * scale;
            }
        } else if (j < K.n_full + K.n_spans) {
            const int64_t sidx = j - K.n_full;
            if (!expanded[sidx]) {
                const float* kr = K.summary_k + sidx * stride + goff;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d)
                    dot += sq[d] * kr[d];
                s = dot * scale + K.log_size[sidx];
            }
        } else if (j < n_all) {
            const int64_t r = j - K.n_full - K.n_spans;
            if (expanded[K.rec_span[r]]) {
                const float* kr = K.rec_k + r * stride + goff;
                float dot = 0.0f;
                for (int d = 0; d < head_dim; ++d)
                    dot += sq[d] * kr[d];
                s = dot * scale;
            }
        }
        const float cm = block_max(s, scratch);
        const int64_t n_here = n_all - j0 < kChunk ? n_all - j0 : kChunk;
        if (cm == -INFINITY) {
            j0 += n_here;
            continue; // nothing visible in this chunk
        }
        const float m_new = fmaxf(m, cm);
        const float corr = m == -INFINITY ? 0.0f : expf(m - m_new);
        const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
        sp[tid] = p;
        const float ps = block_sum(p, scratch); // its barriers make sp visible
        l = l * corr + ps;
        for (int r = 0; r < kPerThread; ++r) {
            const int d = tid + r * kChunk;
            if (d >= head_dim)
                break;
            float a = acc[r] * corr;
            for (int64_t t = 0; t < n_here; ++t) {
                const float w = sp[t];
                if (w == 0.0f)
                    continue;
                const int64_t jj = j0 + t;
                float val;
                if (jj < K.n_full)
                    val = __half2float(K.v[jj * stride + goff + d]);
                else if (jj < K.n_full + K.n_spans)
                    val = K.summary_v[(jj - K.n_full) * stride + goff + d];
                else
                    val = K.rec_v[(jj - K.n_full - K.n_spans) * stride + goff + d];
                a += w * val;
            }
            acc[r] = a;
        }
        m = m_new;
        j0 += n_here;
        __syncthreads(); // sp is rewritten by the next chunk
    }
    float* orow = out + (i * n_head + h) * head_dim;
    for (int r = 0; r < kPerThread; ++r) {
        const int d = tid + r * kChunk;
        if (d < head_dim)
            orow[d] = l > 0.0f ? acc[r] / l : 0.0f;
    }
}

} // namespace

void reconstruct_spans(const float* arena, const ReconstructJob* jobs, int n_jobs, int max_size,
                       int n_kv_head, int dim, float* rec_k, float* rec_v, cudaStream_t stream) {
    if (n_jobs == 0 || max_size == 0)
        return;
    if (max_size > 65535)
        throw std::invalid_argument("reconstruct_spans: a span of " + std::to_string(max_size) +
                                    " rows exceeds the grid's 65535");
    const dim3 grid(static_cast<unsigned>(n_jobs), static_cast<unsigned>(max_size));
    const int threads = dim < 256 ? ((dim + 31) / 32) * 32 : 256;
    reconstruct_kernel<<<grid, threads, 0, stream>>>(arena, jobs, n_kv_head, dim, rec_k, rec_v);
    cuda_check_launch("reconstruct_spans");
}

void mixed_attention(const AttentionShape& shape, const float* q, const int32_t* qpos, int64_t n_q,
                     const MixedKeys& keys, float* out, cudaStream_t stream) {
    if (shape.head_dim <= 0 || shape.head_dim > kMaxHeadDim)
        throw std::invalid_argument("CUDA mixed attention: head_dim " +
                                    std::to_string(shape.head_dim) + " outside 1.." +
                                    std::to_string(kMaxHeadDim));
    if (shape.n_kv_head <= 0 || shape.n_head % shape.n_kv_head != 0)
        throw std::invalid_argument("CUDA mixed attention: n_head is not a multiple of n_kv_head");
    if (n_q == 0)
        return;
    const dim3 grid(static_cast<unsigned>(n_q), static_cast<unsigned>(shape.n_head));
    const size_t smem = (static_cast<size_t>(shape.head_dim) + kChunk + 32) * sizeof(float);
    mixed_attention_kernel<<<grid, kChunk, smem, stream>>>(
        q, qpos, keys, out, shape.n_head, shape.n_kv_head, shape.head_dim, shape.scale);
    cuda_check_launch("mixed_attention");
}

} // namespace spanscope::cuda
