// SEKV zoom recordings (issue 8): recording a document on a tiny model, the file's round trip,
// the recorded outputs and span masses against a naive double-precision softmax attention
// written here, the mining of query positions, malformed files, and resuming.
#include "engine/memory/memory_full.h"
#include "engine/memory/memory_recording.h"
#include "engine/session/session.h"
#include "lab/router/zoom_record.h"
#include "lab/router/zoom_recorder.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace spanscope;

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// Offset just past the (unique) occurrence of `text` in the file's bytes.
size_t offset_after(const std::vector<uint8_t>& b, const std::string& text) {
    const auto it = std::search(b.begin(), b.end(), text.begin(), text.end());
    if (it == b.end())
        throw std::runtime_error("'" + text + "' is not in the file");
    return static_cast<size_t>(it - b.begin()) + text.size();
}

template <typename T> void poke(std::vector<uint8_t>& b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
}

template <typename T> T peek(const std::vector<uint8_t>& b, size_t at) {
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    return v;
}

// Where element i of the int32 metadata array `key` lies (GGUF: key, u32 type 9, u32 element
// type, u64 count, elements).
size_t int32_element(const std::vector<uint8_t>& b, const std::string& key, size_t i) {
    const size_t at = offset_after(b, key);
    if (peek<uint32_t>(b, at) != 9 || peek<uint32_t>(b, at + 4) != 5)
        throw std::runtime_error(key + " is not an int32 array");
    return at + 16 + 4 * i;
}

// Naive attention of one query head over rows 0..p in double, written for the test.
struct NaiveHead {
    std::vector<double> prob; ///< [p + 1]
    std::vector<double> out;  ///< [head_dim]
};

NaiveHead naive_head(const ZoomRecordLayer& l, int64_t i, int h, int32_t p) {
    const int d = l.head_dim;
    const int g = h / (l.n_head / l.n_kv_head);
    const float* q = l.q.data() + (i * l.n_head + h) * d;
    NaiveHead r;
    std::vector<double> logit(static_cast<size_t>(p) + 1);
    double max = -1e300;
    for (int32_t j = 0; j <= p; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c)
            dot += static_cast<double>(q[c]) *
                   l.k[(static_cast<size_t>(j) * l.n_kv_head + g) * d + static_cast<size_t>(c)];
        logit[static_cast<size_t>(j)] = l.scale * dot;
        max = std::max(max, logit[static_cast<size_t>(j)]);
    }
    double z = 0;
    for (const double x : logit)
        z += std::exp(x - max);
    r.prob.resize(logit.size());
    r.out.assign(static_cast<size_t>(d), 0.0);
    for (int32_t j = 0; j <= p; ++j) {
        const double pj = std::exp(logit[static_cast<size_t>(j)] - max) / z;
        r.prob[static_cast<size_t>(j)] = pj;
        for (int c = 0; c < d; ++c)
            r.out[static_cast<size_t>(c)] +=
                pj * l.v[(static_cast<size_t>(j) * l.n_kv_head + g) * d + static_cast<size_t>(c)];
    }
    return r;
}

class ZoomRecordTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(test::temp_dir());
        model_path_ = new std::string(*dir_ + "/tiny.gguf");
        test::TinyGemma3Config cfg;
        cfg.n_ctx = 1024;
        test::write_tiny_gemma3(*model_path_, cfg);
        model_ = Model::load(*model_path_).release();
        settings_ = new ZoomRecordSettings;
        settings_->max_tokens = 640;
        settings_->queries = 5;
        settings_->tail = 16;
        settings_->budget = 0.5;
        settings_->first_query = 160;
        settings_->query_stride = 8;
        settings_->min_separation = 32;
        tokens_ = new std::vector<int32_t>(zoom_document_tokens(
            model_->tokenizer(), test::sample_prose(3, 2000), settings_->max_tokens));
        recording_ = new ZoomRecording(record_zoom(*model_, *tokens_, *settings_, 2));
    }
    static void TearDownTestSuite() {
        std::filesystem::remove_all(*dir_);
        delete recording_;
        delete tokens_;
        delete settings_;
        delete model_;
        delete model_path_;
        delete dir_;
    }
    const ZoomRecord& rec() const { return recording_->record; }
    std::string saved(const std::string& name) const {
        ZoomRecord r = rec();
        r.source = "/docs/" + name;
        r.model_fingerprint = "0123456789abcdef0123456789abcdef";
        r.command = "spanscope-lab zoom-record --test";
        r.commit = "abc123";
        const std::string path = *dir_ + "/" + name + ".zoom-record.gguf";
        save_zoom_record(r, path);
        return path;
    }
    // load_zoom_record refuses `bytes` with a ZoomRecordError naming the file and saying `why`.
    void expect_refused(const std::vector<uint8_t>& bytes, const std::string& why) const {
        const std::string path = *dir_ + "/bad.gguf";
        write_bytes(path, bytes);
        try {
            load_zoom_record(path);
            ADD_FAILURE() << "accepted a file that should fail with: " << why;
        } catch (const ZoomRecordError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(path), std::string::npos) << what;
            EXPECT_NE(what.find(why), std::string::npos) << what;
        }
    }

    static std::string* dir_;
    static std::string* model_path_;
    static Model* model_;
    static ZoomRecordSettings* settings_;
    static std::vector<int32_t>* tokens_;
    static ZoomRecording* recording_;
};

