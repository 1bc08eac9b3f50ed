// SEKV on the GPU (cuda/cuda_sekv_memory.h) against SEKV on the CPU (memory_sekv.h): the same
// rows, seals and queries give the same routing and the same attention (NMSE), under every
// router setting; synchronous and asynchronous fetches, and caches of any size, give identical
// outputs; one layer's prefetch fills the next layer's cache, in clones too. The CPU memory is
// the engine's tested code (test_memory_sekv checks it against full attention). Without a GPU
// every test skips and says why.
#include "cuda_test_support.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/segmentation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#ifdef SPANSCOPE_HAVE_CUDA
#include "engine/cuda/cuda_sekv_memory.h"
#endif

using namespace spanscope;
using namespace spanscope::test;

#ifndef SPANSCOPE_HAVE_CUDA

TEST(CudaSekv, NeedsTheCudaBackend) {
    const auto st = backend_status(Backend::Cuda);
    EXPECT_FALSE(st.usable);
    if (std::getenv("SPANSCOPE_REQUIRE_GPU"))
        FAIL() << "SPANSCOPE_REQUIRE_GPU is set but this build has no CUDA backend";
    GTEST_SKIP() << "SEKV on the GPU not run: " << st.detail;
}

#else

namespace {

using cuda::DeviceSekvMemory;
using cuda::DeviceSekvOptions;

const AttentionShape kShape{4, 2, 64, 0.125f, 0};
constexpr int64_t kWidth = 2 * 64;
constexpr double kBase = 10000.0;

// A document of n rows and its segmentation (anchors, spans of at most 12 tokens).
struct Doc {
    int64_t n;
    std::vector<float> k, v, surprisal;
    Segmentation seg;
};

Doc make_doc(int64_t n, uint64_t seed) {
    Doc d{n, randn(size_t(n * kWidth), seed), randn(size_t(n * kWidth), seed + 1), {}, {}};
    std::mt19937 rng(uint32_t(seed + 2));
    std::exponential_distribution<float> e(1.0f);
    for (int64_t i = 0; i < n; ++i)
        d.surprisal.push_back(e(rng));
    d.surprisal[0] = NAN;
    d.seg = segment(d.surprisal.data(), n, {1.0, 4, 12});
    return d;
}

std::vector<int32_t> positions(int32_t begin, int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        p[size_t(i)] = begin + int32_t(i);
    return p;
}

// Store the document and seal it, then store `tail` more rows after it.
void fill(LayerMemory& m, const Doc& d, int64_t tail, uint64_t seed) {
    const auto p = positions(0, d.n);
    m.store(d.k.data(), d.v.data(), p.data(), d.n);
    const SealRequest r{&d.seg, d.surprisal.data(), 0, d.n};
    m.seal(r);
    const auto tk = randn(size_t(tail * kWidth), seed), tv = randn(tk.size(), seed + 1);
    const auto tp = positions(int32_t(d.n), tail);
    m.store(tk.data(), tv.data(), tp.data(), tail);
}

std::vector<float> attend(LayerMemory& m, const std::vector<float>& q, int32_t pos0, int64_t n_q,
                          ThreadPool& pool) {
    std::vector<float> out(q.size());
    const auto qp = positions(pos0, n_q);
    m.attend(q.data(), qp.data(), n_q, out.data(), pool);
    return out;
}

class CudaSekv : public CudaParity {};

TEST_F(CudaSekv, MatchesSekvOnTheHostUnderEveryRouterSetting) {
    ThreadPool pool(2);
    const Doc doc = make_doc(400, 11);
    struct Case {
        const char* name;
        SekvOptions o;
    };
    std::vector<Case> cases;
    for (int c = 0; c < 6; ++c) {
        SekvOptions o;
        o.rank = {16, 1.0, nullptr};
        o.router.expand_rate = 0.2;
        const char* name = "rate 0.2, shared by the KV group";
        if (c == 1) {
            o.router.expand_all = true;
            name = "every span expanded";
        } else if (c == 2) {
            o.summaries_only = true;
            name = "chunk_summary";
        } else if (c == 3) {
            o.router.budget_rows = 24;
            name = "a row budget of 24";
        } else if (c == 4) {
            o.router.share_group = false;
            name = "per query head";
        } else if (c == 5) {
            o.router.tau_per_query = true;
            name = "tau calibrated per query";
        }
        cases.push_back({name, o});
    }
    for (const auto& [name, o] : cases) {
        SekvMemory cpu(kShape, 1024, kBase, o);
        DeviceSekvMemory gpu(kShape, 1024, kBase, o, DeviceSekvOptions{}, ctx_);
        EXPECT_EQ(gpu.policy(), cpu.policy()) << name;
        fill(cpu, doc, 8, 90);
        fill(gpu, doc, 8, 90);
        ASSERT_EQ(gpu.spans().size(), cpu.spans().size()) << name;
        ASSERT_GT(cpu.spans().size(), 10u) << name;
        // The question (8 queries), then two decode steps.
        for (int step = 0; step < 3; ++step) {
            const int64_t n_q = step == 0 ? 8 : 1;
            const int32_t p0 = step == 0 ? int32_t(doc.n) : int32_t(doc.n + 8 + step - 1);
            if (step > 0) {
                const auto k = randn(size_t(kWidth), 200 + step), v = randn(k.size(), 300 + step);
                cpu.store(k.data(), v.data(), &p0, 1);
                gpu.store(k.data(), v.data(), &p0, 1);
            }
            const auto q = randn(size_t(n_q * kShape.n_head * kShape.head_dim), 100 + step, 2.0f);
            const auto want = attend(cpu, q, p0, n_q, pool);
            const auto got = attend(gpu, q, p0, n_q, pool);
            EXPECT_LT(nmse(got, want), 1e-8) << name << ", step " << step;
            ASSERT_EQ(gpu.last_zoom()->size(), cpu.last_zoom()->size());
            for (size_t h = 0; h < cpu.last_zoom()->size(); ++h)
                EXPECT_EQ((*gpu.last_zoom())[h].spans, (*cpu.last_zoom())[h].spans)
                    << name << ", step " << step << ", head " << h;
        }
        EXPECT_EQ(gpu.tau(), cpu.tau()) << name;
        const auto sg = gpu.stats(), sc = cpu.stats();
        EXPECT_EQ(sg.spans, sc.spans);
        EXPECT_EQ(sg.rows_resident, sc.rows_resident);
        EXPECT_LT(sg.fast_tier_bytes, sg.full_kv_bytes) << name;
        EXPECT_EQ(sg.host_tier_bytes > 0, !o.summaries_only) << name;
        // The tail reads back as rows; a range with a span in it is refused, as on the host.
        std::vector<float> kc, vc, kg, vg;
        std::vector<int32_t> pc, pg;
        cpu.read_rows(int32_t(doc.n), int32_t(doc.n + 100), kc, vc, pc);
        gpu.read_rows(int32_t(doc.n), int32_t(doc.n + 100), kg, vg, pg);
        EXPECT_EQ(pg, pc);
        EXPECT_EQ(kg, kc);
        EXPECT_THROW(gpu.read_rows(0, int32_t(doc.n), kg, vg, pg), std::logic_error);
    }
    // The oracle router scores every span's factors, which stay on the host: refused when the
    // memory is made, before any prefill, never in the middle of an answer.
    SekvOptions oracle;
    oracle.router.tau_per_query = oracle.router.oracle = true;
    EXPECT_NO_THROW(SekvMemory(kShape, 1024, kBase, oracle));
    EXPECT_THROW(DeviceSekvMemory(kShape, 1024, kBase, oracle, DeviceSekvOptions{}, ctx_),
                 std::invalid_argument);
    // So does two-stage routing, which scores its candidates' key factors on the host.
    SekvOptions rerank;
    rerank.router.tau_per_query = true;
    rerank.router.rerank = 4;
    EXPECT_NO_THROW(SekvMemory(kShape, 1024, kBase, rerank));
    EXPECT_THROW(DeviceSekvMemory(kShape, 1024, kBase, rerank, DeviceSekvOptions{}, ctx_),
                 std::invalid_argument);
}

// The spans one attention call of a single query expands: the union of its heads' zoom.
std::vector<int32_t> expanded_union(const LayerMemory& m) {
    std::vector<int32_t> u;
    for (const auto& h : *m.last_zoom())
        u.insert(u.end(), h.spans.begin(), h.spans.end());
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    return u;
}

TEST_F(CudaSekv, SynchronousAndAsynchronousFetchesAndAnyCacheSizeGiveIdenticalOutputs) {
    ThreadPool pool(2);
    const Doc doc = make_doc(500, 21);
    SekvOptions o;
    o.rank = {16, 1.0, nullptr};
    o.router.expand_rate = 0.3;
    o.router.budget_rows = 12; // a few spans per query head: each query wants other spans
    DeviceSekvOptions tiny_async, tiny_sync, big;
    tiny_async.cache_bytes = tiny_sync.cache_bytes = 1; // only what one call needs: evictions
    tiny_sync.async_fetch = false;
    DeviceSekvMemory a(kShape, 1024, kBase, o, tiny_async, ctx_);
    DeviceSekvMemory b(kShape, 1024, kBase, o, tiny_sync, ctx_);
    DeviceSekvMemory c(kShape, 1024, kBase, o, big, ctx_);
    for (auto* m : {&a, &b, &c})
        fill(*m, doc, 4, 91);
    std::vector<int32_t> seen;
    int64_t expansions = 0;
    for (int step = 0; step < 8; ++step) {
        // Steps 4..7 repeat the queries of 0..3: the big cache holds their spans.
        const auto q = randn(size_t(kShape.n_head * kShape.head_dim), 400 + step % 4, 2.0f);
        const int32_t p0 = int32_t(doc.n);
        const auto oa = attend(a, q, p0, 1, pool);
        const auto ob = attend(b, q, p0, 1, pool);
        const auto oc = attend(c, q, p0, 1, pool);
        EXPECT_EQ(oa, ob) << "step " << step;
        EXPECT_EQ(oa, oc) << "step " << step;
        const auto u = expanded_union(a);
        EXPECT_EQ(expanded_union(c), u);
        expansions += int64_t(u.size());
        seen.insert(seen.end(), u.begin(), u.end());
    }
    std::sort(seen.begin(), seen.end());
    const auto distinct = int64_t(std::unique(seen.begin(), seen.end()) - seen.begin());
    ASSERT_GT(expansions, distinct) << "the repeated queries expand spans again";
    // The big cache holds every span: each is fetched once, every later expansion is a hit.
    const auto sa = a.stats(), sb = b.stats(), sc = c.stats();
    EXPECT_EQ(sc.factor_fetches, distinct);
    EXPECT_EQ(sc.factor_hits, expansions - distinct);
    EXPECT_EQ(sc.factor_evictions, 0);
    // The small one evicts and fetches again; synchronous or not, the cache decides alike.
    EXPECT_GT(sa.factor_evictions, 0);
    EXPECT_GT(sa.factor_fetches, sc.factor_fetches);
    EXPECT_EQ(sa.factor_fetches + sa.factor_hits, expansions);
    EXPECT_EQ(sb.factor_fetches, sa.factor_fetches);
    EXPECT_EQ(sb.factor_prefetches, 0);
    EXPECT_GT(sc.cache_bytes, sa.cache_bytes);
}

TEST_F(CudaSekv, OneLayersExpansionsArePrefetchedIntoTheNextLayersCacheAndClonesKeepTheChain) {
    ThreadPool pool(2);
    const Doc doc = make_doc(400, 31);
    // The next layer: the same keys (so the same query expands the same spans there), values
    // of its own (so its answer depends on its own factors, which the prefetch must bring).
    Doc other = make_doc(400, 41);
    other.k = doc.k;
    other.seg = doc.seg;
    other.surprisal = doc.surprisal;
    SekvOptions o;
    o.rank = {16, 1.0, nullptr};
    o.router.expand_rate = 0.25;
    auto first =
        std::make_unique<DeviceSekvMemory>(kShape, 1024, kBase, o, DeviceSekvOptions{}, ctx_);
    auto second =
        std::make_unique<DeviceSekvMemory>(kShape, 1024, kBase, o, DeviceSekvOptions{}, ctx_);
    DeviceSekvMemory alone(kShape, 1024, kBase, o, DeviceSekvOptions{}, ctx_);
    auto chain = std::make_shared<cuda::SekvPrefetchChain>();
    first->join(chain, 0);
    second->join(chain, 1);
    EXPECT_THROW(alone.join(chain, 1), std::logic_error);
    fill(*first, doc, 4, 92);
    fill(*second, other, 4, 92);
    fill(alone, other, 4, 92);
    // Clones of both layers, in layer order, as ModelMemory::clone makes them.
    auto first_clone = first->clone();
    auto second_clone = second->clone();

    const auto q = randn(size_t(kShape.n_head * kShape.head_dim), 500, 2.0f);
    const int32_t p0 = int32_t(doc.n);
    attend(*first, q, p0, 1, pool);
    const auto expanded = int64_t(expanded_union(*first).size());
    ASSERT_GT(expanded, 0);
    EXPECT_EQ(second->stats().factor_prefetches, expanded);
    EXPECT_EQ(alone.stats().factor_prefetches, 0);
    EXPECT_EQ(second_clone->stats().factor_prefetches, 0) << "clones have a chain of their own";
    // The prefetched layer expands the same spans and finds every one on the device; it
    // attends as the layer that fetched them itself.
    const auto with = attend(*second, q, p0, 1, pool);
    const auto without = attend(alone, q, p0, 1, pool);
    EXPECT_EQ(expanded_union(*second), expanded_union(*first));
    EXPECT_EQ(with, without);
    EXPECT_EQ(second->stats().factor_hits, expanded);
    EXPECT_EQ(second->stats().factor_fetches, 0);
    EXPECT_EQ(alone.stats().factor_fetches, expanded);
    // The clones: the first prefetches into the second's clone, not into the second.
    attend(*first_clone, q, p0, 1, pool);
    EXPECT_EQ(second_clone->stats().factor_prefetches, expanded);
    EXPECT_EQ(second->stats().factor_prefetches, expanded);
    EXPECT_EQ(attend(*second_clone, q, p0, 1, pool), with);
    EXPECT_EQ(second_clone->stats().factor_fetches, 0);
    // A destroyed layer leaves the chain: the first's next prefetch has nowhere to go (a
    // dangling member would be a use after free here).
    second.reset();
    EXPECT_EQ(attend(*first, q, p0, 1, pool).size(), q.size());
}

} // namespace

#endif
