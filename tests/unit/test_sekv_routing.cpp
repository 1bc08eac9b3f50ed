// The SEKV router inside the memory: the row budget and the calibrated expansion rate hold, τ per
// query expands each query head's own share (alone or with its KV group), the oracle expands
// the spans of most attention mass, and two-stage routing expands, of its candidates, those of
// most attention mass — each against masses computed from the stored rows themselves.
#include "engine/kernels/fp16.h"
#include "engine/kernels/ops.h"
#include "engine/memory/memory_full.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/router.h"
#include "engine/sekv/router_params.h"
#include "engine/sekv/span_sketch.h"
#include "engine/session/session.h"
#include "random_fill.h"
#include "sekv_test_doc.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

using namespace spanscope;
using spanscope::test::randn;

namespace {
using namespace spanscope::test;

// The spans query head h expands: its own top spans, or with the KV group union (heads 2g and
// 2g + 1 share KV head g) those of both heads, ascending. top: [4 heads] ascending span indices.
std::vector<int> expected_spans(const std::vector<std::vector<int>>& top, int h, bool group) {
    std::vector<int> expect = top[static_cast<size_t>(h)];
    if (group) {
        const auto& other = top[static_cast<size_t>(h ^ 1)];
        expect.insert(expect.end(), other.begin(), other.end());
        std::sort(expect.begin(), expect.end());
        expect.erase(std::unique(expect.begin(), expect.end()), expect.end());
    }
    return expect;
}

// Each span's softmax mass Σ_i exp(0.25 · qh·k_i) for query head h [16] (KV head h / 2), from
// the document's stored keys themselves, not from the memory's factors.
std::vector<double> stored_span_masses(const Doc& doc, const std::vector<SekvSpan>& spans,
                                       const float* qh, int h) {
    std::vector<double> mass;
    for (const auto& sp : spans) {
        double m = 0;
        for (int64_t i = sp.begin; i < sp.end(); ++i) {
            double dot = 0;
            for (int c = 0; c < 16; ++c)
                dot += static_cast<double>(qh[c]) * doc.k[i * kRow + (h / 2) * 16 + c];
            m += std::exp(0.25 * dot);
        }
        mass.push_back(m);
    }
    return mass;
}

// Stores nq random rows after the document (seeds seed, seed + 1) and attends nq random
// queries (seed + 2) [nq][4][16], which it returns.
std::vector<float> attend_after(SekvMemory& sekv, const Doc& doc, int64_t nq, uint32_t seed,
                                ThreadPool& pool) {
    const auto tk = randn(nq * kRow, seed), tv = randn(nq * kRow, seed + 1);
    const auto q = randn(nq * 4 * 16, seed + 2);
    const auto qpos = iota_pos(static_cast<int32_t>(doc.n), nq);
    sekv.store(tk.data(), tv.data(), qpos.data(), nq);
    std::vector<float> out(q.size());
    sekv.attend(q.data(), qpos.data(), nq, out.data(), pool);
    return q;
}
} // namespace

TEST(SekvMemory, RowBudgetIsNeverExceededAndCalibrationHitsItsRate) {
    ThreadPool pool(2);
    const auto doc = make_doc(400, 5);
    for (const int64_t budget : {int64_t{0}, int64_t{10}}) {
        SekvMemory sekv(kShape, 1024, 1e6, options(false, 0.25, budget));
        store_and_seal(sekv, doc);
        const int64_t nq = 16;
        const auto tk = randn(nq * kRow, 21), tv = randn(nq * kRow, 22);
        const auto q = randn(nq * 4 * 16, 23);
        const auto qpos = iota_pos(static_cast<int32_t>(doc.n), nq);
        sekv.store(tk.data(), tv.data(), qpos.data(), nq);
        std::vector<float> out(q.size());
        sekv.attend(q.data(), qpos.data(), nq, out.data(), pool);
        ASSERT_EQ(sekv.tau().size(), 4u);
        // Independently: the share of (query, span) pairs above each head's τ.
        const auto& spans = sekv.spans();
        for (int h = 0; h < 4; ++h) {
            int64_t over = 0, all = 0;
            for (int64_t i = 0; i < nq; ++i)
                for (const auto& s : spans) {
                    const double r = span_relevance(q.data() + (i * 4 + h) * 16,
                                                    s.summary_k.data() + (h / 2) * 16, 16, s.size);
                    over += r > sekv.tau()[static_cast<size_t>(h)];
                    ++all;
                }
            EXPECT_NEAR(static_cast<double>(over) / static_cast<double>(all), 0.25,
                        1.0 / static_cast<double>(all) + 1e-12);
        }
        for (const auto& h : *sekv.last_zoom()) {
            int64_t rows = 0;
            for (const int s : h.spans)
                rows += spans[static_cast<size_t>(s)].size;
            if (budget > 0) {
                EXPECT_LE(rows, budget);
            }
            EXPECT_EQ(h.relevance.size(), h.spans.size());
        }
    }
}

