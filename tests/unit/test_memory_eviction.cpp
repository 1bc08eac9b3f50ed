// The baselines SEKV is measured against (issue 6): the selection rules of streaming, h2o and
// snapkv on small hand-made cases, the accumulated attention against a naive softmax written
// here, attention after eviction against exact attention over the kept rows, chunk_summary's
// summary-only attention against a softmax over rows and summaries written here, the rows h2o
// and snapkv seal against rankings worked out here from a naive softmax, and, on a tiny
// model, every policy at a budget that covers the context giving the logits of `full`.
#include "engine/memory/memory_eviction.h"
#include "engine/memory/memory_full.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/session/session.h"
#include "random_fill.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

using namespace spanscope;
using spanscope::test::randn;

namespace {
const AttentionShape kShape{4, 2, 8, 0.35f, 0};
constexpr int64_t kRow = 2 * 8; // n_kv_head * head_dim

std::vector<int32_t> positions(int32_t begin, int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
        p[static_cast<size_t>(i)] = begin + static_cast<int32_t>(i);
    return p;
}

float f16(float x) {
    std::vector<float> v{x};
    round_through_f16(v.data(), 1);
    return v[0];
}

// Naive causal softmax attention of one query head over rows (all stored rows visible up to
// qpos): returns the probabilities per row and adds them to `mass` (per row).
std::vector<double> naive_probs(const float* qh, int head, int32_t qpos,
                                const std::vector<float>& k, const std::vector<int32_t>& kpos) {
    const int g = head / (kShape.n_head / kShape.n_kv_head);
    std::vector<double> s(kpos.size(), -INFINITY);
    double mx = -INFINITY;
    for (size_t j = 0; j < kpos.size(); ++j)
        if (kpos[j] <= qpos) {
            double dot = 0;
            for (int c = 0; c < kShape.head_dim; ++c)
                dot += qh[c] * k[j * kRow + g * kShape.head_dim + c];
            s[j] = kShape.scale * dot;
            mx = std::max(mx, s[j]);
        }
    double sum = 0;
    for (auto& x : s) {
        x = std::isinf(x) ? 0 : std::exp(x - mx);
        sum += x;
    }
    for (auto& x : s)
        x /= sum;
    return s;
}
} // namespace

TEST(EvictionRules, StreamingKeepsTheSinksAndTheMostRecentRows) {
    EvictionOptions o;
    const auto kept = select_rows(EvictionRule::Streaming, o, 20, 8, nullptr);
    EXPECT_EQ(kept, (std::vector<int64_t>{0, 1, 2, 3, 16, 17, 18, 19}));
}

TEST(EvictionRules, HeavyHittersTakeTheBestScoredMiddleRowsAndHalfIsRecent) {
    EvictionOptions o;
    o.recent_rows = 0; // the recent window is then recent_share of the non-sink rows
    // n 20, keep 10: 4 sinks, 6 others -> 3 recent (17..19) and 3 heavy hitters among 4..16.
    std::vector<float> score(20, 0.0f);
    score[9] = 5;
    score[5] = 4;
    score[12] = 4;
    score[13] = 4; // a tie with 12 for the last place: the earlier row, 12, is kept
    score[14] = 1;
    score[0] = 100; // a sink: kept anyway, not counted among the heavy hitters
    score[18] = 50; // in the recent window: kept anyway
    const auto kept = select_rows(EvictionRule::HeavyHitters, o, 20, 10, score.data());
    EXPECT_EQ(kept, (std::vector<int64_t>{0, 1, 2, 3, 5, 9, 12, 17, 18, 19}));
}

TEST(EvictionRules, SnapKVKeepsItsObservationWindowAndTheBestPooledVotes) {
    EvictionOptions o;
    o.observation_window = 2;
    o.recent_rows = 0;
    o.sinks = 1;
    std::vector<float> votes(12, 0.0f);
    votes[5] = 3;
    votes[8] = 1;
    const auto pooled = max_pool(votes.data(), 12, 3);
    EXPECT_EQ(pooled, (std::vector<float>{0, 0, 0, 0, 3, 3, 3, 1, 1, 1, 0, 0}));
    // keep 6: sink 0, window 10..11, and 3 of the middle by pooled votes: 4, 5, 6 (ties earlier).
    const auto kept = select_rows(EvictionRule::SnapKV, o, 12, 6, pooled.data());
    EXPECT_EQ(kept, (std::vector<int64_t>{0, 4, 5, 6, 10, 11}));
}

