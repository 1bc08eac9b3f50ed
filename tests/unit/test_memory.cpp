// Memory policies behind the attention interface: the sliding ring buffer against full
// attention with an explicit window mask (tests/README.md, failure mode 2), positions kept absolute
// (tests/README.md, failure mode 3), and attention against a naive double-precision reference.
#include "engine/kernels/attention.h"
#include "engine/memory/memory_full.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/memory/memory_sliding.h"
#include "random_fill.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace spanscope;
using spanscope::test::randn;

namespace {

// out[i][h] by the definition, in double, with the window rule written out.
std::vector<float> naive(const AttentionShape& s, const std::vector<float>& q,
                         const std::vector<int32_t>& qpos, const std::vector<float>& k,
                         const std::vector<float>& v, const std::vector<int32_t>& kpos) {
    const int d = s.head_dim, H = s.n_head, G = s.n_kv_head;
    std::vector<float> out(q.size(), 0.0f);
    for (size_t i = 0; i < qpos.size(); ++i)
        for (int h = 0; h < H; ++h) {
            const int g = h / (H / G);
            std::vector<double> w(kpos.size(), 0.0);
            double mx = -1e300;
            for (size_t j = 0; j < kpos.size(); ++j) {
                if (kpos[j] > qpos[i] || (s.window > 0 && qpos[i] - kpos[j] >= s.window)) {
                    w[j] = -1e300;
                    continue;
                }
                double dot = 0;
                for (int c = 0; c < d; ++c)
                    dot += double(q[(i * H + h) * d + c]) * k[(j * G + g) * d + c];
                w[j] = dot * s.scale;
                mx = std::max(mx, w[j]);
            }
            double sum = 0;
            for (auto& x : w)
                sum += (x = x <= -1e299 ? 0.0 : std::exp(x - mx));
            for (size_t j = 0; j < kpos.size(); ++j)
                for (int c = 0; c < d; ++c)
                    out[(i * H + h) * d + c] += float(w[j] / sum * v[(j * G + g) * d + c]);
        }
    return out;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < a.size(); ++i)
        m = std::max(m, std::abs(a[i] - b[i]));
    return m;
}

} // namespace

TEST(Attention, MatchesNaiveReferenceSortedOrNot) {
    std::mt19937_64 rng(1);
    AttentionShape s{4, 2, 16, 0.25f, 0};
    ThreadPool pool(2);
    for (int n_q : {70, 3, 1}) { // sgemm blocks, and the matrix-vector path of decode
        const int n_kv = 150;
        auto k = randn(n_kv * 2 * 16, rng), v = randn(n_kv * 2 * 16, rng);
        auto q = randn(n_q * 4 * 16, rng);
        std::vector<int32_t> kpos(n_kv), qpos(n_q);
        for (int j = 0; j < n_kv; ++j)
            kpos[j] = 1000 + j;
        for (int i = 0; i < n_q; ++i)
            qpos[i] = 1000 + 80 + i;
        for (int window : {0, 16}) {
            s.window = window;
            const auto ref = naive(s, q, qpos, k, v, kpos);
            for (bool sorted : {false, true}) {
                std::vector<float> out(q.size());
                attention(s, q.data(), qpos.data(), n_q, k.data(), v.data(), kpos.data(), n_kv,
                          out.data(), pool, sorted);
                EXPECT_LT(max_diff(out, ref), 1e-5f)
                    << "n_q " << n_q << " window " << window << " sorted " << sorted;
            }
        }
    }
}

TEST(SlidingMemory, EqualsFullAttentionWithAWindowMask) {
    std::mt19937_64 rng(2);
    const AttentionShape s{4, 1, 8, 0.3f, 8};
    ThreadPool pool(2);
    const int max_ubatch = 5;
    SlidingMemory ring(s, max_ubatch);
    FullMemory full(s, 1000); // same shape, window applied by the mask over every key
    EXPECT_EQ(ring.capacity(), s.window - 1 + max_ubatch);
    int32_t pos = 500; // absolute positions need not start at 0
    for (int step = 0; step < 20; ++step) {
        const int n = 1 + step % max_ubatch;
        auto k = randn(n * 8, rng), v = randn(n * 8, rng), q = randn(n * 4 * 8, rng);
        std::vector<int32_t> p(n);
        for (int i = 0; i < n; ++i)
            p[i] = pos++;
        ring.store(k.data(), v.data(), p.data(), n);
        full.store(k.data(), v.data(), p.data(), n);
        std::vector<float> a(q.size()), b(q.size());
        ring.attend(q.data(), p.data(), n, a.data(), pool);
        full.attend(q.data(), p.data(), n, b.data(), pool);
        EXPECT_LT(max_diff(a, b), 1e-5f) << "step " << step;
        EXPECT_LE(ring.stats().rows_resident, ring.capacity());
    }
    EXPECT_EQ(ring.n_tokens(), full.n_tokens());
    EXPECT_LT(ring.stats().fast_tier_bytes, full.stats().fast_tier_bytes);
}

TEST(SlidingMemory, RefusesAnOversizedUbatch) {
    const AttentionShape s{1, 1, 4, 1.0f, 4};
    SlidingMemory ring(s, 2);
    std::vector<float> k(3 * 4), v(3 * 4);
    std::vector<int32_t> p{0, 1, 2};
    EXPECT_THROW(ring.store(k.data(), v.data(), p.data(), 3), std::length_error);
}