TEST(SekvMemory, TauPerQueryExpandsEachQueryHeadsOwnShare) {
    ThreadPool pool(2);
    const auto doc = make_doc(400, 7);
    for (const bool group : {false, true}) {
        SCOPED_TRACE(group ? "KV group union" : "each head alone");
        auto o = options(false, 0.25);
        o.router.tau_per_query = true;
        o.router.share_group = group;
        SekvMemory sekv(kShape, 1024, 1e6, o);
        store_and_seal(sekv, doc);
        const auto& spans = sekv.spans();
        const auto n_spans = static_cast<int64_t>(spans.size());
        ASSERT_GT(n_spans, 8);
        // A question of 8 queries, then two single answer tokens: each is routed on its own
        // relevances, whatever the question's were.
        int32_t at = static_cast<int32_t>(doc.n);
        for (const int64_t nq : {int64_t{8}, int64_t{1}, int64_t{1}}) {
            const auto tk = randn(nq * kRow, 31 + at), tv = randn(nq * kRow, 32 + at);
            const auto q = randn(nq * 4 * 16, 33 + at);
            const auto qpos = iota_pos(at, nq);
            at += static_cast<int32_t>(nq);
            sekv.store(tk.data(), tv.data(), qpos.data(), nq);
            std::vector<float> out(q.size());
            sekv.attend(q.data(), qpos.data(), nq, out.data(), pool);
            EXPECT_TRUE(sekv.tau().empty()); // no threshold shared across queries
            // Independently: each head of the last query wants its round(0.25 · n) most
            // relevant spans (random keys: no ties).
            const int64_t want = std::llround(0.25 * static_cast<double>(n_spans));
            std::vector<std::vector<int>> top(4);
            for (int h = 0; h < 4; ++h) {
                std::vector<std::pair<double, int>> r;
                for (int64_t s = 0; s < n_spans; ++s)
                    r.emplace_back(span_relevance(q.data() + ((nq - 1) * 4 + h) * 16,
                                                  spans[static_cast<size_t>(s)].summary_k.data() +
                                                      (h / 2) * 16,
                                                  16, spans[static_cast<size_t>(s)].size),
                                   static_cast<int>(s));
                std::sort(r.rbegin(), r.rend());
                for (int64_t i = 0; i < want; ++i)
                    top[static_cast<size_t>(h)].push_back(r[static_cast<size_t>(i)].second);
                std::sort(top[static_cast<size_t>(h)].begin(), top[static_cast<size_t>(h)].end());
            }
            const auto& zoom = *sekv.last_zoom();
            ASSERT_EQ(zoom.size(), 4u);
            for (int h = 0; h < 4; ++h) {
                EXPECT_EQ(zoom[static_cast<size_t>(h)].spans, expected_spans(top, h, group))
                    << "head " << h;
            }
        }
    }
    // Per-query thresholds with fixed ones or a row budget are refused.
    auto learned = options(false, 0.25);
    learned.router.tau_per_query = true;
    learned.router.learned_tau = true;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, learned), std::invalid_argument);
    auto budget = options(false, 0.25, 10);
    budget.router.tau_per_query = true;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, budget), std::invalid_argument);
}