TEST(EvictionRules, TheBudgetCountsRowsAndLeavesTheReserve) {
    EvictionOptions o;
    o.budget = 0.25;
    o.reserve_rows = 100;
    EXPECT_EQ(eviction_rows_to_keep(o, 4000), 900); // floor(0.25 * 4000) - 100
    EXPECT_EQ(eviction_rows_to_keep(o, 300), 300);  // too short: held whole
    o.budget = 1.0;
    EXPECT_EQ(eviction_rows_to_keep(o, 4000), 4000);
    o.recent_rows = 0; // heavy hitters are then chosen, and need a score
    EXPECT_THROW(select_rows(EvictionRule::HeavyHitters, o, 20, 10, nullptr),
                 std::invalid_argument);
}

TEST(EvictionMemory, AccumulatedAttentionIsTheSumOfEveryQuerysProbabilities) {
    const int64_t n = 40;
    EvictionMemory m(kShape, 64, EvictionRule::HeavyHitters, {});
    auto k = randn(n * kRow, 1), v = randn(n * kRow, 2);
    const auto pos = positions(0, n);
    m.store(k.data(), v.data(), pos.data(), n);
    const auto q = randn(n * kShape.n_head * kShape.head_dim, 3);
    std::vector<float> out(q.size());
    ThreadPool pool(2);
    m.attend(q.data(), pos.data(), n, out.data(), pool);
    for (auto& x : k)
        x = f16(x);
    std::vector<double> expected(n, 0.0);
    for (int64_t i = 0; i < n; ++i)
        for (int h = 0; h < kShape.n_head; ++h) {
            const auto p = naive_probs(q.data() + (i * kShape.n_head + h) * kShape.head_dim, h,
                                       pos[i], k, pos);
            for (int64_t j = 0; j < n; ++j)
                expected[j] += p[j];
        }
    const auto& mass = m.accumulated_attention();
    ASSERT_EQ(mass.size(), static_cast<size_t>(n));
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
        EXPECT_NEAR(mass[j], expected[j], 1e-4 * (1 + expected[j])) << "row " << j;
        total += mass[j];
    }
    EXPECT_NEAR(total, n * kShape.n_head, 1e-3); // every query head's probabilities sum to one
}

TEST(EvictionMemory, AfterSealingItAttendsExactlyOverTheKeptRowsWithinTheBudget) {
    const int64_t n = 200;
    EvictionOptions o;
    o.budget = 0.3;
    o.reserve_rows = 10;
    o.observation_window = 8;
    for (const auto rule :
         {EvictionRule::Streaming, EvictionRule::HeavyHitters, EvictionRule::SnapKV}) {
        EvictionMemory m(kShape, 256, rule, o);
        const auto k = randn(n * kRow, 11), v = randn(n * kRow, 12);
        const auto pos = positions(0, n);
        m.store(k.data(), v.data(), pos.data(), n);
        const auto q = randn(n * kShape.n_head * kShape.head_dim, 13);
        std::vector<float> out(q.size());
        ThreadPool pool(2);
        m.attend(q.data(), pos.data(), n, out.data(), pool);
        m.seal(SealRequest{nullptr, nullptr, 0, n});
        const auto kept = m.positions();
        ASSERT_EQ(static_cast<int64_t>(kept.size()), eviction_rows_to_keep(o, n))
            << eviction_rule_name(rule);
        for (int32_t p = 0; p < 4; ++p)
            EXPECT_EQ(kept[static_cast<size_t>(p)], p) << "sinks are never evicted";
        EXPECT_EQ(kept.back(), n - 1) << "the most recent row is never evicted";
        if (rule == EvictionRule::Streaming) {
            for (size_t i = 4; i < kept.size(); ++i)
                EXPECT_EQ(kept[i], n - static_cast<int64_t>(kept.size() - i)) << "the window";
        }
        const auto s = m.stats();
        EXPECT_LE(s.fast_tier_bytes + 10 * (s.full_kv_bytes / n), 0.3 * s.full_kv_bytes + 1);
        // A question after the document: the same as full attention over the kept rows, taken
        // from the original keys and values at the kept positions (not from the memory).
        FullMemory ref(kShape, 256);
        for (const int32_t p : kept)
            ref.store(k.data() + p * kRow, v.data() + p * kRow, &p, 1);
        const auto qk = randn(3 * kRow, 14), qv = randn(3 * kRow, 15);
        const auto qp = positions(static_cast<int32_t>(n), 3);
        m.store(qk.data(), qv.data(), qp.data(), 3);
        ref.store(qk.data(), qv.data(), qp.data(), 3);
        const auto qq = randn(3 * kShape.n_head * kShape.head_dim, 16);
        std::vector<float> a(qq.size()), b(qq.size());
        m.attend(qq.data(), qp.data(), 3, a.data(), pool);
        ref.attend(qq.data(), qp.data(), 3, b.data(), pool);
        EXPECT_EQ(a, b) << eviction_rule_name(rule);
    }
}