std::string* ZoomRecordTest::dir_ = nullptr;
std::string* ZoomRecordTest::model_path_ = nullptr;
Model* ZoomRecordTest::model_ = nullptr;
ZoomRecordSettings* ZoomRecordTest::settings_ = nullptr;
std::vector<int32_t>* ZoomRecordTest::tokens_ = nullptr;
ZoomRecording* ZoomRecordTest::recording_ = nullptr;

} // namespace

TEST_F(ZoomRecordTest, RecordsTheDocumentAsSekvWouldSealIt) {
    const ZoomRecord& r = rec();
    ASSERT_EQ(r.n_tokens(), settings_->max_tokens);
    EXPECT_EQ(r.tokens[0], model_->tokenizer().bos());
    EXPECT_EQ(r.n_queries(), settings_->queries);
    EXPECT_EQ(r.tail, settings_->tail);
    EXPECT_EQ(r.budget, settings_->budget);
    EXPECT_EQ(r.settings, zoom_record_settings_key(*settings_));
    EXPECT_TRUE(recording_->budget_met);
    ASSERT_GT(r.spans.size(), 10u) << "a recording without spans tests nothing";

    // SEKV's own path: a session under the sekv policy prefills the same document with its
    // surprisal and seals it; the recording holds the same surprisal and segmentation.
    SessionOptions so;
    so.threads = 2;
    so.n_ctx = r.n_tokens();
    so.global_policy = "sekv";
    so.sekv.budget = settings_->budget;
    Session sekv(*model_, so);
    std::vector<float> row(static_cast<size_t>(r.n_tokens()));
    sekv.prefill(r.tokens, nullptr, {}, row.data(), -1);
    const SealInfo seal = sekv.seal_context(row.data(), 0, r.n_tokens());
    ASSERT_EQ(seal.segmentation.spans.size(), r.spans.size());
    for (size_t s = 0; s < r.spans.size(); ++s) {
        EXPECT_EQ(seal.segmentation.spans[s].begin, r.spans[s].begin) << s;
        EXPECT_EQ(seal.segmentation.spans[s].end, r.spans[s].end) << s;
    }
    EXPECT_TRUE(std::isnan(r.token_surprisal[0]));
    for (size_t i = 1; i < r.token_surprisal.size(); ++i)
        EXPECT_NEAR(r.token_surprisal[i], seal.token_surprisal[i], 1e-5) << i;

    // The SEKV layers (the tiny model's global ones), each with the rows full attention held.
    const auto layers = sekv_layers(model_->info(), SekvOptions{});
    ASSERT_EQ(r.layers.size(), layers.size());
    SessionOptions fo = so;
    fo.global_policy = "full";
    Session full(*model_, fo);
    full.prefill(r.tokens);
    for (size_t li = 0; li < layers.size(); ++li) {
        const auto& l = r.layers[li];
        EXPECT_EQ(l.layer, layers[li]);
        const auto& shape = model_->info().layers[static_cast<size_t>(l.layer)].attn;
        EXPECT_EQ(l.n_head, shape.n_head);
        EXPECT_EQ(l.n_kv_head, shape.n_kv_head);
        EXPECT_EQ(l.head_dim, shape.head_dim);
        EXPECT_EQ(l.scale, shape.scale);
        std::vector<float> k, v;
        std::vector<int32_t> pos;
        full.memory().layer(l.layer).read_rows(0, INT32_MAX, k, v, pos);
        EXPECT_EQ(k, l.k);
        EXPECT_EQ(v, l.v);
    }
}

