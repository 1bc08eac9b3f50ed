// Where a query looked (engine/memory/attention_mass.h): each memory's report against the
// softmax written out here in double precision (full, the eviction baselines, LinearKV's
// assembled memory), SEKV's against full attention when every span is expanded at full rank and
// against its own summaries' softmax when none is, the sink's range arithmetic, and a session's
// per-token mass over ranges (the sources of an answer), which leaves the answer as it was.
#include "engine/linearkv/memory_assembled.h"
#include "engine/memory/attention_mass.h"
#include "engine/memory/memory_eviction.h"
#include "engine/memory/memory_full.h"
#include "engine/memory/memory_recording.h"
#include "engine/memory/memory_sliding.h"
#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/session/session.h"
#include "random_fill.h"
#include "sekv_test_doc.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace spanscope;
using namespace spanscope::test;

namespace {

// Σ over the query heads of softmax(scale · q_h · k_j) over the rows at or before qpos, per row
// (double precision, written out here).
std::vector<double> reference_mass(const AttentionShape& s, const float* q, int32_t qpos,
                                   const std::vector<float>& k, const std::vector<int32_t>& kpos) {
    const int64_t n = std::ssize(kpos);
    const int d = s.head_dim, group = s.n_head / s.n_kv_head;
    std::vector<double> mass(static_cast<size_t>(n), 0.0);
    for (int h = 0; h < s.n_head; ++h) {
        const int g = h / group;
        std::vector<double> z(static_cast<size_t>(n), -INFINITY);
        double top = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
            if (kpos[static_cast<size_t>(j)] > qpos)
                continue;
            double dot = 0;
            for (int c = 0; c < d; ++c)
                dot += static_cast<double>(q[h * d + c]) * k[(j * s.n_kv_head + g) * d + c];
            z[static_cast<size_t>(j)] = s.scale * dot;
            top = std::max(top, z[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (auto& x : z)
            sum += (x = std::exp(x - top));
        for (int64_t j = 0; j < n; ++j)
            mass[static_cast<size_t>(j)] += z[static_cast<size_t>(j)] / sum;
    }
    return mass;
}

// The sink's mass at each single position [0, n).
std::vector<double> per_position(const AttentionMass& m, int32_t n) {
    std::vector<std::pair<int32_t, int32_t>> r;
    for (int32_t p = 0; p < n; ++p)
        r.emplace_back(p, p + 1);
    return m.over_ranges(r);
}

std::vector<float> f16_rounded(std::vector<float> x) {
    round_through_f16(x.data(), std::ssize(x));
    return x;
}

} // namespace

TEST(AttentionMass, RangesSpreadTheirMassEvenlyAndClipToTheContext) {
    AttentionMass m;
    m.reset(10, 4);
    EXPECT_TRUE(m.wants(4));
    EXPECT_FALSE(m.wants(3));
    m.add(2, 0.5);
    m.add(12, 9.0); // outside the context: ignored
    m.add_range(4, 8, 2.0);
    m.add_range(8, 14, 6.0); // 2 of its 6 positions inside: 2.0 of it counts
    const auto r = m.over_ranges({{0, 3}, {4, 6}, {5, 9}, {9, 10}, {7, 7}, {-5, 100}});
    EXPECT_DOUBLE_EQ(r[0], 0.5);
    EXPECT_DOUBLE_EQ(r[1], 1.0);
    EXPECT_DOUBLE_EQ(r[2], 1.5 + 1.0);
    EXPECT_DOUBLE_EQ(r[3], 1.0);
    EXPECT_DOUBLE_EQ(r[4], 0.0);
    EXPECT_DOUBLE_EQ(r[5], 0.5 + 2.0 + 2.0);
    EXPECT_DOUBLE_EQ(m.total(), 4.5);
    m.reset(10, -1);
    EXPECT_FALSE(m.wants(-1));
    EXPECT_DOUBLE_EQ(m.over_ranges({{0, 10}})[0], 0.0);
}

// One query alone, and the same query third in a ubatch of five: the mass against the softmax
// written out, and the ubatch's outputs as without a sink.
TEST(AttentionMass, ExactMemoriesReportEachRowsProbabilitySummedOverHeads) {
    ThreadPool pool(2);
    const AttentionShape s{4, 2, 16, 0.25f, 0};
    const int64_t n = 300, nq = 5;
    const auto k = randn(n * kRow, 3, 1.5f), v = randn(n * kRow, 4);
    const auto pos = iota_pos(0, n);
    const auto q = randn(nq * 4 * 16, 5, 1.5f);
    const auto qpos = iota_pos(static_cast<int32_t>(n - nq), nq);
    std::vector<std::unique_ptr<LayerMemory>> memories;
    memories.push_back(std::make_unique<FullMemory>(s, n));
    EvictionOptions eo;
    eo.budget = 1.0;
    memories.push_back(std::make_unique<EvictionMemory>(s, n, EvictionRule::HeavyHitters, eo));
    memories.push_back(std::make_unique<EvictionMemory>(s, n, EvictionRule::SnapKV, eo));
    memories.push_back(std::make_unique<AssembledMemory>(s, n));
    const auto kr = f16_rounded(k); // what the memories hold
    for (auto& mem : memories) {
        SCOPED_TRACE(std::string(mem->policy()));
        ASSERT_TRUE(mem->reports_mass());
        mem->store(k.data(), v.data(), pos.data(), n);
        std::vector<float> plain(q.size()), out(q.size());
        mem->attend(q.data(), qpos.data(), nq, plain.data(), pool);
        AttentionMass sink;
        mem->set_mass_sink(&sink);
        for (const int64_t at : {int64_t{2}, int64_t{-1}}) {
            // at -1: the last query alone (a decode step).
            const int64_t i = at < 0 ? nq - 1 : at;
            sink.reset(n, qpos[static_cast<size_t>(i)]);
            if (at < 0)
                mem->attend(q.data() + i * 64, qpos.data() + i, 1, out.data() + i * 64, pool);
            else
                mem->attend(q.data(), qpos.data(), nq, out.data(), pool);
            const auto want =
                reference_mass(s, q.data() + i * 64, qpos[static_cast<size_t>(i)], kr, pos);
            const auto got = per_position(sink, static_cast<int32_t>(n));
            for (int64_t j = 0; j < n; ++j)
                ASSERT_NEAR(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)],
                            2e-6 + 1e-4 * want[static_cast<size_t>(j)])
                    << "row " << j << " query " << i;
            EXPECT_NEAR(sink.total(), s.n_head, 1e-4);
        }
        EXPECT_EQ(out, plain) << "the sink changed the output";
        // Clones do not report to the original's sink.
        const auto copy = mem->clone();
        sink.reset(n, qpos.back());
        copy->attend(q.data() + (nq - 1) * 64, qpos.data() + nq - 1, 1, out.data(), pool);
        EXPECT_EQ(sink.total(), 0.0);
        mem->set_mass_sink(nullptr);
        mem->attend(q.data() + (nq - 1) * 64, qpos.data() + nq - 1, 1, out.data(), pool);
        EXPECT_EQ(sink.total(), 0.0);
    }
}