TEST(EvictionMemory, SnapKVKeepsTheRowsItsObservationWindowAttends) {
    // Keys at rows 50 and 120 match the last queries strongly; snapkv keeps them (and their
    // pooled neighbours), streaming does not.
    const int64_t n = 200;
    auto k = randn(n * kRow, 21);
    for (auto& x : k)
        x *= 0.1f;
    const auto v = randn(n * kRow, 22);
    std::vector<float> q(n * kShape.n_head * kShape.head_dim, 0.0f);
    for (int64_t i = n - 8; i < n; ++i)
        for (int h = 0; h < kShape.n_head; ++h)
            for (int c = 0; c < kShape.head_dim; ++c)
                q[(i * kShape.n_head + h) * kShape.head_dim + c] = 3.0f;
    for (const int64_t j : {50, 120})
        for (int c = 0; c < kRow; ++c)
            k[j * kRow + c] = 3.0f;
    EvictionOptions o;
    o.budget = 0.2; // 40 rows: 4 sinks, the window of 8, 28 by votes
    o.reserve_rows = 0;
    o.observation_window = 8;
    o.recent_rows = 0;
    const auto pos = positions(0, n);
    ThreadPool pool(1);
    EvictionMemory snap(kShape, 256, EvictionRule::SnapKV, o);
    snap.store(k.data(), v.data(), pos.data(), n);
    std::vector<float> out(q.size());
    snap.attend(q.data(), pos.data(), n, out.data(), pool);
    auto stream = snap.with_rule(EvictionRule::Streaming, o);
    snap.seal(SealRequest{nullptr, nullptr, 0, n});
    stream->seal(SealRequest{nullptr, nullptr, 0, n});
    auto has = [](const std::vector<int32_t>& p, int32_t x) {
        return std::find(p.begin(), p.end(), x) != p.end();
    };
    for (const int32_t x : {49, 50, 51, 119, 120, 121})
        EXPECT_TRUE(has(snap.positions(), x)) << x;
    EXPECT_FALSE(has(stream->positions(), 50));
    EXPECT_EQ(snap.positions().size(), stream->positions().size());
}