TEST(SekvMemory, TheOracleExpandsTheSpansOfMostAttentionMass) {
    ThreadPool pool(2);
    const auto doc = make_doc(400, 11);
    for (const bool group : {false, true}) {
        SCOPED_TRACE(group ? "KV group union" : "each head alone");
        auto o = options(false, 0.25); // full rank: the factors give the stored keys back
        o.router.tau_per_query = true;
        o.router.oracle = true;
        o.router.share_group = group;
        SekvMemory sekv(kShape, 1024, 1e6, o);
        store_and_seal(sekv, doc);
        const auto& spans = sekv.spans();
        const auto n_spans = static_cast<int64_t>(spans.size());
        ASSERT_GT(n_spans, 8);
        const int64_t nq = 3;
        const auto q = attend_after(sekv, doc, nq, 41, pool);
        // Independently, from the stored keys themselves: each head of the last query wants the
        // round(0.25 · n) spans whose rows take the most softmax mass (scale 0.25), and the
        // trace gives each its share of the mass of all spans.
        const int64_t want = std::llround(0.25 * static_cast<double>(n_spans));
        std::vector<std::vector<int>> top(4);
        std::vector<std::vector<double>> share(4);
        int differs_from_summaries = 0;
        for (int h = 0; h < 4; ++h) {
            const float* qh = q.data() + ((nq - 1) * 4 + h) * 16;
            const auto mass = stored_span_masses(doc, spans, qh, h);
            double total = 0;
            for (const double m : mass)
                total += m;
            std::vector<std::pair<double, int>> r, by_summary;
            for (int64_t s = 0; s < n_spans; ++s) {
                const auto& sp = spans[static_cast<size_t>(s)];
                share[static_cast<size_t>(h)].push_back(mass[static_cast<size_t>(s)] / total);
                r.emplace_back(mass[static_cast<size_t>(s)], static_cast<int>(s));
                by_summary.emplace_back(
                    span_relevance(qh, sp.summary_k.data() + (h / 2) * 16, 16, sp.size),
                    static_cast<int>(s));
            }
            std::sort(r.rbegin(), r.rend());
            std::sort(by_summary.rbegin(), by_summary.rend());
            std::vector<int> summary_top;
            for (int64_t i = 0; i < want; ++i) {
                top[static_cast<size_t>(h)].push_back(r[static_cast<size_t>(i)].second);
                summary_top.push_back(by_summary[static_cast<size_t>(i)].second);
            }
            std::sort(top[static_cast<size_t>(h)].begin(), top[static_cast<size_t>(h)].end());
            std::sort(summary_top.begin(), summary_top.end());
            differs_from_summaries += summary_top != top[static_cast<size_t>(h)];
        }
        // The summaries choose other sets of spans, so the choice is the oracle's own.
        EXPECT_GT(differs_from_summaries, 0);
        const auto& zoom = *sekv.last_zoom();
        ASSERT_EQ(zoom.size(), 4u);
        for (int h = 0; h < 4; ++h) {
            const auto& z = zoom[static_cast<size_t>(h)];
            EXPECT_EQ(z.spans, expected_spans(top, h, group)) << "head " << h;
            ASSERT_EQ(z.relevance.size(), z.spans.size());
            // Relative 4e-3: f16 factors give the keys back to about 2^-10 of their entries, so a
            // score (a sum over 16 dimensions) to a few 1e-3, and a share's exponent alike.
            for (size_t j = 0; j < z.spans.size(); ++j) {
                const double want_share =
                    share[static_cast<size_t>(h)][static_cast<size_t>(z.spans[j])];
                EXPECT_NEAR(z.relevance[j], want_share, 4e-3 * want_share)
                    << "head " << h << ", span " << z.spans[j];
            }
        }
    }
    // The oracle asks for the count τ per query gives, and has no trained parameters.
    auto calibrated = options(false, 0.25);
    calibrated.router.oracle = true;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, calibrated), std::invalid_argument);
    auto trained = options(false, 0.25);
    trained.router.oracle = trained.router.tau_per_query = true;
    auto layer = std::make_shared<TrainedRouterLayer>();
    layer->d_out = 2;
    layer->w.assign(4 * 2 * 16, 0.0f);
    layer->tau.assign(4, 0.5);
    trained.router.trained = layer;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, trained), std::invalid_argument);
    trained.router.oracle = false; // the same router without the oracle is accepted
    EXPECT_NO_THROW(SekvMemory(kShape, 1024, 1e6, trained));
}