TEST(AttentionMass, ASlidingWindowMemoryRefusesASink) {
    SlidingMemory sliding(AttentionShape{4, 2, 16, 0.25f, 8}, 64);
    EXPECT_FALSE(sliding.reports_mass());
    AttentionMass sink;
    EXPECT_THROW(sliding.set_mass_sink(&sink), std::logic_error);
    EXPECT_NO_THROW(sliding.set_mass_sink(nullptr));
}

// Every span expanded at full rank gives full attention (test_memory_sekv.cpp): each span's mass,
// and each full row's, is then full attention's over the same positions.
TEST(AttentionMass, SekvWithEverySpanExpandedReportsFullAttentionsMassPerSpan) {
    ThreadPool pool(2);
    const auto doc = make_doc(200, 1);
    FullMemory full(kShape, 512);
    SekvMemory sekv(kShape, 512, 1e6, options(true));
    ASSERT_TRUE(sekv.reports_mass());
    const auto pos = iota_pos(0, doc.n);
    full.store(doc.k.data(), doc.v.data(), pos.data(), doc.n);
    store_and_seal(sekv, doc);
    const int64_t nq = 3;
    const auto tk = randn(nq * kRow, 7), tv = randn(nq * kRow, 8);
    const auto q = randn(nq * 64, 9);
    const auto qpos = iota_pos(static_cast<int32_t>(doc.n), nq);
    full.store(tk.data(), tv.data(), qpos.data(), nq);
    sekv.store(tk.data(), tv.data(), qpos.data(), nq);
    AttentionMass a, b;
    a.reset(doc.n + nq, qpos[1]);
    b.reset(doc.n + nq, qpos[1]);
    full.set_mass_sink(&a);
    sekv.set_mass_sink(&b);
    std::vector<float> out(q.size());
    full.attend(q.data(), qpos.data(), nq, out.data(), pool);
    sekv.attend(q.data(), qpos.data(), nq, out.data(), pool);
    // Ranges: each span, then each position outside the spans.
    std::vector<std::pair<int32_t, int32_t>> ranges;
    std::vector<char> in_span(static_cast<size_t>(doc.n + nq), 0);
    for (const auto& sp : doc.seg.spans) {
        ranges.emplace_back(static_cast<int32_t>(sp.begin), static_cast<int32_t>(sp.end));
        for (auto p = sp.begin; p < sp.end; ++p)
            in_span[static_cast<size_t>(p)] = 1;
    }
    for (int32_t p = 0; p < doc.n + nq; ++p)
        if (!in_span[static_cast<size_t>(p)])
            ranges.emplace_back(p, p + 1);
    const auto want = a.over_ranges(ranges), got = b.over_ranges(ranges);
    for (size_t r = 0; r < ranges.size(); ++r)
        EXPECT_NEAR(got[r], want[r], 2e-3 + 2e-2 * want[r]) << "range " << ranges[r].first;
    EXPECT_NEAR(b.total(), kShape.n_head, 1e-3);
    // The last query was not the sink's: nothing more was added.
    EXPECT_NEAR(a.total(), kShape.n_head, 1e-4);
}