TEST_F(ZoomRecordTest, SavedFileLoadsAndRoundTrips) {
    const std::string path = saved("doc.txt");
    const ZoomRecord a = rec();
    const ZoomRecord b = load_zoom_record(path);
    EXPECT_EQ(b.source, "/docs/doc.txt");
    EXPECT_EQ(b.model_fingerprint, "0123456789abcdef0123456789abcdef");
    EXPECT_EQ(b.command, "spanscope-lab zoom-record --test");
    EXPECT_EQ(b.commit, "abc123");
    EXPECT_EQ(b.settings, a.settings);
    EXPECT_EQ(b.tokens, a.tokens);
    ASSERT_EQ(b.token_surprisal.size(), a.token_surprisal.size());
    EXPECT_TRUE(std::isnan(b.token_surprisal[0]));
    for (size_t i = 1; i < a.token_surprisal.size(); ++i)
        EXPECT_EQ(b.token_surprisal[i], a.token_surprisal[i]);
    ASSERT_EQ(b.spans.size(), a.spans.size());
    for (size_t s = 0; s < a.spans.size(); ++s)
        EXPECT_TRUE(b.spans[s].begin == a.spans[s].begin && b.spans[s].end == a.spans[s].end);
    EXPECT_EQ(b.budget, a.budget);
    EXPECT_EQ(b.tail, a.tail);
    EXPECT_EQ(b.query_pos, a.query_pos);
    ASSERT_EQ(b.layers.size(), a.layers.size());
    for (size_t li = 0; li < a.layers.size(); ++li) {
        const auto &x = a.layers[li], &y = b.layers[li];
        EXPECT_EQ(y.layer, x.layer);
        EXPECT_EQ(y.n_head, x.n_head);
        EXPECT_EQ(y.n_kv_head, x.n_kv_head);
        EXPECT_EQ(y.head_dim, x.head_dim);
        EXPECT_EQ(y.scale, x.scale);
        EXPECT_EQ(y.rope_base, x.rope_base);
        EXPECT_EQ(y.k, x.k) << "f16 keys are f16-rounded already: exact";
        EXPECT_EQ(y.v, x.v);
        EXPECT_EQ(y.q, x.q);
        EXPECT_EQ(y.out, x.out);
        EXPECT_EQ(y.span_mass, x.span_mass);
    }
}

// The recorded outputs and span masses are what softmax attention gives from the recorded q
// and k/v, computed naively in double here; the masses obey the visibility rule and the mass on
// visible spans plus the mass elsewhere is 1.
TEST_F(ZoomRecordTest, OutputAndSpanMassMatchANaiveAttention) {
    const ZoomRecord& r = rec();
    int64_t visible_pairs = 0;
    double largest_visible = 0;
    for (const auto& l : r.layers)
        for (int64_t i = 0; i < r.n_queries(); ++i) {
            const int32_t p = r.query_pos[static_cast<size_t>(i)];
            for (int h = 0; h < l.n_head; ++h) {
                const NaiveHead n = naive_head(l, i, h, p);
                const float* out = l.out.data() + (i * l.n_head + h) * l.head_dim;
                for (int c = 0; c < l.head_dim; ++c)
                    EXPECT_NEAR(out[c], n.out[static_cast<size_t>(c)], 2e-5)
                        << "layer " << l.layer << " query " << i << " head " << h;
                const float* mass = l.span_mass.data() + (i * l.n_head + h) * r.spans.size();
                std::vector<char> in_visible(static_cast<size_t>(p) + 1, 0);
                double on_spans = 0;
                for (size_t s = 0; s < r.spans.size(); ++s) {
                    const bool vis = r.spans[s].end <= p - r.tail;
                    EXPECT_EQ(vis, r.visible(i, s));
                    if (!vis) {
                        EXPECT_EQ(mass[s], 0.0f) << "span " << s << " is not visible";
                        continue;
                    }
                    double want = 0;
                    for (int64_t j = r.spans[s].begin; j < r.spans[s].end; ++j) {
                        want += n.prob[static_cast<size_t>(j)];
                        in_visible[static_cast<size_t>(j)] = 1;
                    }
                    EXPECT_NEAR(mass[s], want, 1e-6) << "span " << s;
                    on_spans += mass[s];
                    largest_visible = std::max(largest_visible, want);
                    ++visible_pairs;
                }
                double elsewhere = 0;
                for (int32_t j = 0; j <= p; ++j)
                    if (!in_visible[static_cast<size_t>(j)])
                        elsewhere += n.prob[static_cast<size_t>(j)];
                EXPECT_LE(on_spans + elsewhere, 1 + 1e-5);
                EXPECT_NEAR(on_spans + elsewhere, 1.0, 1e-5);
            }
        }
    EXPECT_GT(visible_pairs, 0);
    EXPECT_GT(largest_visible, 0.0);
    EXPECT_LT(recording_->out_check, 2e-5);
}

