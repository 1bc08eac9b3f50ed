// Backend parity, in the style of a backend-ops suite (llama.cpp's test-backend-ops): every
// CUDA kernel and a whole forward pass against the CPU engine with the same inputs, compared by
// normalised mean squared error (NMSE = Σ(a − b)² / Σb²), and greedy continuations that agree.
// The CPU side is the engine's own tested code (itself checked against independent references
// in test_ops, test_quant and test_gemma3_tiny). Without a GPU every test skips and says why.
#include "cuda_test_support.h"
#include "engine/kernels/fp16.h"
#include "engine/kernels/ops.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/quant.h"
#include "engine/memory/memory_full.h"
#include "engine/memory/memory_sliding.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#ifdef SPANSCOPE_HAVE_CUDA
#include "engine/cuda/cuda_attention.h"
#include "engine/cuda/cuda_kernels.h"
#include "engine/cuda/cuda_kv_memory.h"
#include "engine/cuda/cuda_matmul.h"
#endif

using namespace spanscope;
using namespace spanscope::test;

#ifndef SPANSCOPE_HAVE_CUDA

TEST(CudaParity, NeedsTheCudaBackend) {
    const auto st = backend_status(Backend::Cuda);
    EXPECT_FALSE(st.usable);
    if (std::getenv("SPANSCOPE_REQUIRE_GPU"))
        FAIL() << "SPANSCOPE_REQUIRE_GPU is set but this build has no CUDA backend";
    GTEST_SKIP() << "CUDA parity not run: " << st.detail;
}

#else

namespace {

using cuda::DeviceBuffer;

TEST_F(CudaParity, RmsNorm) {
    for (const int64_t n : {64, 640, 1000}) {
        const int64_t rows = 37;
        auto x = randn(size_t(rows * n), 1, 3.0f);
        const auto w = randn(size_t(n), 2);
        auto dx = up(x);
        auto dw = up(w);
        cuda::rms_norm(dx.data(), dw.data(), rows, n, 1e-6f, stream());
        const auto got = down(dx, x.size());
        rms_norm(x.data(), w.data(), rows, n, 1e-6f);
        EXPECT_LT(nmse(got, x), 1e-12) << "n = " << n;
    }
}

TEST_F(CudaParity, RopeAtBothGemmaBasesAndFarPositions) {
    const int n_heads = 4, d = 256;
    std::vector<int32_t> pos;
    for (int32_t p : {0, 1, 7, 511, 4095, 16383, 32767, 131071})
        pos.push_back(p);
    const auto n = static_cast<int64_t>(pos.size());
    for (const double base : {1e6, 1e4}) {
        auto x = randn(size_t(n * n_heads * d), 3);
        auto dx = up(x);
        auto dp = up(pos);
        cuda::rope_neox(dx.data(), dp.data(), n, n_heads, d, base, stream());
        const auto got = down(dx, x.size());
        const RopeTable table(pos.data(), n, d, base);
        rope_neox(x.data(), table, n, n_heads);
        EXPECT_LT(nmse(got, x), 1e-12) << "base " << base;
    }
}

TEST_F(CudaParity, GegluAndAdd) {
    const size_t n = 100003;
    auto g = randn(n, 4, 2.0f);
    const auto u = randn(n, 5);
    auto dg = up(g);
    auto du = up(u);
    cuda::geglu_tanh(dg.data(), du.data(), int64_t(n), stream());
    cuda::add_inplace(dg.data(), du.data(), int64_t(n), stream());
    const auto got = down(dg, n);
    geglu_tanh(g.data(), u.data(), int64_t(n));
    add_inplace(g.data(), u.data(), int64_t(n));
    EXPECT_LT(nmse(got, g), 1e-12);
}

// Weights of each type the default model uses, quantised here, against the CPU's product.
TEST_F(CudaParity, MatmulForEveryWeightType) {
    const int64_t cols = 512, rows = 96, n = 19;
    const auto wf = randn(size_t(rows * cols), 6, 0.05f);
    const auto x = randn(size_t(n * cols), 7);
    ThreadPool pool(2);
    for (const TensorType t :
         {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K}) {
        const size_t rb = row_bytes(t, cols);
        std::vector<uint8_t> data(rb * rows);
        for (int64_t r = 0; r < rows; ++r)
            quantize_row(t, wf.data() + r * cols, data.data() + r * rb, cols);
        WeightMatrix w;
        w.type = t;
        w.cols = cols;
        w.rows = rows;
        w.data = data.data();
        w.row_stride = rb;
        std::vector<float> want(size_t(n * rows));
        matmul(w, x.data(), n, want.data(), pool);
        const auto dw = cuda::DeviceMatrix::upload(w);
        auto dx = up(x);
        DeviceBuffer<__half> dx16(x.size());
        DeviceBuffer<float> dy(want.size());
        cuda::to_half(dx.data(), dx16.data(), int64_t(x.size()), stream());
        cuda::matmul(*ctx_, dw, dx16.data(), n, dy.data());
        // f16 activations and weights (the CPU quantises activations to 8 bits for quantised
        // weights): agreement to about 1e-3 relative.
        EXPECT_LT(nmse(down(dy, want.size()), want), 1e-4) << traits(t).name;
    }
}

TEST_F(CudaParity, EmbeddingGatherSurprisalArgmax) {
    const int64_t V = 1000, E = 64, n = 9;
    const auto table = randn(size_t(V * E), 8);
    std::vector<uint16_t> t16(table.size());
    std::vector<float> table_r(table.size()); // the table as f16 holds it
    for (size_t i = 0; i < table.size(); ++i) {
        t16[i] = fp32_to_fp16(table[i]);
        table_r[i] = fp16_to_fp32(t16[i]);
    }
    DeviceBuffer<__half> dt(t16.size());
    dt.upload(reinterpret_cast<const __half*>(t16.data()), t16.size());
    const std::vector<int32_t> tokens{0, 999, 5, 5, 17, 400, 3, 2, 998};
    auto dtok = up(tokens);
    DeviceBuffer<float> dx(size_t(n * E));
    cuda::embed(dt.data(), E, dtok.data(), n, 8.0f, dx.data(), stream());
    const auto x = down(dx, size_t(n * E));
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < E; ++i)
            ASSERT_EQ(x[size_t(t * E + i)], table_r[size_t(tokens[size_t(t)] * E + i)] * 8.0f);
    // Rows gathered (repeated and out of order) are copies of those rows.
    const std::vector<int64_t> rows{8, 0, 0, 3};
    auto drows = up(rows);
    DeviceBuffer<float> dy(rows.size() * size_t(E));
    cuda::gather_rows(dx.data(), drows.data(), int64_t(rows.size()), E, dy.data(), stream());
    const auto y = down(dy, rows.size() * size_t(E));
    for (size_t r = 0; r < rows.size(); ++r)
        for (int64_t i = 0; i < E; ++i)
            ASSERT_EQ(y[r * size_t(E) + size_t(i)], x[size_t(rows[r] * E + i)]);