// No span expanded (chunk_summary): a span's mass is its summary row's softmax weight, written
// out here from the memory's summary keys (bias log|S|), with the full rows beside them (a tail
// of 300 rows after the sealed document: the full rows are scored in more than one block).
TEST(AttentionMass, SummaryRowsCreditTheirSpanWithTheirSoftmaxWeight) {
    ThreadPool pool(2);
    const auto doc = make_doc(120, 3);
    auto o = options(false);
    o.summaries_only = true;
    SekvMemory sekv(kShape, 1024, 1e6, o);
    store_and_seal(sekv, doc);
    const int64_t tail = 300;
    const auto tk = randn(tail * kRow, 11, 1.5f), tv = randn(tail * kRow, 12);
    const auto tpos = iota_pos(static_cast<int32_t>(doc.n), tail);
    sekv.store(tk.data(), tv.data(), tpos.data(), tail);
    const auto q = randn(64, 10, 1.5f);
    const int32_t qp = tpos.back();
    AttentionMass m;
    m.reset(qp + 1, qp);
    sekv.set_mass_sink(&m);
    std::vector<float> out(64);
    sekv.attend(q.data(), &qp, 1, out.data(), pool);
    // The rows kept at full resolution: every position outside a span.
    std::vector<char> in_span(static_cast<size_t>(qp + 1), 0);
    for (const auto& sp : doc.seg.spans)
        for (auto p = sp.begin; p < sp.end; ++p)
            in_span[static_cast<size_t>(p)] = 1;
    const auto kr = f16_rounded(doc.k), tkr = f16_rounded(tk);
    std::vector<double> want_span(sekv.spans().size(), 0.0);
    std::vector<double> want_row(static_cast<size_t>(qp + 1), 0.0);
    for (int h = 0; h < 4; ++h) {
        const int g = h / 2;
        std::vector<double> z;
        std::vector<int> owner; // span index, or -1 - position
        for (int32_t p = 0; p <= qp; ++p) {
            if (in_span[static_cast<size_t>(p)])
                continue;
            const float* kp =
                p < doc.n ? kr.data() + (p * 2 + g) * 16 : tkr.data() + ((p - doc.n) * 2 + g) * 16;
            double dot = 0;
            for (int c = 0; c < 16; ++c)
                dot += static_cast<double>(q[h * 16 + c]) * kp[c];
            z.push_back(0.25 * dot);
            owner.push_back(-1 - p);
        }
        for (size_t s = 0; s < sekv.spans().size(); ++s) {
            const auto& sp = sekv.spans()[s];
            double dot = 0;
            for (int c = 0; c < 16; ++c)
                dot += static_cast<double>(q[h * 16 + c]) * sp.summary_k[g * 16 + c];
            z.push_back(0.25 * dot + std::log(static_cast<double>(sp.size)));
            owner.push_back(static_cast<int>(s));
        }
        const double top = *std::max_element(z.begin(), z.end());
        double sum = 0;
        for (auto& x : z)
            sum += (x = std::exp(x - top));
        for (size_t i = 0; i < z.size(); ++i)
            (owner[i] >= 0 ? want_span[static_cast<size_t>(owner[i])]
                           : want_row[static_cast<size_t>(-1 - owner[i])]) += z[i] / sum;
    }
    std::vector<std::pair<int32_t, int32_t>> spans;
    for (const auto& sp : sekv.spans())
        spans.emplace_back(sp.begin, sp.end());
    const auto got_span = m.over_ranges(spans);
    for (size_t s = 0; s < spans.size(); ++s)
        EXPECT_NEAR(got_span[s], want_span[s], 1e-5 + 1e-4 * want_span[s]) << "span " << s;
    const auto got_row = per_position(m, qp + 1);
    for (int32_t p = 0; p <= qp; ++p) {
        if (!in_span[static_cast<size_t>(p)]) {
            EXPECT_NEAR(got_row[static_cast<size_t>(p)], want_row[static_cast<size_t>(p)],
                        1e-5 + 1e-4 * want_row[static_cast<size_t>(p)])
                << "position " << p;
        }
    }
    EXPECT_NEAR(m.total(), 4.0, 1e-4);
}

