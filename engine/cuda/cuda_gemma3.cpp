// Per layer, as models/gemma3.cpp (Gemma 3 report §2):
//   h = RMSNorm(x); q,k,v = h·Wᵀ; RMSNorm per head of q and k; RoPE(q, k)
//   a = attention over the layer's memory;  x += RMSNorm(a·Woᵀ)
//   x += RMSNorm((gelu_tanh(h'·Wgateᵀ) ⊙ h'·Wupᵀ)·Wdownᵀ), h' = RMSNorm(x)
// Every step is a kernel of cuda_kernels.h / cuda_attention.h or a cuBLAS product on one
// stream; the host waits only where it must read a result (logits, surprisal, a host policy's
// attention, a token filter's decision).
#include "engine/cuda/cuda_gemma3.h"

#include "engine/cuda/cuda_attention.h"
#include "engine/cuda/cuda_buffer.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_kv_memory.h"
#include "engine/cuda/cuda_matmul.h"
#include "engine/cuda/cuda_sekv_memory.h"
#include "engine/model/model_file.h"

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope::cuda {
namespace {

struct Layer {
    DeviceBuffer<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffn_norm;
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Activations of one forward call, grown to the largest ubatch seen.
struct Scratch {
    DeviceBuffer<int32_t> tokens, pos, targets;
    DeviceBuffer<int64_t> rows;
    DeviceBuffer<float> x, h, o, q, k, v, att, gate, up, logits, surprisal, tmp;
    DeviceBuffer<__half> h16;
};

class CudaGemma3Model final : public Model {
public:
    explicit CudaGemma3Model(Model& cpu);
    void forward(const int32_t* tokens, const int32_t* pos, int64_t n, ModelMemory& memory,
                 const std::vector<int64_t>& logit_rows, float* logits, ThreadPool& pool,
                 const SurprisalRequest* surprisal = nullptr,
                 const std::atomic<bool>* cancel = nullptr,
                 const TokenFilter* filter = nullptr) const override;
    ModelMemory new_memory(int64_t n_ctx, int64_t max_ubatch, const std::string& global_policy,
                           const SekvOptions* sekv, const EvictionOptions* eviction) const override;
    const char* backend() const override { return "cuda"; }

private:
    DeviceBuffer<float> norm(const std::string& name, int64_t n) const;
    DeviceMatrix matrix(const std::string& name) const;
    /// y = x · Wᵀ for n rows of x (fp32, device): converts x to f16 in scratch first.
    void project(const DeviceMatrix& w, const float* x, int64_t n, float* y) const;
    /// The layer's attention through a host memory: q, k, v down, store/attend there, out up.
    void attend_on_host(LayerMemory& mem, const int32_t* pos, int64_t n, ThreadPool& pool) const;

    std::shared_ptr<Context> ctx_;
    std::vector<Layer> layers_;
    DeviceMatrix tok_embd_;
    DeviceBuffer<float> output_norm_;
    mutable Scratch s_;
    // The host side of a host policy's layer (attend_on_host): q, k, v and the attention.
    struct HostScratch {
        std::vector<float> q, k, v, att;
    };
    mutable HostScratch host_;
    mutable std::mutex mutex_; // one forward at a time (the scratch is shared)
};

const GgufTensorInfo& find(const GgufFile& g, const std::string& name) {
    const auto* t = g.find_tensor(name);
    if (!t)
        throw ModelError("missing tensor " + name);
    return *t;
}

CudaGemma3Model::CudaGemma3Model(Model& cpu) {
    if (cpu.info().architecture != "gemma3")
        throw ModelError("the CUDA backend runs gemma3 models; this file is " +
                         cpu.info().architecture);
    adopt(cpu);
    ctx_ = std::make_shared<Context>();
    const auto& I = info_;
    tok_embd_ = matrix("token_embd.weight");
    output_norm_ = norm("output_norm.weight", I.n_embd);
    layers_.resize(static_cast<size_t>(I.n_layer));
    for (int il = 0; il < I.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        auto& L = layers_[static_cast<size_t>(il)];
        L.attn_norm = norm(p + "attn_norm.weight", I.n_embd);
        L.q_norm = norm(p + "attn_q_norm.weight", I.head_dim);
        L.k_norm = norm(p + "attn_k_norm.weight", I.head_dim);
        L.post_attn_norm = norm(p + "post_attention_norm.weight", I.n_embd);
        L.ffn_norm = norm(p + "ffn_norm.weight", I.n_embd);
        L.post_ffn_norm = norm(p + "post_ffw_norm.weight", I.n_embd);
        L.wq = matrix(p + "attn_q.weight");
        L.wk = matrix(p + "attn_k.weight");
        L.wv = matrix(p + "attn_v.weight");
        L.wo = matrix(p + "attn_output.weight");
        L.w_gate = matrix(p + "ffn_gate.weight");
        L.w_up = matrix(p + "ffn_up.weight");
        L.w_down = matrix(p + "ffn_down.weight");
    }
}

DeviceBuffer<float> CudaGemma3Model::norm(const std::string& name, int64_t n) const {
    const auto& t = find(*gguf_, name);
    if (t.type != TensorType::F32 || t.ne.size() != 1 || t.ne[0] != n)
        throw ModelError("norm weight " + name + " must be f32 of " + std::to_string(n));
    DeviceBuffer<float> b(static_cast<size_t>(n));
    b.upload(reinterpret_cast<const float*>(t.data), static_cast<size_t>(n));
    return b;
}

DeviceMatrix CudaGemma3Model::matrix(const std::string& name) const {
    return DeviceMatrix::upload(WeightMatrix::from(find(*gguf_, name)));
}

void CudaGemma3Model::project(const DeviceMatrix& w, const float* x, int64_t n, float* y) const {
    s_.h16.resize(static_cast<size_t>(n * w.cols));
    to_half(x, s_.h16.data(), n * w.cols, ctx_->stream());
    matmul(*ctx_, w, s_.h16.data(), n, y);
}

ModelMemory CudaGemma3Model::new_memory(int64_t n_ctx, int64_t max_ubatch,
                                        const std::string& global_policy, const SekvOptions* sekv,
                                        const EvictionOptions* eviction) const {
    ModelMemory memory = make_memory(info_, n_ctx, max_ubatch, global_policy, sekv, eviction);
    // SEKV's layers on the device join one prefetch chain, in layer order.
    auto chain = std::make_shared<SekvPrefetchChain>();
    int sekv_index = 0;
    for (int il = 0; il < info_.n_layer; ++il) {
        const auto& l = info_.layers[static_cast<size_t>(il)];
        const auto policy = memory.layer(il).policy();
        if (policy == "full" || policy == "sliding") {
            memory.replace(il, std::make_unique<DeviceKvMemory>(l.attn, n_ctx, max_ubatch, ctx_));
        } else if (const auto* host = dynamic_cast<const SekvMemory*>(&memory.layer(il))) {
            // sekv and chunk_summary, with the options make_memory chose for the layer.
            auto dev = std::make_unique<DeviceSekvMemory>(l.attn, n_ctx, l.rope, host->options(),
                                                          DeviceSekvOptions{}, ctx_);
            dev->join(chain, sekv_index++);
            memory.replace(il, std::move(dev));
        }
    }
    return memory;
}

void CudaGemma3Model::attend_on_host(LayerMemory& mem, const int32_t* pos, int64_t n,
                                     ThreadPool& pool) const {
    const auto& I = info_;
    const int64_t q_dim = static_cast<int64_t>(I.n_head) * I.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(I.n_head_kv) * I.head_dim;
    auto& [q, k, v, att] = host_;
    q.resize(static_cast<size_t>(n * q_dim));
    k.resize(static_cast<size_t>(n * kv_dim));
    v.resize(k.size());
    att.resize(q.size());
    const auto cs = ctx_->stream();
    cuda_check(cudaMemcpyAsync(q.data(), s_.q.data(), q.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "q to host");
    cuda_check(cudaMemcpyAsync(k.data(), s_.k.data(), k.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "k to host");
    cuda_check(cudaMemcpyAsync(v.data(), s_.v.data(), v.size() * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "v to host");
    ctx_->sync();
    mem.store(k.data(), v.data(), pos, n);
    mem.attend(q.data(), pos, n, att.data(), pool);
    cuda_check(cudaMemcpyAsync(s_.att.data(), att.data(), att.size() * sizeof(float),
                               cudaMemcpyHostToDevice, cs),
               "attention to device");
    ctx_->sync(); // att is rewritten by the next layer
}

void CudaGemma3Model::forward(const int32_t* tokens, const int32_t* pos, int64_t n,
                              ModelMemory& memory, const std::vector<int64_t>& logit_rows,
                              float* logits, ThreadPool& pool, const SurprisalRequest* surprisal,
                              const std::atomic<bool>* cancel, const TokenFilter* filter) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto& I = info_;
    const int64_t E = I.n_embd, F = I.n_ff;
    const int64_t q_dim = static_cast<int64_t>(I.n_head) * I.head_dim;
    const int64_t kv_dim = static_cast<int64_t>(I.n_head_kv) * I.head_dim;
    const auto cs = ctx_->stream();
    check_forward_inputs(I, tokens, pos, n, memory);
    if (filter && (filter->after_layer < 0 || filter->after_layer + 1 >= I.n_layer ||
                   !logit_rows.empty() || surprisal || !filter->keep))
        throw std::invalid_argument("a token filter needs a layer before the model's last, a "
                                    "keep function, and no logits or surprisal");
    for (const int64_t r : logit_rows)
        if (r < 0 || r >= n)
            throw std::invalid_argument("logit row outside the ubatch");
    if (n == 0)
        return;
    std::vector<int32_t> kept_pos(pos, pos + n);

    const auto un = static_cast<size_t>(n);
    s_.tokens.resize(un);
    s_.pos.resize(un);
    s_.x.resize(un * E);
    s_.h.resize(un * E);
    s_.o.resize(un * E);
    s_.tmp.resize(un * E);
    s_.q.resize(un * q_dim);
    s_.att.resize(un * q_dim);
    s_.k.resize(un * kv_dim);
    s_.v.resize(un * kv_dim);
    s_.gate.resize(un * F);
    s_.up.resize(un * F);
    cuda_check(
        cudaMemcpyAsync(s_.tokens.data(), tokens, un * sizeof(int32_t), cudaMemcpyHostToDevice, cs),
        "tokens to device");
    cuda_check(cudaMemcpyAsync(s_.pos.data(), kept_pos.data(), un * sizeof(int32_t),
                               cudaMemcpyHostToDevice, cs),
               "positions to device");
    embed(tok_embd_.w.data(), E, s_.tokens.data(), n, std::sqrt(static_cast<float>(E)), s_.x.data(),
          cs);

    for (int il = 0; il < I.n_layer; ++il) {
        if (cancel && cancel->load())
            throw Cancelled();
        const auto& L = layers_[static_cast<size_t>(il)];
        const auto& LI = I.layers[static_cast<size_t>(il)];
        cuda_check(cudaMemcpyAsync(s_.h.data(), s_.x.data(), static_cast<size_t>(n * E) * 4,
                                   cudaMemcpyDeviceToDevice, cs),
                   "copy x");
        rms_norm(s_.h.data(), L.attn_norm.data(), n, E, I.rms_eps, cs);
        s_.h16.resize(static_cast<size_t>(n * E));
        to_half(s_.h.data(), s_.h16.data(), n * E, cs);
        matmul(*ctx_, L.wq, s_.h16.data(), n, s_.q.data());
        matmul(*ctx_, L.wk, s_.h16.data(), n, s_.k.data());
        matmul(*ctx_, L.wv, s_.h16.data(), n, s_.v.data());
        rms_norm(s_.q.data(), L.q_norm.data(), n * I.n_head, I.head_dim, I.rms_eps, cs);
        rms_norm(s_.k.data(), L.k_norm.data(), n * I.n_head_kv, I.head_dim, I.rms_eps, cs);
        rope_neox(s_.q.data(), s_.pos.data(), n, I.n_head, I.head_dim, LI.rope.base, cs);
        rope_neox(s_.k.data(), s_.pos.data(), n, I.n_head_kv, I.head_dim, LI.rope.base, cs);

        LayerMemory& mem = memory.layer(il);
        if (auto* dm = dynamic_cast<DeviceLayerMemory*>(&mem)) {
            dm->store_device(s_.k.data(), s_.v.data(), s_.pos.data(), kept_pos.data(), n);
            dm->attend_device(s_.q.data(), s_.pos.data(), kept_pos.data(), n, s_.att.data(), pool);
        } else {
            attend_on_host(mem, kept_pos.data(), n, pool);
        }

        project(L.wo, s_.att.data(), n, s_.o.data());
        rms_norm(s_.o.data(), L.post_attn_norm.data(), n, E, I.rms_eps, cs);
        add_inplace(s_.x.data(), s_.o.data(), n * E, cs);

        if (cancel && cancel->load())
            throw Cancelled();
        cuda_check(cudaMemcpyAsync(s_.h.data(), s_.x.data(), static_cast<size_t>(n * E) * 4,
                                   cudaMemcpyDeviceToDevice, cs),
                   "copy x");
        rms_norm(s_.h.data(), L.ffn_norm.data(), n, E, I.rms_eps, cs);
        to_half(s_.h.data(), s_.h16.data(), n * E, cs);
        matmul(*ctx_, L.w_gate, s_.h16.data(), n, s_.gate.data());
        matmul(*ctx_, L.w_up, s_.h16.data(), n, s_.up.data());
        geglu_tanh(s_.gate.data(), s_.up.data(), n * F, cs);
        project(L.w_down, s_.gate.data(), n, s_.o.data());
        rms_norm(s_.o.data(), L.post_ffn_norm.data(), n, E, I.rms_eps, cs);
        add_inplace(s_.x.data(), s_.o.data(), n * E, cs);

        if (filter && il == filter->after_layer) {
            ctx_->sync();
            const std::vector<int64_t> keep = filter->keep();
            for (size_t r = 0; r < keep.size(); ++r)
                if (keep[r] < 0 || keep[r] >= n || (r > 0 && keep[r] <= keep[r - 1]))
                    throw std::invalid_argument("token filter: kept rows must be increasing "
                                                "indices into the ubatch");
            const auto m = static_cast<int64_t>(keep.size());
            if (m == 0)
                return;
            for (int64_t r = 0; r < m; ++r)
                kept_pos[static_cast<size_t>(r)] = kept_pos[static_cast<size_t>(keep[r])];
            kept_pos.resize(static_cast<size_t>(m));
            s_.rows.resize(static_cast<size_t>(m));
            cuda_check(cudaMemcpyAsync(s_.rows.data(), keep.data(), keep.size() * sizeof(int64_t),
                                       cudaMemcpyHostToDevice, cs),
                       "kept rows to device");
            gather_rows(s_.x.data(), s_.rows.data(), m, E, s_.tmp.data(), cs);
            cuda_check(cudaMemcpyAsync(s_.x.data(), s_.tmp.data(), static_cast<size_t>(m * E) * 4,
                                       cudaMemcpyDeviceToDevice, cs),
                       "kept rows");
            cuda_check(cudaMemcpyAsync(s_.pos.data(), kept_pos.data(),
                                       static_cast<size_t>(m) * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, cs),
                       "kept positions");
            ctx_->sync(); // keep and kept_pos are host arrays that change below
            n = m;
        }
    }

    if (surprisal) {
        rms_norm(s_.x.data(), output_norm_.data(), n, E, I.rms_eps, cs);
        std::vector<int32_t> targets(surprisal->targets, surprisal->targets + n);
        for (const int32_t t : targets)
            if (t >= I.n_vocab)
                throw std::invalid_argument("surprisal target " + std::to_string(t) +
                                            " outside the vocabulary");
        s_.targets.resize(static_cast<size_t>(n));
        s_.surprisal.resize(static_cast<size_t>(n));
        cuda_check(cudaMemcpyAsync(s_.targets.data(), targets.data(),
                                   targets.size() * sizeof(int32_t), cudaMemcpyHostToDevice, cs),
                   "targets to device");
        // Rows in slices whose logits stay under 256 MiB.
        const int64_t slice = std::max<int64_t>(1, (int64_t{64} << 20) / I.n_vocab);
        s_.logits.resize(static_cast<size_t>(std::min(slice, n) * I.n_vocab));
        s_.h16.resize(static_cast<size_t>(n * E));
        to_half(s_.x.data(), s_.h16.data(), n * E, cs);
        for (int64_t r0 = 0; r0 < n; r0 += slice) {
            if (cancel && cancel->load())
                throw Cancelled();
            const int64_t nr = std::min(slice, n - r0);
            matmul(*ctx_, tok_embd_, s_.h16.data() + r0 * E, nr, s_.logits.data());
            surprisal_rows(s_.logits.data(), nr, I.n_vocab, s_.targets.data() + r0,
                           s_.surprisal.data() + r0, cs);
        }
        cuda_check(cudaMemcpyAsync(surprisal->surprisal, s_.surprisal.data(),
                                   static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                   cs),
                   "surprisal to host");
    }
    if (!logit_rows.empty()) {
        const auto m = static_cast<int64_t>(logit_rows.size());
        s_.rows.resize(logit_rows.size());
        cuda_check(cudaMemcpyAsync(s_.rows.data(), logit_rows.data(),
                                   logit_rows.size() * sizeof(int64_t), cudaMemcpyHostToDevice, cs),
                   "logit rows to device");
        s_.tmp.resize(static_cast<size_t>(m * E));
        gather_rows(s_.x.data(), s_.rows.data(), m, E, s_.tmp.data(), cs);
        if (!surprisal) // the surprisal path normed x already
            rms_norm(s_.tmp.data(), output_norm_.data(), m, E, I.rms_eps, cs);
        s_.logits.resize(static_cast<size_t>(m * I.n_vocab));
        project(tok_embd_, s_.tmp.data(), m, s_.logits.data());
        cuda_check(cudaMemcpyAsync(logits, s_.logits.data(),
                                   static_cast<size_t>(m * I.n_vocab) * sizeof(float),
                                   cudaMemcpyDeviceToHost, cs),
                   "logits to host");
    }
    ctx_->sync();
}

} // namespace

std::unique_ptr<Model> load_gemma3(std::unique_ptr<Model> cpu) {
    return std::make_unique<CudaGemma3Model>(*cpu);
}

} // namespace spanscope::cuda