    // Surprisal and argmax over rows of logits (the second row with a tie: the first wins).
    auto logits = randn(size_t(3 * V), 9, 4.0f);
    logits[size_t(V + 10)] = logits[size_t(V + 20)] = 100.0f;
    const std::vector<int32_t> targets{3, -1, 999};
    auto dl = up(logits);
    auto dtg = up(targets);
    DeviceBuffer<float> ds(3);
    DeviceBuffer<int32_t> da(3);
    cuda::surprisal_rows(dl.data(), 3, V, dtg.data(), ds.data(), stream());
    cuda::argmax_rows(dl.data(), 3, V, da.data(), stream());
    const auto s = down(ds, 3);
    const auto a = down(da, 3);
    for (int r = 0; r < 3; ++r) {
        const float* row = logits.data() + r * V;
        double m = row[0], sum = 0;
        for (int64_t i = 0; i < V; ++i)
            m = std::max<double>(m, row[i]);
        for (int64_t i = 0; i < V; ++i)
            sum += std::exp(row[i] - m);
        if (targets[size_t(r)] < 0)
            EXPECT_TRUE(std::isnan(s[size_t(r)]));
        else
            EXPECT_NEAR(s[size_t(r)], m + std::log(sum) - row[targets[size_t(r)]], 1e-3);
        EXPECT_EQ(a[size_t(r)], int32_t(std::max_element(row, row + V) - row));
    }
    EXPECT_EQ(a[1], 10);
}