// A session measures each generated token's mass over the ranges given: the rows of every
// token sum to layers × heads over ranges that tile the context, and the answer is the one
// given without them.
TEST(AttentionMass, ASessionReportsEachAnswerTokensMassAndKeepsTheAnswer) {
    TempDir dir;
    const std::string path = dir.file("tiny.gguf");
    TinyGemma3Config cfg;
    cfg.n_layer = 4;
    cfg.sliding_pattern = 2; // layers 1 and 3 global
    write_tiny_gemma3(path, cfg);
    const auto loaded = Model::load(path);
    const Model& model = *loaded;
    for (const char* policy : {"full", "sekv"}) {
        SCOPED_TRACE(policy);
        SessionOptions so;
        so.threads = 2;
        so.global_policy = policy;
        Session plain(model, so), measured(model, so);
        const auto doc = random_tokens(150, model.info().n_vocab, 7);
        const std::vector<int32_t> question{40, 41, 42, 43};
        for (Session* s : {&plain, &measured}) {
            std::vector<float> surprisal(doc.size());
            s->prefill(doc, nullptr, {}, surprisal.data(), question[0]);
            if (std::string(policy) == "sekv")
                s->seal_context(surprisal.data(), 0, std::ssize(doc));
        }
        ASSERT_TRUE(measured.reports_sources());
        const int32_t end = static_cast<int32_t>(doc.size() + question.size() + 12);
        std::vector<std::pair<int32_t, int32_t>> tiles;
        for (int32_t p = 0; p < end; p += 10)
            tiles.emplace_back(p, std::min(end, p + 10));
        measured.set_source_ranges(tiles);
        SamplingParams greedy;
        greedy.temperature = 0;
        const auto a = plain.answer_after_context(question, ChatFormat::Completion, 8, greedy);
        const auto b = measured.answer_after_context(question, ChatFormat::Completion, 8, greedy);
        EXPECT_EQ(a.tokens, b.tokens);
        EXPECT_TRUE(a.source_mass.empty());
        ASSERT_EQ(b.source_mass.size(), b.tokens.size());
        EXPECT_EQ(b.source_heads, 2 * cfg.n_head);
        for (const auto& row : b.source_mass) {
            ASSERT_EQ(row.size(), tiles.size());
            EXPECT_NEAR(std::accumulate(row.begin(), row.end(), 0.0), b.source_heads, 1e-3);
        }
    }
}