TEST(ChunkSummary, AttendsOverRowsAndSummariesAndNeverExpands) {
    // Distinct rows: rows outside the span are attended one by one, the span [5, 15) by one
    // summary row (surprisal-weighted means of its keys and values) with the bias log|S|,
    // worked out here; nothing goes to the host tier and nothing is expanded.
    const int64_t n = 24, qrow = kShape.n_head * kShape.head_dim;
    auto k = randn(n * kRow, 31), v = randn(n * kRow, 32);
    for (auto* rows : {&k, &v})
        for (auto& x : *rows)
            x = f16(x); // exact in the rows' fp16 storage
    SekvOptions so;
    so.summaries_only = true;
    SekvMemory m(kShape, 64, 1e6, so);
    const auto pos = positions(0, n);
    m.store(k.data(), v.data(), pos.data(), n);
    EXPECT_EQ(m.policy(), "chunk_summary");
    Segmentation seg;
    seg.anchors = {0};
    seg.spans = {{5, 15}};
    std::vector<float> surprisal(n);
    for (int64_t i = 0; i < n; ++i)
        surprisal[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
    m.seal(SealRequest{&seg, surprisal.data(), 0, n});
    const auto s = m.stats();
    EXPECT_EQ(s.spans, 1);
    EXPECT_EQ(s.host_tier_bytes, 0);
    EXPECT_EQ(s.rows_resident, n - 10 + 1);
    // The summary row of the span, per KV head: weights s_i / Σ s over its rows.
    double total = 0;
    for (int64_t i = 5; i < 15; ++i)
        total += surprisal[i];
    std::vector<double> sk(kRow, 0.0), sv(kRow, 0.0);
    for (int64_t i = 5; i < 15; ++i)
        for (int c = 0; c < kRow; ++c) {
            sk[c] += surprisal[i] / total * k[i * kRow + c];
            sv[c] += surprisal[i] / total * v[i * kRow + c];
        }
    // Two question rows after the document, then two queries over everything.
    auto qk = randn(2 * kRow, 34), qv = randn(2 * kRow, 35);
    for (auto* rows : {&qk, &qv})
        for (auto& x : *rows)
            x = f16(x);
    const auto q = randn(2 * qrow, 33);
    const auto qp = positions(static_cast<int32_t>(n), 2);
    m.store(qk.data(), qv.data(), qp.data(), 2);
    std::vector<float> a(q.size());
    ThreadPool pool(1);
    m.attend(q.data(), qp.data(), 2, a.data(), pool);
    for (int t = 0; t < 2; ++t)
        for (int h = 0; h < kShape.n_head; ++h) {
            const int g = h / (kShape.n_head / kShape.n_kv_head);
            const float* qh = q.data() + t * qrow + h * kShape.head_dim;
            std::vector<double> score;
            std::vector<const double*> dv;
            std::vector<std::vector<double>> rows_v;
            auto add = [&](const float* key, const float* val, const double* dkey,
                           const double* dval, double bias) {
                double dot = 0;
                std::vector<double> vv(kShape.head_dim);
                for (int c = 0; c < kShape.head_dim; ++c) {
                    dot += qh[c] *
                           (key ? key[g * kShape.head_dim + c] : dkey[g * kShape.head_dim + c]);
                    vv[c] = val ? val[g * kShape.head_dim + c] : dval[g * kShape.head_dim + c];
                }
                score.push_back(kShape.scale * dot + bias);
                rows_v.push_back(std::move(vv));
            };
            for (int64_t j = 0; j < n; ++j)
                if (j < 5 || j >= 15)
                    add(k.data() + j * kRow, v.data() + j * kRow, nullptr, nullptr, 0);
            add(nullptr, nullptr, sk.data(), sv.data(), std::log(10.0));
            for (int u = 0; u <= t; ++u)
                add(qk.data() + u * kRow, qv.data() + u * kRow, nullptr, nullptr, 0);
            const double mx = *std::max_element(score.begin(), score.end());
            double sum = 0;
            for (auto& x : score)
                sum += (x = std::exp(x - mx));
            for (int c = 0; c < kShape.head_dim; ++c) {
                double o = 0;
                for (size_t j = 0; j < score.size(); ++j)
                    o += score[j] / sum * rows_v[j][c];
                EXPECT_NEAR(a[t * qrow + h * kShape.head_dim + c], o, 1e-4)
                    << "query " << t << " head " << h << " dim " << c;
            }
        }
    for (const auto& z : *m.last_zoom())
        EXPECT_TRUE(z.spans.empty());
}

// The rows a rule keeps, worked out here from scores in double: the sinks, the recent window,
// and the `heavy` best-scored middle rows (ties to the earlier row). Every middle score other
// than the one at the cut must differ from it by more than `gap`, so that float rounding in the
// engine cannot move a row across the cut (rows tied with it are exact copies, as max-pooling
// makes them, and stay tied in float).
std::vector<int32_t> expected_kept(const std::vector<double>& score, int64_t sinks, int64_t recent,
                                   int64_t heavy, int32_t pos_begin, double gap) {
    const int64_t n = std::ssize(score);
    std::vector<int64_t> middle;
    for (int64_t i = sinks; i < n - recent; ++i)
        middle.push_back(i);
    EXPECT_GE(heavy, 1);
    EXPECT_LT(heavy, std::ssize(middle));
    if (heavy < 1 || heavy >= std::ssize(middle))
        return {};
    std::stable_sort(middle.begin(), middle.end(),
                     [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    const double cut = score[middle[heavy - 1]];
    for (const int64_t i : middle)
        EXPECT_TRUE(score[i] == cut || std::fabs(score[i] - cut) > gap)
            << "an ill-posed case: row " << i << " scores " << score[i] << ", the cut " << cut;
    middle.resize(static_cast<size_t>(heavy));
    std::vector<int32_t> kept;
    for (int64_t i = 0; i < sinks; ++i)
        kept.push_back(pos_begin + static_cast<int32_t>(i));
    for (const int64_t i : middle)
        kept.push_back(pos_begin + static_cast<int32_t>(i));
    for (int64_t i = n - recent; i < n; ++i)
        kept.push_back(pos_begin + static_cast<int32_t>(i));
    std::sort(kept.begin(), kept.end());
    return kept;
}

// h2o as it runs: the accumulated attention of every query (a naive softmax here, over the rows
// still held), read at the sealed context's own rows, ranks the middle rows. A second context
// after the first is sealed is ranked by its own rows' mass, over what the first one kept.
TEST(EvictionMemory, HeavyHittersSealExactlyTheRowsANaiveSoftmaxRanksHighest) {
    EvictionOptions o;
    o.budget = 0.5;
    o.reserve_rows = 0;
    o.recent_rows = 4; // recent window: round(0.5 · (keep − 4))
    const int64_t n1 = 60, n2 = 40;
    const int64_t qrow = kShape.n_head * kShape.head_dim;
    auto k = randn((n1 + n2) * kRow, 41), v = randn((n1 + n2) * kRow, 42);
    for (auto& x : k)
        x = 2.0f * f16(x); // exact in fp16 (the rows' storage), and sharp attention
    const auto q = randn((n1 + n2) * qrow, 43);
    const auto pos = positions(0, n1 + n2);
    EvictionMemory m(kShape, 128, EvictionRule::HeavyHitters, o);
    ThreadPool pool(2);
    std::vector<int32_t> held;            // positions held, as the test follows them
    std::vector<double> mass(n1 + n2, 0); // per position
    // Worked out: 60 rows keep floor(0.5 · 60) = 30: 4 sinks, 13 recent, 13 heavy hitters;
    // 40 rows keep 20: 4 sinks, 8 recent, 8 heavy hitters.
    auto run_context = [&](int64_t begin, int64_t n, int64_t keep, int64_t recent, int64_t heavy) {
        ASSERT_EQ(eviction_rows_to_keep(o, n), keep);
        m.store(k.data() + begin * kRow, v.data() + begin * kRow, pos.data() + begin, n);
        std::vector<float> out(static_cast<size_t>(n * qrow));
        m.attend(q.data() + begin * qrow, pos.data() + begin, n, out.data(), pool);
        for (int64_t i = begin; i < begin + n; ++i)
            held.push_back(static_cast<int32_t>(i));
        std::vector<float> hk;
        for (const int32_t p : held)
            hk.insert(hk.end(), k.begin() + p * kRow, k.begin() + (p + 1) * kRow);
        for (int64_t i = begin; i < begin + n; ++i)
            for (int h = 0; h < kShape.n_head; ++h) {
                const auto pr =
                    naive_probs(q.data() + i * qrow + h * kShape.head_dim, h, pos[i], hk, held);
                for (size_t j = 0; j < held.size(); ++j)
                    mass[held[j]] += pr[j];
            }
        const std::vector<double> score(mass.begin() + begin, mass.begin() + begin + n);
        const auto expected =
            expected_kept(score, 4, recent, heavy, static_cast<int32_t>(begin), 1e-3);
        m.seal(SealRequest{nullptr, nullptr, static_cast<int32_t>(begin), n});
        std::vector<int32_t> now(held.begin(), held.end() - n);
        now.insert(now.end(), expected.begin(), expected.end());
        EXPECT_EQ(m.positions(), now) << "context at " << begin;
        held = m.positions();
    };
    run_context(0, n1, 30, 13, 13);
    run_context(n1, n2, 20, 8, 8);
}

// snapkv as it runs: the last observation_window queries of the context vote with their
// attention (a naive softmax here), summed over the heads, max-pooled over the rows before the
// window; the window itself and the sinks are kept.
TEST(EvictionMemory, SnapKVSealsExactlyTheRowsThePooledVotesOfANaiveSoftmaxRankHighest) {
    EvictionOptions o;
    o.budget = 0.25;
    o.reserve_rows = 0;
    o.recent_rows = 0;
    o.observation_window = 8;
    o.pool_kernel = 5;
    const int64_t n = 80;
    const int64_t qrow = kShape.n_head * kShape.head_dim;
    auto k = randn(n * kRow, 51);
    for (auto& x : k)
        x = 2.0f * f16(x);
    const auto v = randn(n * kRow, 52);
    auto q = randn(n * qrow, 53);
    // The window's queries look mostly at the window's own keys: pooled over the window too,
    // those votes would spill onto the rows just before it.
    for (int64_t i = n - o.observation_window; i < n; ++i)
        for (int h = 0; h < kShape.n_head; ++h) {
            const int g = h / (kShape.n_head / kShape.n_kv_head);
            for (int c = 0; c < kShape.head_dim; ++c)
                q[i * qrow + h * kShape.head_dim + c] = k[i * kRow + g * kShape.head_dim + c];
        }
    const auto pos = positions(0, n);
    EvictionMemory m(kShape, 128, EvictionRule::SnapKV, o);
    m.store(k.data(), v.data(), pos.data(), n);
    std::vector<float> out(static_cast<size_t>(n * qrow));
    ThreadPool pool(2);
    m.attend(q.data(), pos.data(), n, out.data(), pool);
    std::vector<double> votes(n, 0.0);
    for (int64_t i = n - o.observation_window; i < n; ++i)
        for (int h = 0; h < kShape.n_head; ++h) {
            const auto pr =
                naive_probs(q.data() + i * qrow + h * kShape.head_dim, h, pos[i], k, pos);
            for (int64_t j = 0; j < n; ++j)
                votes[j] += pr[j];
        }
    const int64_t prefix = n - o.observation_window, r = o.pool_kernel / 2;
    std::vector<double> pooled(n, 0.0);
    for (int64_t j = 0; j < prefix; ++j)
        for (int64_t i = std::max<int64_t>(0, j - r); i <= std::min(prefix - 1, j + r); ++i)
            pooled[j] = std::max(pooled[j], votes[i]);
    // Worked out: 80 rows keep floor(0.25 · 80) = 20: 4 sinks, the window of 8, 8 by votes.
    ASSERT_EQ(eviction_rows_to_keep(o, n), 20);
    const auto expected = expected_kept(pooled, 4, 8, 8, 0, 1e-4);
    m.seal(SealRequest{nullptr, nullptr, 0, n});
    EXPECT_EQ(m.positions(), expected);
}

// Only an h2o memory accumulates attention: h2o from a memory of another rule that holds rows
// would rank every row alike, and is refused; from an empty one it is fine.
TEST(EvictionMemory, HeavyHittersFromAMemoryWithoutAccumulatedAttentionIsRefused) {
    EvictionOptions o;
    EvictionMemory snap(kShape, 64, EvictionRule::SnapKV, o);
    EXPECT_NO_THROW(snap.with_rule(EvictionRule::HeavyHitters, o));
    const auto k = randn(8 * kRow, 61), v = randn(8 * kRow, 62);
    const auto pos = positions(0, 8);
    snap.store(k.data(), v.data(), pos.data(), 8);
    EXPECT_THROW(snap.with_rule(EvictionRule::HeavyHitters, o), std::logic_error);
    EXPECT_NO_THROW(snap.with_rule(EvictionRule::Streaming, o));
    EvictionMemory h2o(kShape, 64, EvictionRule::HeavyHitters, o);
    h2o.store(k.data(), v.data(), pos.data(), 8);
    EXPECT_NO_THROW(h2o.with_rule(EvictionRule::HeavyHitters, o));
}

// Every policy, at a budget that covers the whole context, gives the logits of `full`.
TEST(EvictionMemory, EveryPolicyAtAFullBudgetIsAnExactNoOpOnATinyModel) {
    const std::string path = test::temp_dir() + "/tiny.gguf";
    test::TinyGemma3Config cfg;
    cfg.n_ctx = 1024;
    test::write_tiny_gemma3(path, cfg);
    auto model = Model::load(path);
    auto toks = model->tokenizer().encode(test::sample_prose(9, 900));
    toks.insert(toks.begin(), model->tokenizer().bos());
    toks.resize(400);
    const std::vector<int32_t> doc(toks.begin(), toks.end() - 6),
        question(toks.end() - 6, toks.end());
    SessionOptions fo;
    fo.threads = 2;
    fo.n_ctx = 512;
    Session full(*model, fo);
    full.prefill(doc);
    const auto ref = full.prefill(question);
    for (const auto& policy : global_policies()) {
        for (const double budget : {1.0, 0.5}) {
            SessionOptions so = fo;
            so.global_policy = policy;
            so.sekv.budget = budget;
            so.eviction.budget = budget;
            so.sekv.reserve_rows = 16;
            so.eviction.reserve_rows = 16;
            Session s(*model, so);
            std::vector<float> surprisal(doc.size());
            s.prefill(doc, nullptr, {}, surprisal.data(), question[0]);
            s.seal_context(surprisal.data(), 0, static_cast<int64_t>(doc.size()));
            const auto logits = s.prefill(question);
            MemoryStats st;
            for (const int il : s.memory().sealing_layers()) {
                const auto m = s.memory().layer(il).stats();
                st.fast_tier_bytes += m.fast_tier_bytes;
                st.full_kv_bytes += m.full_kv_bytes;
            }
            if (budget >= 1.0 || policy == "full") {
                EXPECT_EQ(logits, ref) << policy << " at budget " << budget;
                EXPECT_EQ(st.fast_tier_bytes, st.full_kv_bytes) << policy;
            } else {
                EXPECT_NE(logits, ref) << policy << " compressed nothing at budget " << budget;
                EXPECT_LE(st.fast_tier_bytes, budget * st.full_kv_bytes) << policy;
            }
        }
    }
}

TEST(EvictionMemory, ASecondContextIsSelectedWithinItsOwnRange) {
    // Two documents sealed one after the other: the second's selection keeps the first's rows
    // and takes its sinks and window at its own offset.
    EvictionOptions o;
    o.budget = 0.5;
    o.reserve_rows = 0;
    EvictionMemory m(kShape, 256, EvictionRule::Streaming, o);
    const auto k = randn(100 * kRow, 41), v = randn(100 * kRow, 42);
    const auto pos = positions(0, 100);
    m.store(k.data(), v.data(), pos.data(), 40);
    m.seal(SealRequest{nullptr, nullptr, 0, 40});
    m.store(k.data() + 40 * kRow, v.data() + 40 * kRow, pos.data() + 40, 60);
    m.seal(SealRequest{nullptr, nullptr, 40, 60});
    std::vector<int32_t> expected{0, 1, 2, 3};
    for (int32_t p = 24; p < 40; ++p) // 20 of 40: 4 sinks and 16 recent
        expected.push_back(p);
    for (int32_t p = 40; p < 44; ++p) // 30 of 60: the sinks at 40 and 26 recent
        expected.push_back(p);
    for (int32_t p = 74; p < 100; ++p)
        expected.push_back(p);
    EXPECT_EQ(m.positions(), expected);
    std::vector<float> kk, vv;
    std::vector<int32_t> pp;
    m.read_rows(0, 100, kk, vv, pp);
    for (size_t i = 0; i < pp.size(); ++i)
        for (int c = 0; c < kRow; ++c)
            ASSERT_EQ(kk[i * kRow + c], f16(k[pp[i] * kRow + c])) << "row " << pp[i];
    EXPECT_THROW(m.seal(SealRequest{nullptr, nullptr, 0, 40}), std::logic_error);
}