// The device memories against the CPU's: the same stores (several ubatches, the ring of the
// sliding layer wrapping), then attention of a prefill ubatch and of one decode query.
void compare_memories(CudaParity& t, std::shared_ptr<cuda::Context> ctx, const AttentionShape& s,
                      int64_t capacity, int64_t ubatch) {
    std::unique_ptr<LayerMemory> cpu;
    if (s.window > 0)
        cpu = std::make_unique<SlidingMemory>(s, ubatch);
    else
        cpu = std::make_unique<FullMemory>(s, capacity);
    cuda::DeviceKvMemory dev(s, capacity, ubatch, ctx);
    ThreadPool pool(2);
    const int64_t kv_w = int64_t(s.n_kv_head) * s.head_dim, q_w = int64_t(s.n_head) * s.head_dim;
    int32_t p = 0;
    uint64_t seed = 100;
    for (int step = 0; step < 6; ++step) {
        const int64_t n = step == 5 ? 1 : ubatch; // the last: one decode token
        const auto k = randn(size_t(n * kv_w), seed++), v = randn(size_t(n * kv_w), seed++);
        const auto q = randn(size_t(n * q_w), seed++);
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (auto& x : pos)
            x = p++;
        cpu->store(k.data(), v.data(), pos.data(), n);
        dev.store(k.data(), v.data(), pos.data(), n);
        std::vector<float> want(q.size()), got(q.size());
        cpu->attend(q.data(), pos.data(), n, want.data(), pool);
        dev.attend(q.data(), pos.data(), n, got.data(), pool);
        EXPECT_LT(nmse(got, want), 1e-10) << "step " << step << " window " << s.window;
    }
    std::vector<float> k1, v1, k2, v2;
    std::vector<int32_t> p1, p2;
    EXPECT_EQ(cpu->read_rows(0, p, k1, v1, p1), dev.read_rows(0, p, k2, v2, p2));
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(k1, k2); // both hold f16-rounded rows
    EXPECT_EQ(v1, v2);
    EXPECT_EQ(cpu->stats().rows_resident, dev.stats().rows_resident);
    // The clone holds the same rows and attends as the original, and is independent of it.
    auto clone = dev.clone();
    std::vector<float> k3, v3;
    std::vector<int32_t> p3;
    clone->read_rows(0, p, k3, v3, p3);
    EXPECT_EQ(p3, p2);
    EXPECT_EQ(k3, k2);
    EXPECT_EQ(v3, v2);
    const auto q = randn(size_t(q_w), seed++);
    const int32_t qp = p - 1;
    std::vector<float> a1(q.size()), a2(q.size());
    dev.attend(q.data(), &qp, 1, a1.data(), pool);
    clone->attend(q.data(), &qp, 1, a2.data(), pool);
    EXPECT_EQ(a1, a2);
    dev.clear();
    EXPECT_EQ(clone->n_tokens(), p);
    (void)t;
}

TEST_F(CudaParity, AttentionThroughDeviceMemories) {
    AttentionShape s;
    s.n_head = 4;
    s.n_kv_head = 1;
    s.head_dim = 256;
    s.scale = 1.0f / 16.0f;
    compare_memories(*this, ctx_, s, 4096, 300); // global, causal
    s.window = 512;
    compare_memories(*this, ctx_, s, 4096, 300); // sliding: the ring wraps after two ubatches
    s.n_kv_head = 2;
    s.head_dim = 64;
    s.window = 0;
    compare_memories(*this, ctx_, s, 4096, 200); // grouped heads, another head size

    // A query that sees no key (every key after it) gets zeros, as attention.h says.
    const std::vector<float> q = randn(size_t(s.n_head * s.head_dim), 77);
    const std::vector<float> kv = randn(size_t(3 * s.n_kv_head * s.head_dim), 78);
    std::vector<__half> kv16(kv.size());
    for (size_t i = 0; i < kv.size(); ++i)
        kv16[i] = __float2half(kv[i]);
    auto dq = up(q);
    auto dk = up(kv16);
    auto dkp = up(std::vector<int32_t>{10, 11, 12});
    auto dqp = up(std::vector<int32_t>{5});
    DeviceBuffer<float> dout(q.size());
    cuda::attention(s, dq.data(), dqp.data(), 1, dk.data(), dk.data(), dkp.data(), 3, dout.data(),
                    /*keys_sorted=*/true, stream());
    for (const float o : down(dout, q.size()))
        ASSERT_EQ(o, 0.0f);
}

// The whole model: CPU and CUDA forward passes of a tiny Gemma 3 (quantised weights, sliding
// and global layers) give the same logits and the same greedy continuation.
class CudaModelParity : public CudaParity {};