TEST(SekvMemory, TwoStageRoutingExpandsTheCandidatesOfMostAttentionMass) {
    ThreadPool pool(2);
    const auto doc = make_doc(400, 13);
    const double rate = 0.1;
    const int rerank = 3;
    for (const bool group : {false, true}) {
        SCOPED_TRACE(group ? "KV group union" : "each head alone");
        auto o = options(false, rate); // full rank: the factors give the stored keys back
        o.router.tau_per_query = true;
        o.router.rerank = rerank;
        o.router.share_group = group;
        SekvMemory sekv(kShape, 1024, 1e6, o);
        store_and_seal(sekv, doc);
        const auto& spans = sekv.spans();
        const auto n_spans = static_cast<int64_t>(spans.size());
        ASSERT_GT(n_spans, 20);
        const int64_t nq = 2;
        const auto q = attend_after(sekv, doc, nq, 51, pool);
        // Independently, for each head of the last query: the candidates are the
        // round(3 · 0.1 · n) spans of the highest summary relevance; of them, the round(0.1 · n)
        // whose stored keys take the most softmax mass (scale 0.25) are expanded.
        const int64_t want = std::llround(rate * static_cast<double>(n_spans));
        const int64_t wide = std::llround(rerank * rate * static_cast<double>(n_spans));
        std::vector<std::vector<int>> top(4);
        int differs_from_summaries = 0, differs_from_oracle = 0;
        for (int h = 0; h < 4; ++h) {
            const float* qh = q.data() + ((nq - 1) * 4 + h) * 16;
            const auto mass = stored_span_masses(doc, spans, qh, h);
            std::vector<std::pair<double, int>> by_summary, by_mass;
            for (int64_t s = 0; s < n_spans; ++s) {
                const auto& sp = spans[static_cast<size_t>(s)];
                by_summary.emplace_back(
                    span_relevance(qh, sp.summary_k.data() + (h / 2) * 16, 16, sp.size),
                    static_cast<int>(s));
                by_mass.emplace_back(mass[static_cast<size_t>(s)], static_cast<int>(s));
            }
            std::sort(by_summary.rbegin(), by_summary.rend());
            std::vector<std::pair<double, int>> candidates;
            for (int64_t i = 0; i < wide; ++i) {
                const int s = by_summary[static_cast<size_t>(i)].second;
                candidates.push_back(by_mass[static_cast<size_t>(s)]);
            }
            std::sort(candidates.rbegin(), candidates.rend());
            std::sort(by_mass.rbegin(), by_mass.rend());
            std::vector<int> summary_top, oracle_top;
            for (int64_t i = 0; i < want; ++i) {
                top[static_cast<size_t>(h)].push_back(candidates[static_cast<size_t>(i)].second);
                summary_top.push_back(by_summary[static_cast<size_t>(i)].second);
                oracle_top.push_back(by_mass[static_cast<size_t>(i)].second);
            }
            for (auto* v : {&top[static_cast<size_t>(h)], &summary_top, &oracle_top})
                std::sort(v->begin(), v->end());
            differs_from_summaries += summary_top != top[static_cast<size_t>(h)];
            differs_from_oracle += oracle_top != top[static_cast<size_t>(h)];
        }
        // The choice is neither the summaries' nor the oracle's (which reads every span).
        EXPECT_GT(differs_from_summaries, 0);
        EXPECT_GT(differs_from_oracle, 0);
        const auto& zoom = *sekv.last_zoom();
        ASSERT_EQ(zoom.size(), 4u);
        for (int h = 0; h < 4; ++h)
            EXPECT_EQ(zoom[static_cast<size_t>(h)].spans, expected_spans(top, h, group))
                << "head " << h;
    }
    // Two-stage routing takes its candidates by τ per query, is not the oracle, and asks for
    // at least two candidates per expanded span (at most kMaxRerank).
    for (const int bad : {-1, 1, kMaxRerank + 1}) {
        auto o = options(false, rate);
        o.router.tau_per_query = true;
        o.router.rerank = bad;
        EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, o), std::invalid_argument) << bad;
    }
    auto calibrated = options(false, rate);
    calibrated.router.rerank = rerank;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, calibrated), std::invalid_argument);
    auto oracle = options(false, rate);
    oracle.router.tau_per_query = oracle.router.oracle = true;
    oracle.router.rerank = rerank;
    EXPECT_THROW(SekvMemory(kShape, 1024, 1e6, oracle), std::invalid_argument);
    // A candidate outside the spans is refused.
    const std::vector<SekvSpan> none;
    const auto qh = randn(16, 54);
    EXPECT_THROW(rerank_candidates(kShape, none, {0}, qh.data(), 0, 1), std::invalid_argument);
}