// Which query each answer token's mass comes from: the first token's from the question's last
// query, each next token's from the query at the position the token before it was fed at —
// against the softmax written out over the rows held and the queries a recording memory kept,
// summed over the global layers.
TEST(AttentionMass, EachTokensMassIsThatOfTheQueryThatProducedIt) {
    TempDir dir;
    const std::string path = dir.file("tiny.gguf");
    TinyGemma3Config cfg;
    cfg.n_layer = 4;
    cfg.sliding_pattern = 2;
    write_tiny_gemma3(path, cfg);
    const auto loaded = Model::load(path);
    const Model& model = *loaded;
    SessionOptions so;
    so.threads = 2;
    Session s(model, so);
    const auto doc = random_tokens(120, model.info().n_vocab, 11);
    s.prefill(doc);
    std::vector<int> global;
    for (int il = 0; il < s.memory().n_layers(); ++il)
        if (s.memory().layer(il).shape().window == 0) {
            global.push_back(il);
            s.memory().replace(il, std::make_unique<RecordingMemory>(s.memory().layer(il).clone()));
        }
    ASSERT_EQ(global.size(), 2u);
    const std::vector<int32_t> question{40, 41, 42};
    const int32_t end = static_cast<int32_t>(doc.size() + question.size() + 4);
    std::vector<std::pair<int32_t, int32_t>> each;
    for (int32_t p = 0; p < end; ++p)
        each.emplace_back(p, p + 1);
    s.set_source_ranges(each);
    SamplingParams greedy;
    const auto a = s.answer_after_context(question, ChatFormat::Completion, 3, greedy);
    ASSERT_GE(a.source_mass.size(), 2u);
    for (size_t t = 0; t < 2; ++t) {
        // Token 0 came from the question's last query; token 1 from the query token 0 was fed at.
        const int32_t qp = static_cast<int32_t>(doc.size() + question.size() - 1 + t);
        std::vector<double> want(static_cast<size_t>(end), 0.0);
        for (const int il : global) {
            const auto& rec = dynamic_cast<const RecordingMemory&>(s.memory().layer(il));
            const int64_t at = rec.find_recorded(qp);
            ASSERT_GE(at, 0) << "layer " << il << " saw no query at " << qp;
            const auto& shape = rec.shape();
            const int64_t row = static_cast<int64_t>(shape.n_head) * shape.head_dim;
            std::vector<float> k, v;
            std::vector<int32_t> kpos;
            rec.read_rows(0, end, k, v, kpos);
            const auto m = reference_mass(shape, rec.recorded_q().data() + at * row, qp, k, kpos);
            for (size_t j = 0; j < kpos.size(); ++j)
                want[static_cast<size_t>(kpos[j])] += m[j];
        }
        for (int32_t p = 0; p < end; ++p)
            ASSERT_NEAR(a.source_mass[t][static_cast<size_t>(p)], want[static_cast<size_t>(p)],
                        2e-5 + 1e-4 * want[static_cast<size_t>(p)])
                << "token " << t << " position " << p;
    }
}