// The kept positions are the greedy choice by reach, recomputed here from queries taken in a
// separate run (a RecordingMemory keeping every position) with a naive softmax.
TEST_F(ZoomRecordTest, MinesThePositionsOfLargestReach) {
    const ZoomRecord& r = rec();
    const auto layers = sekv_layers(model_->info(), SekvOptions{});
    SessionOptions so;
    so.threads = 2;
    so.n_ctx = r.n_tokens();
    Session session(*model_, so);
    std::vector<const RecordingMemory*> rec_layers;
    for (const int il : layers) {
        const auto& shape = model_->info().layers[static_cast<size_t>(il)].attn;
        auto m = std::make_unique<RecordingMemory>(std::make_unique<FullMemory>(shape, 4096));
        rec_layers.push_back(m.get());
        session.memory().replace(il, std::move(m));
    }
    session.prefill(r.tokens);

    // Candidates every 8 tokens from first_query; reach = mean over layers and heads of the
    // naive probability on visible spans' rows.
    std::vector<int32_t> cand;
    for (int32_t p = settings_->first_query; p < r.n_tokens(); p += settings_->query_stride)
        cand.push_back(p);
    ASSERT_EQ(cand, recording_->candidates);
    std::vector<double> reach(cand.size(), 0.0);
    for (size_t c = 0; c < cand.size(); ++c) {
        const int32_t p = cand[c];
        for (size_t li = 0; li < layers.size(); ++li) {
            ZoomRecordLayer l = r.layers[li]; // k, v and the shape; q from the separate run
            const int64_t at = p;             // keep-all recording: row i is position i
            ASSERT_EQ(rec_layers[li]->recorded_positions()[static_cast<size_t>(at)], p);
            const size_t row = static_cast<size_t>(l.n_head) * l.head_dim;
            l.q.assign(rec_layers[li]->recorded_q().begin() + at * static_cast<int64_t>(row),
                       rec_layers[li]->recorded_q().begin() + (at + 1) * static_cast<int64_t>(row));
            double layer_sum = 0;
            for (int h = 0; h < l.n_head; ++h) {
                const NaiveHead n = naive_head(l, 0, h, p);
                for (const auto& s : r.spans)
                    if (s.end <= p - r.tail)
                        for (int64_t j = s.begin; j < s.end; ++j)
                            layer_sum += n.prob[static_cast<size_t>(j)];
            }
            reach[c] += layer_sum / l.n_head / static_cast<double>(layers.size());
        }
        EXPECT_NEAR(recording_->reach[c], reach[c], 1e-6) << "candidate " << p;
    }
    // Greedy by reach with the minimum separation, written out here.
    std::vector<int32_t> want;
    std::vector<bool> used(cand.size(), false);
    while (static_cast<int>(want.size()) < settings_->queries) {
        int best = -1;
        for (size_t c = 0; c < cand.size(); ++c) {
            if (used[c])
                continue;
            bool apart = true;
            for (const int32_t k : want)
                apart = apart && std::abs(cand[c] - k) >= settings_->min_separation;
            if (apart && (best < 0 || reach[c] > reach[static_cast<size_t>(best)]))
                best = static_cast<int>(c);
        }
        if (best < 0)
            break;
        used[static_cast<size_t>(best)] = true;
        want.push_back(cand[static_cast<size_t>(best)]);
    }
    std::sort(want.begin(), want.end());
    EXPECT_EQ(r.query_pos, want);
    // And the reach of every kept position is at least that of any candidate left out that
    // is far from all of them (it was free to be taken).
    double lowest_kept = 1e9;
    for (size_t c = 0; c < cand.size(); ++c)
        if (std::binary_search(r.query_pos.begin(), r.query_pos.end(), cand[c]))
            lowest_kept = std::min(lowest_kept, reach[c]);
    for (size_t c = 0; c < cand.size(); ++c) {
        bool far = true;
        for (const int32_t k : r.query_pos)
            far = far && std::abs(cand[c] - k) >= settings_->min_separation;
        if (far) {
            EXPECT_LE(reach[c], lowest_kept + 1e-12) << cand[c];
        }
    }
}