TEST(FullMemory, RefusesPastTheContextAndDecreasingPositions) {
    const AttentionShape s{1, 1, 4, 1.0f, 0};
    FullMemory m(s, 3);
    std::vector<float> k(4 * 4), v(4 * 4);
    std::vector<int32_t> p{0, 1, 2, 3};
    EXPECT_THROW(m.store(k.data(), v.data(), p.data(), 4), std::length_error);
    m.store(k.data(), v.data(), p.data(), 2);
    std::vector<int32_t> back{1};
    EXPECT_THROW(m.store(k.data(), v.data(), back.data(), 1), std::invalid_argument);
    EXPECT_EQ(m.stats().rows_resident, 2);
    EXPECT_EQ(m.stats().fast_tier_bytes, 2 * (2 * 4 * 4 + 4));
}

TEST(ModelMemory, CloneIsIndependent) {
    const AttentionShape s{1, 1, 4, 1.0f, 0};
    std::vector<std::unique_ptr<LayerMemory>> layers;
    layers.push_back(std::make_unique<FullMemory>(s, 10));
    ModelMemory m(std::move(layers));
    std::vector<float> k(4, 1.0f), v(4, 1.0f);
    int32_t p = 0;
    m.layer(0).store(k.data(), v.data(), &p, 1);
    ModelMemory c = m.clone();
    p = 1;
    m.layer(0).store(k.data(), v.data(), &p, 1);
    EXPECT_EQ(m.n_tokens(), 2);
    EXPECT_EQ(c.n_tokens(), 1);
}

// A hybrid model's memory: attention layers and recurrent states side by side.
TEST(ModelMemory, HoldsRecurrentLayersBesideAttention) {
    const AttentionShape s{1, 1, 4, 1.0f, 0};
    Mamba2Shape m2;
    m2.d_model = 8;
    m2.d_inner = 16;
    m2.d_state = 4;
    m2.n_heads = 4;
    m2.head_dim = 4;
    m2.n_groups = 2;
    m2.d_conv = 4;
    std::vector<std::unique_ptr<LayerMemory>> a(2);
    std::vector<std::unique_ptr<RecurrentMemory>> r(2);
    r[0] = std::make_unique<RecurrentMemory>(m2);
    a[1] = std::make_unique<FullMemory>(s, 10);
    ModelMemory m(std::move(a), std::move(r));
    EXPECT_TRUE(m.is_recurrent(0));
    EXPECT_FALSE(m.is_recurrent(1));
    EXPECT_TRUE(m.has_recurrent());
    EXPECT_THROW(m.layer(0), std::logic_error);
    EXPECT_THROW(m.recurrent(1), std::logic_error);
    EXPECT_THROW(m.recurrent(2), std::out_of_range);
    EXPECT_THROW(m.recurrent(0).gated_deltanet(), std::logic_error);
    EXPECT_THROW(m.replace(0, std::make_unique<FullMemory>(s, 10)), std::logic_error);
    EXPECT_TRUE(m.sealing_layers().empty());
    // Bytes of the state: ssm H*P*N + conv (d_conv-1)*(d_inner + 2*G*N) + H log-decay, fp32.
    const int64_t state_bytes = 4 * (4 * 4 * 4 + 3 * (16 + 2 * 2 * 4) + 4);
    EXPECT_EQ(m.recurrent(0).bytes(), state_bytes);
    EXPECT_EQ(m.total("recurrent").fast_tier_bytes, state_bytes);

    std::vector<float> k(4, 1.0f), v(4, 1.0f);
    int32_t p = 0;
    m.layer(1).store(k.data(), v.data(), &p, 1);
    m.recurrent(0).mamba2().ssm[3] = 2.5f;
    m.recurrent(0).advance(1);
    EXPECT_EQ(m.n_tokens(), 1);
    EXPECT_EQ(m.total().fast_tier_bytes, state_bytes + m.layer(1).stats().fast_tier_bytes);
    ModelMemory c = m.clone();
    m.recurrent(0).mamba2().ssm[3] = -1.0f;
    m.recurrent(0).advance(1);
    EXPECT_EQ(c.recurrent(0).mamba2().ssm[3], 2.5f);
    EXPECT_EQ(c.n_tokens(), 1);
    EXPECT_EQ(m.n_tokens(), 2);
    m.clear();
    EXPECT_EQ(m.n_tokens(), 0);
    EXPECT_EQ(m.recurrent(0).mamba2().ssm[3], 0.0f);
    EXPECT_EQ(m.layer(1).n_tokens(), 0);
    EXPECT_THROW(m.recurrent(0).advance(-1), std::invalid_argument);
}

TEST(ModelMemory, RejectsLayersWithoutExactlyOneMemory) {
    const AttentionShape s{1, 1, 4, 1.0f, 0};
    GatedDeltaNetShape g;
    g.d_model = 8;
    g.n_k_heads = 1;
    g.n_v_heads = 2;
    g.d_k = 4;
    g.d_v = 4;
    std::vector<std::unique_ptr<LayerMemory>> a(1);
    std::vector<std::unique_ptr<RecurrentMemory>> r(1);
    a[0] = std::make_unique<FullMemory>(s, 10);
    r[0] = std::make_unique<RecurrentMemory>(g);
    EXPECT_THROW(ModelMemory(std::move(a), std::move(r)), std::invalid_argument);
    std::vector<std::unique_ptr<LayerMemory>> a2(1);
    std::vector<std::unique_ptr<RecurrentMemory>> r2(1);
    EXPECT_THROW(ModelMemory(std::move(a2), std::move(r2)), std::invalid_argument);
}