TEST_F(CudaModelParity, LogitsAndGreedyContinuation) {
    const std::string dir = temp_dir();
    const std::string path = dir + "/tiny.gguf";
    TinyGemma3Config c;
    c.n_layer = 6;
    c.n_embd = 256;
    c.n_ff = 512;
    c.n_head = 4;
    c.n_head_kv = 1;
    c.head_dim = 64;
    c.n_ctx = 1024;
    c.sliding_window = 32;
    c.sliding_pattern = 3;
    c.matrix_type = TensorType::Q4_K;
    c.embd_type = TensorType::Q6_K;
    write_tiny_gemma3(path, c);
    auto cpu = Model::load(path);
    auto gpu = load_model(path, Backend::Cuda);
    EXPECT_STREQ(gpu->backend(), "cuda");
    const auto prompt = random_tokens(200, cpu->info().n_vocab, 21);
    for (const std::string policy : {"full", "sekv"}) {
        SessionOptions so;
        so.threads = 2;
        so.n_ctx = 512;
        so.ubatch = 64;
        so.global_policy = policy;
        Session a(*cpu, so), b(*gpu, so);
        std::vector<float> sa(prompt.size()), sb(prompt.size());
        auto la = a.prefill(prompt, nullptr, {}, sa.data());
        auto lb = b.prefill(prompt, nullptr, {}, sb.data());
        EXPECT_LT(nmse(lb, la), 1e-3) << policy;
        // The last row's target is unknown (NaN on both): compared are the others.
        EXPECT_TRUE(std::isnan(sa.back()) && std::isnan(sb.back()));
        EXPECT_LT(nmse(std::vector<float>(sb.begin(), sb.end() - 1),
                       std::vector<float>(sa.begin(), sa.end() - 1)),
                  1e-3)
            << policy;
        if (policy == "sekv") {
            a.seal_context(sa.data(), 0, int64_t(prompt.size()));
            b.seal_context(sa.data(), 0, int64_t(prompt.size())); // the same segmentation
        }
        int agree = 0;
        for (int i = 0; i < 16; ++i) {
            const auto ta = int32_t(std::max_element(la.begin(), la.end()) - la.begin());
            const auto tb = int32_t(std::max_element(lb.begin(), lb.end()) - lb.begin());
            agree += ta == tb;
            la = a.decode(ta);
            lb = b.decode(ta); // both continue the CPU's text
            EXPECT_LT(nmse(lb, la), 1e-3) << policy << " token " << i;
        }
        EXPECT_GE(agree, 15) << policy << ": greedy tokens agreeing of 16";
    }

    // One forward call with several (repeated) logit rows, and one with a token filter that
    // keeps every other row after layer 1 (CacheBlend's recompute): the same logits, and the
    // same rows stored in the last layer.
    ThreadPool pool(2);
    const int64_t n = 48;
    std::vector<int32_t> pos(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        pos[size_t(i)] = int32_t(i);
    const std::vector<int64_t> rows{0, 5, 5, n - 1};
    const int64_t V = cpu->info().n_vocab;
    {
        auto mc = cpu->new_memory(256, n), mg = gpu->new_memory(256, n);
        std::vector<float> lc(rows.size() * size_t(V)), lg(lc.size());
        cpu->forward(prompt.data(), pos.data(), n, mc, rows, lc.data(), pool);
        gpu->forward(prompt.data(), pos.data(), n, mg, rows, lg.data(), pool);
        EXPECT_LT(nmse(lg, lc), 1e-3);
        EXPECT_TRUE(std::equal(lg.begin() + V, lg.begin() + 2 * V, lg.begin() + 2 * V));
    }
    {
        auto mc = cpu->new_memory(256, n), mg = gpu->new_memory(256, n);
        TokenFilter f;
        f.after_layer = 1;
        f.keep = [n] {
            std::vector<int64_t> keep;
            for (int64_t i = 0; i < n; i += 2)
                keep.push_back(i);
            return keep;
        };
        cpu->forward(prompt.data(), pos.data(), n, mc, {}, nullptr, pool, nullptr, nullptr, &f);
        gpu->forward(prompt.data(), pos.data(), n, mg, {}, nullptr, pool, nullptr, nullptr, &f);
        const int last = c.n_layer - 1;
        std::vector<float> kc, vc, kg, vg;
        std::vector<int32_t> pc, pg;
        mc.layer(last).read_rows(0, int32_t(n), kc, vc, pc);
        mg.layer(last).read_rows(0, int32_t(n), kg, vg, pg);
        EXPECT_EQ(pc.size(), size_t(n / 2));
        EXPECT_EQ(pc, pg);
        EXPECT_LT(nmse(kg, kc), 1e-3);
        EXPECT_LT(nmse(vg, vc), 1e-3);
    }
    std::filesystem::remove_all(dir);
}

} // namespace

#endif