TEST(ZoomRecordMining, SelectsByReachWithSeparation) {
    const std::vector<int32_t> cand{100, 108, 116, 124, 132, 140, 148, 156};
    const std::vector<double> reach{0.1, 0.9, 0.8, 0.2, 0.7, 0.7, 0.3, 0.6};
    // 108 first; 116 is too close (8 < 20); 132 and 140 tie: the earlier, 132; 140 and 148 are
    // too close to 132; 156 next (24 >= 20).
    EXPECT_EQ(select_zoom_queries(cand, reach, 3, 20), (std::vector<int32_t>{108, 132, 156}));
    EXPECT_EQ(select_zoom_queries(cand, reach, 2, 0), (std::vector<int32_t>{108, 116}));
    EXPECT_EQ(select_zoom_queries(cand, reach, 100, 1000), (std::vector<int32_t>{108}));
    EXPECT_TRUE(select_zoom_queries(cand, reach, 0, 1).empty());
    EXPECT_THROW(select_zoom_queries(cand, {0.1}, 3, 1), std::invalid_argument);
    ZoomRecordSettings s;
    s.first_query = 512;
    s.query_stride = 8;
    EXPECT_TRUE(zoom_query_candidates(512, s).empty());
    EXPECT_EQ(zoom_query_candidates(530, s), (std::vector<int32_t>{512, 520, 528}));
}

TEST(ZoomRecordMining, RecallProbesCopyRunsOfTheDocumentAfterIt) {
    std::vector<int32_t> doc(300);
    for (int32_t i = 0; i < 300; ++i)
        doc[static_cast<size_t>(i)] = 1000 + i;
    ZoomRecordSettings s;
    s.max_tokens = 200;
    s.recall_probes = 3;
    s.probe_tokens = 10;
    std::vector<int32_t> starts;
    const auto t = zoom_recall_probes(doc, s, &starts);
    // The document cut to 200 − 3 · 10 = 170 tokens, then three copies of 10 tokens starting at
    // 1 + (i + ½) · (170 − 1 − 10) / 3 = 1 + (i + ½) · 53: 27, 80, 133.
    ASSERT_EQ(t.size(), 200u);
    EXPECT_EQ(starts, (std::vector<int32_t>{27, 80, 133}));
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 10; ++j)
            EXPECT_EQ(t[static_cast<size_t>(170 + i * 10 + j)],
                      1000 + starts[static_cast<size_t>(i)] + j);
    for (int32_t i = 0; i < 170; ++i)
        EXPECT_EQ(t[static_cast<size_t>(i)], 1000 + i);
    EXPECT_NE(zoom_record_settings_key(s).find(" recall_probes=3 probe_tokens=10"),
              std::string::npos);
    // Without probes: the document cut to max_tokens, and the key of the recordings made before
    // probes existed.
    s.recall_probes = 0;
    EXPECT_EQ(zoom_recall_probes(doc, s).size(), 200u);
    EXPECT_EQ(zoom_record_settings_key(s).find("recall_probes"), std::string::npos);
    // Too short a document, too many probes, too short a probe.
    s.recall_probes = 2;
    EXPECT_THROW(zoom_recall_probes(std::vector<int32_t>(20, 5), s), std::invalid_argument);
    s.recall_probes = 11;
    EXPECT_THROW(zoom_recall_probes(doc, s), std::invalid_argument);
    s.recall_probes = 2;
    s.probe_tokens = 4;
    EXPECT_THROW(zoom_recall_probes(doc, s), std::invalid_argument);
}

TEST_F(ZoomRecordTest, MalformedFilesAreRefused) {
    const std::string path = saved("good.txt");
    const auto good = read_bytes(path);
    ASSERT_NO_THROW(load_zoom_record(path));
    const ZoomRecord& r = rec();
    const std::string P = "spanscope.zoom_record.";

    { // truncated
        auto b = good;
        b.resize(b.size() / 2);
        expect_refused(b, "not a readable recording");
    }
    { // another version
        auto b = good;
        poke<uint32_t>(b, offset_after(b, P + "version") + 4, 2);
        expect_refused(b, "version 2");
    }
    { // a declared size that does not match the arrays
        auto b = good;
        const size_t at = offset_after(b, P + "n_tokens") + 4;
        poke<uint64_t>(b, at, peek<uint64_t>(b, at) - 1);
        expect_refused(b, "declares");
    }
    { // a tensor of another shape than the header declares
        auto b = good;
        const std::string name = "layer." + std::to_string(r.layers[0].layer) + ".span_mass";
        const size_t at = offset_after(b, name) + 4; // n_dims, then ne[0] = n_spans
        poke<uint64_t>(b, at, peek<uint64_t>(b, at) - 1);
        expect_refused(b, "has shape");
    }
    { // overlapping spans
        auto b = good;
        poke<int32_t>(b, int32_element(b, P + "spans.begin", 1),
                      static_cast<int32_t>(r.spans[0].end - 1));
        expect_refused(b, "span 1");
    }
    { // a span past the document
        auto b = good;
        poke<int32_t>(b, int32_element(b, P + "spans.end", r.spans.size() - 1),
                      static_cast<int32_t>(r.n_tokens() + 5));
        expect_refused(b, "outside");
    }
    { // query positions not ascending
        auto b = good;
        poke<int32_t>(b, int32_element(b, P + "query_pos", 1), r.query_pos[0]);
        expect_refused(b, "query position 1");
    }
    { // a query position outside the document
        auto b = good;
        poke<int32_t>(b, int32_element(b, P + "query_pos", r.query_pos.size() - 1),
                      static_cast<int32_t>(r.n_tokens()));
        expect_refused(b, "outside");
    }
    // Not a recording at all (a model file), and no file.
    try {
        load_zoom_record(*model_path_);
        ADD_FAILURE() << "a model file loaded as a recording";
    } catch (const ZoomRecordError& e) {
        EXPECT_NE(std::string(e.what()).find(*model_path_), std::string::npos);
    }
    EXPECT_THROW(load_zoom_record(*dir_ + "/missing.gguf"), ZoomRecordError);
}

TEST_F(ZoomRecordTest, SaveRefusesInconsistentRecordsAndWritesNothing) {
    const std::string path = *dir_ + "/refused.gguf";
    auto expect_refused = [&](ZoomRecord r, const std::string& why) {
        try {
            save_zoom_record(r, path);
            ADD_FAILURE() << "saved a record that should fail with: " << why;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
        }
        EXPECT_FALSE(std::filesystem::exists(path));
    };
    ZoomRecord r = rec();
    r.layers[0].k.pop_back();
    expect_refused(r, "k holds");
    r = rec();
    r.layers[0].span_mass.push_back(0);
    expect_refused(r, "span_mass holds");
    r = rec();
    std::swap(r.spans[0], r.spans[1]);
    expect_refused(r, "span 1");
    r = rec();
    r.query_pos.back() = static_cast<int32_t>(r.n_tokens());
    expect_refused(r, "query position");
    r = rec();
    // Mass on a span the first query does not see.
    size_t hidden = 0;
    while (hidden < r.spans.size() && r.visible(0, hidden))
        ++hidden;
    ASSERT_LT(hidden, r.spans.size());
    r.layers[0].span_mass[hidden] = 0.1f;
    expect_refused(r, "does not see");
}

TEST_F(ZoomRecordTest, ResumeSkipsAFinishedDocumentAndRefusesOtherSettings) {
    const std::string fp = "0123456789abcdef0123456789abcdef";
    const std::string key = zoom_record_settings_key(*settings_);
    const std::string path = *dir_ + "/resume.txt.zoom-record.gguf";
    EXPECT_EQ(zoom_resume(path, "/docs/resume.txt", rec().tokens, fp, key), ZoomResume::Record);
    ASSERT_EQ(saved("resume.txt"), path);
    EXPECT_EQ(zoom_resume(path, "/docs/resume.txt", rec().tokens, fp, key), ZoomResume::Skip);

    auto expect_refused = [&](const std::string& source, const std::vector<int32_t>& tokens,
                              const std::string& f, const std::string& k, const std::string& why) {
        try {
            zoom_resume(path, source, tokens, f, k);
            ADD_FAILURE() << "resumed over a recording that differs: " << why;
        } catch (const ZoomRecordError& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(path), std::string::npos) << what;
            EXPECT_NE(what.find(why), std::string::npos) << what;
        }
    };
    ZoomRecordSettings other = *settings_;
    other.tail = 32;
    expect_refused("/docs/resume.txt", rec().tokens, fp, zoom_record_settings_key(other),
                   "other settings");
    expect_refused("/docs/resume.txt", rec().tokens, "ffffffffffffffffffffffffffffffff", key,
                   "another model");
    auto tokens = rec().tokens;
    tokens[5] += 1;
    expect_refused("/docs/resume.txt", tokens, fp, key, "tokens differ");
    expect_refused("/elsewhere/resume.txt", rec().tokens, fp, key, "a recording of");
    // A file that is not a recording is not overwritten either.
    write_bytes(path, {1, 2, 3});
    EXPECT_THROW(zoom_resume(path, "/docs/resume.txt", rec().tokens, fp, key), ZoomRecordError);
}

TEST(RecordingMemory, ForwardsAndRecordsTheKeptQueries) {
    AttentionShape shape{2, 1, 4, 0.5f, 0};
    auto inner = std::make_unique<FullMemory>(shape, 16);
    RecordingMemory m(std::move(inner), [](int32_t p) { return p % 2 == 1; });
    EXPECT_EQ(m.policy(), "full");
    std::vector<float> k(12), v(12), q(3 * 8), out(3 * 8);
    for (size_t i = 0; i < k.size(); ++i) {
        k[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
        v[i] = 0.5f * static_cast<float>(i % 3);
    }
    for (size_t i = 0; i < q.size(); ++i)
        q[i] = 0.125f * static_cast<float>(i % 7) - 0.25f;
    const int32_t pos[3] = {0, 1, 2};
    m.store(k.data(), v.data(), pos, 3);
    ThreadPool pool(1);
    m.attend(q.data(), pos, 3, out.data(), pool);
    ASSERT_EQ(m.recorded_positions(), (std::vector<int32_t>{1}));
    EXPECT_EQ(m.recorded_q(), std::vector<float>(q.begin() + 8, q.begin() + 16));
    EXPECT_EQ(m.recorded_out(), std::vector<float>(out.begin() + 8, out.begin() + 16));
    EXPECT_EQ(m.find_recorded(1), 0);
    EXPECT_EQ(m.find_recorded(2), -1);
    EXPECT_EQ(m.n_tokens(), 3);
    // Query 1 sees rows 0 and 1: out = softmax(0.5 q·k) v, worked here in double.
    for (int h = 0; h < 2; ++h) {
        double l[2];
        for (int j = 0; j < 2; ++j) {
            double dot = 0;
            for (int c = 0; c < 4; ++c)
                dot += q[static_cast<size_t>(8 + h * 4 + c)] * k[static_cast<size_t>(j * 4 + c)];
            l[j] = 0.5 * dot;
        }
        const double p0 = 1 / (1 + std::exp(l[1] - l[0])), p1 = 1 - p0;
        for (int c = 0; c < 4; ++c)
            EXPECT_NEAR(m.recorded_out()[static_cast<size_t>(h * 4 + c)],
                        p0 * v[static_cast<size_t>(c)] + p1 * v[static_cast<size_t>(4 + c)], 1e-6);
    }
    auto copy = m.clone();
    EXPECT_EQ(static_cast<RecordingMemory&>(*copy).recorded_positions().size(), 1u);
    m.clear();
    EXPECT_EQ(m.n_tokens(), 0);
    EXPECT_TRUE(m.recorded_positions().empty());
    EXPECT_EQ(copy->n_tokens(), 3);
    EXPECT_THROW(RecordingMemory(nullptr), std::invalid_argument);
}
