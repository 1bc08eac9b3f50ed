// The trained zoom-in's parameter file and what uses it (issue 8): the file round-trips, every
// malformed file is refused with a message naming it, the rank gate's maths equal a hand
// evaluation, a tiny model routes as its thresholds say (θ → +∞: nothing expands; θ → −∞:
// everything, as expand_all), a file for another model or layers it does not cover are
// refused, and the router mode is chosen as documented (zoom_locator.h).
#include "memory_sekv.h"
#include "model.h"
#include "model_fingerprint.h"
#include "prompt.h"
#include "session.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_locator.h"
#include "zoom_params.h"
#include "zoom_test_util.h"

#include "gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

// Two layers of small, distinct, random-valued parameters.
ZoomParams sample_params() {
    ZoomParams p;
    p.model_fingerprint = "0123456789abcdef0123456789abcdef";
    p.model_name = "some-model.gguf";
    p.provenance = {"/data/recordings (12 documents)", "spanscope-cli zoom-train --epochs 3",
                    "abc1234", "2026-05-01T10:00:00Z"};
    std::mt19937 rng(7);
    std::normal_distribution<float> g(0.0f, 1.0f);
    auto fill = [&](size_t n) {
        std::vector<float> v(n);
        for (auto& x : v)
            x = g(rng);
        return v;
    };
    for (const auto& [il, n_head, head_dim, d_out, n_rank, n_hidden] :
         {std::tuple{3, 4, 8, 5, 6, 3}, std::tuple{7, 2, 4, 3, 4, 2}}) {
        ZoomLayerParams l;
        l.layer = il;
        l.n_head = n_head;
        l.head_dim = head_dim;
        l.d_out = d_out;
        l.w = fill(static_cast<size_t>(n_head * d_out * head_dim));
        l.theta = fill(static_cast<size_t>(n_head));
        l.gate.n_rank = n_rank;
        l.gate.head_dim = head_dim;
        l.gate.n_hidden = n_hidden;
        l.gate.w1 = fill(static_cast<size_t>(n_hidden * (n_rank + head_dim)));
        l.gate.b1 = fill(static_cast<size_t>(n_hidden));
        l.gate.w2 = fill(static_cast<size_t>(n_rank * n_hidden));
        l.gate.b2 = fill(static_cast<size_t>(n_rank));
        p.layers.push_back(std::move(l));
    }
    return p;
}

// The file format written out by hand from its description (zoom_params.h, DESIGN §3.4.5), with
// one thing spoiled on request, so that the reader is tested against the format and not
// against its own writer.
struct Spoil {
    uint32_t version = ZoomParams::kVersion;
    std::string skip_tensor;    ///< not written
    std::string reshape_tensor; ///< written one row short
    std::string nan_tensor;     ///< its first value NaN
    int declared_n_head = 0;    ///< > 0: layer 3 declares this many heads
    bool reverse_layers = false;
    bool share_group_as_text = false; ///< spanscope.zoom.share_group a string, not a bool
    bool sketch_without_dim = false;  ///< the sketch written without its key sketch_dim
};
void write_by_hand(const ZoomParams& p, const std::string& path, const Spoil& s = {}) {
    GgufWriter w;
    w.set_uint32("spanscope.zoom.version", s.version);
    w.set_string("spanscope.zoom.model_fingerprint", p.model_fingerprint);
    w.set_string("spanscope.zoom.model_name", p.model_name);
    w.set_string("spanscope.zoom.provenance.data", p.provenance.data);
    w.set_string("spanscope.zoom.provenance.command", p.provenance.command);
    w.set_string("spanscope.zoom.provenance.commit", p.provenance.commit);
    w.set_string("spanscope.zoom.provenance.created", p.provenance.created);
    if (s.share_group_as_text)
        w.set_string("spanscope.zoom.share_group", "yes");
    else if (p.share_group)
        w.set_bool("spanscope.zoom.share_group", true);
    std::vector<int32_t> ids;
    for (const auto& l : p.layers)
        ids.push_back(l.layer);
    if (s.reverse_layers)
        std::reverse(ids.begin(), ids.end());
    w.set_int32_array("spanscope.zoom.layers", ids);
    w.set_string("spanscope.zoom.some_future_key", "readers skip what they do not know");
    for (const auto& l : p.layers) {
        const std::string k = "spanscope.zoom." + std::to_string(l.layer) + ".";
        w.set_uint32(k + "n_head",
                     static_cast<uint32_t>(s.declared_n_head > 0 && l.layer == 3 ? s.declared_n_head
                                                                                 : l.n_head));
        w.set_uint32(k + "head_dim", static_cast<uint32_t>(l.head_dim));
        w.set_uint32(k + "d_out", static_cast<uint32_t>(l.d_out));
        w.set_uint32(k + "gate.n_rank", static_cast<uint32_t>(l.gate.n_rank));
        w.set_uint32(k + "gate.n_hidden", static_cast<uint32_t>(l.gate.n_hidden));
        const std::string t = "zoom." + std::to_string(l.layer) + ".";
        auto add = [&](const std::string& name, std::vector<int64_t> ne, std::vector<float> v) {
            if (name == s.skip_tensor)
                return;
            if (name == s.reshape_tensor) { // one row (or element) fewer
                ne.back() -= 1;
                int64_t n = 1;
                for (const auto e : ne)
                    n *= e;
                v.resize(static_cast<size_t>(n));
            }
            if (name == s.nan_tensor)
                v[0] = std::nanf("");
            w.add_tensor_f32(name, TensorType::F32, ne, v);
        };
        add(t + "w", {l.head_dim, l.d_out, l.n_head}, l.w);
        add(t + "theta", {l.n_head}, l.theta);
        add(t + "gate.w1", {l.gate.n_rank + l.head_dim, l.gate.n_hidden}, l.gate.w1);
        add(t + "gate.b1", {l.gate.n_hidden}, l.gate.b1);
        add(t + "gate.w2", {l.gate.n_hidden, l.gate.n_rank}, l.gate.w2);
        add(t + "gate.b2", {l.gate.n_rank}, l.gate.b2);
        if (l.sketch_dim > 0) {
            if (!s.sketch_without_dim)
                w.set_uint32(k + "sketch_dim", static_cast<uint32_t>(l.sketch_dim));
            w.set_uint32(k + "n_kv_head", static_cast<uint32_t>(l.n_kv_head));
            add(t + "sketch", {l.head_dim, l.sketch_dim, l.n_kv_head}, l.sketch);
        }
        w.add_tensor_f32("zoom.extra." + std::to_string(l.layer), TensorType::F32, {2}, {1, 2});
    }
    w.write(path);
}

void expect_equal(const ZoomParams& a, const ZoomParams& b) {
    EXPECT_EQ(a.model_fingerprint, b.model_fingerprint);
    EXPECT_EQ(a.model_name, b.model_name);
    EXPECT_EQ(a.provenance.data, b.provenance.data);
    EXPECT_EQ(a.provenance.command, b.provenance.command);
    EXPECT_EQ(a.provenance.commit, b.provenance.commit);
    EXPECT_EQ(a.provenance.created, b.provenance.created);
    EXPECT_EQ(a.share_group, b.share_group);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
        const auto &x = a.layers[i], &y = b.layers[i];
        EXPECT_EQ(x.layer, y.layer);
        EXPECT_EQ(x.n_head, y.n_head);
        EXPECT_EQ(x.head_dim, y.head_dim);
        EXPECT_EQ(x.d_out, y.d_out);
        EXPECT_EQ(x.w, y.w);
        EXPECT_EQ(x.theta, y.theta);
        EXPECT_EQ(x.gate.n_rank, y.gate.n_rank);
        EXPECT_EQ(x.gate.head_dim, y.gate.head_dim);
        EXPECT_EQ(x.gate.n_hidden, y.gate.n_hidden);
        EXPECT_EQ(x.gate.w1, y.gate.w1);
        EXPECT_EQ(x.gate.b1, y.gate.b1);
        EXPECT_EQ(x.gate.w2, y.gate.w2);
        EXPECT_EQ(x.gate.b2, y.gate.b2);
        EXPECT_EQ(x.sketch_dim, y.sketch_dim);
        EXPECT_EQ(x.n_kv_head, y.n_kv_head);
        EXPECT_EQ(x.sketch, y.sketch);
    }
}

// `f` throws ZoomParamsError whose message contains every needle.
template <class F> void expect_refused(F f, const std::vector<std::string>& needles) {
    try {
        f();
        ADD_FAILURE() << "not refused (expected: " << needles.front() << ")";
    } catch (const ZoomParamsError& e) {
        const std::string msg = e.what();
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
    }
}

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

} // namespace

TEST(ZoomParams, SaveAndLoadRoundTripExactly) {
    const std::string dir = temp_dir();
    const auto p = sample_params();
    save_zoom_params(p, dir + "/p.zoom.gguf");
    const auto back = load_zoom_params(dir + "/p.zoom.gguf");
    expect_equal(back, p);
    // With the fingerprint it was trained for, too.
    expect_equal(load_zoom_params(dir + "/p.zoom.gguf", p.model_fingerprint), p);
    // The format as described, written by hand, reads the same (unknown keys and tensors are
    // skipped).
    write_by_hand(p, dir + "/hand.zoom.gguf");
    expect_equal(load_zoom_params(dir + "/hand.zoom.gguf"), p);
    ASSERT_NE(back.find(7), nullptr);
    EXPECT_EQ(back.find(7)->n_head, 2);
    EXPECT_EQ(back.find(4), nullptr);
    // Layer 3: W 4·5·8 + θ 4 + gate (3·(6+8) + 3 + 6·3 + 6); layer 7: 2·3·4 + 2 + (2·8 + 2 + 4·2
    // + 4).
    EXPECT_EQ(back.n_parameters(), (160 + 4 + 42 + 3 + 18 + 6) + (24 + 2 + 16 + 2 + 8 + 4));
    // The digests follow the contents: the rank gates' only the gates.
    auto other = p;
    other.layers[0].theta[0] += 1;
    EXPECT_NE(other.digest(), p.digest());
    EXPECT_EQ(other.rank_gate_digest(), p.rank_gate_digest());
    other.layers[1].gate.b2[0] += 1;
    EXPECT_NE(other.rank_gate_digest(), p.rank_gate_digest());
    EXPECT_EQ(p.digest().size(), 16u);
    // Trained with the KV group's union (zoom-train --share-group): kept, and its thresholds
    // route otherwise, so the digest differs; the rank gates are the same.
    auto united = p;
    united.share_group = true;
    save_zoom_params(united, dir + "/u.zoom.gguf");
    expect_equal(load_zoom_params(dir + "/u.zoom.gguf"), united);
    write_by_hand(united, dir + "/hand-u.zoom.gguf");
    EXPECT_TRUE(load_zoom_params(dir + "/hand-u.zoom.gguf").share_group);
    EXPECT_FALSE(back.share_group);
    EXPECT_NE(united.digest(), p.digest());
    EXPECT_EQ(united.rank_gate_digest(), p.rank_gate_digest());
    fs::remove_all(dir);
}

// Version 6: a layer may carry a sketch basis (span_sketch.h). It round-trips, changes the
// digest (it changes the relevance) but not the rank gates' digest, and a version-5 file, which
// has none, still loads; a version-5 file that declares one, or a sketch of the wrong shape, is
// refused.
TEST(ZoomParams, TheSketchBasisRoundTripsAndVersion5FilesStillLoad) {
    const std::string dir = temp_dir();
    const auto plain = sample_params();
    auto p = plain;
    auto& l = p.layers[0]; // layer 3: 4 heads of dimension 8
    l.sketch_dim = 3;
    l.n_kv_head = 2;
    for (int i = 0; i < 2 * 3 * 8; ++i)
        l.sketch.push_back(0.125f * static_cast<float>(i % 7) - 0.25f);
    save_zoom_params(p, dir + "/s.zoom.gguf");
    expect_equal(load_zoom_params(dir + "/s.zoom.gguf"), p);
    write_by_hand(p, dir + "/hand-s.zoom.gguf");
    expect_equal(load_zoom_params(dir + "/hand-s.zoom.gguf"), p);
    EXPECT_NE(p.digest(), plain.digest());
    EXPECT_EQ(p.rank_gate_digest(), plain.rank_gate_digest());
    EXPECT_EQ(p.n_parameters(), plain.n_parameters()); // fitted, not trained

    Spoil v5;
    v5.version = 5;
    write_by_hand(plain, dir + "/v5.zoom.gguf", v5);
    expect_equal(load_zoom_params(dir + "/v5.zoom.gguf"), plain);
    write_by_hand(p, dir + "/v5-s.zoom.gguf", v5);
    expect_refused([&] { load_zoom_params(dir + "/v5-s.zoom.gguf"); },
                   {"v5-s.zoom.gguf", "version-5", "sketch"});
    Spoil bad;
    bad.reshape_tensor = "zoom.3.sketch";
    write_by_hand(p, dir + "/bad-s.zoom.gguf", bad);
    expect_refused([&] { load_zoom_params(dir + "/bad-s.zoom.gguf"); },
                   {"bad-s.zoom.gguf", "zoom.3.sketch"});
    Spoil no_dim;
    no_dim.sketch_without_dim = true;
    write_by_hand(p, dir + "/nodim-s.zoom.gguf", no_dim);
    expect_refused([&] { load_zoom_params(dir + "/nodim-s.zoom.gguf"); },
                   {"nodim-s.zoom.gguf", "sketch_dim"});
    // In memory: a sketch whose size does not match, or a KV head count that does not divide
    // the heads, is refused before anything is written.
    auto q = p;
    q.layers[0].sketch.pop_back();
    EXPECT_THROW(save_zoom_params(q, dir + "/q.zoom.gguf"), std::invalid_argument);
    q = p;
    q.layers[0].n_kv_head = 3;
    q.layers[0].sketch.resize(3 * 3 * 8);
    EXPECT_THROW(save_zoom_params(q, dir + "/q.zoom.gguf"), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir + "/q.zoom.gguf"));
    // The router takes the basis as stored.
    const auto r = trained_router(p.layers[0]);
    EXPECT_EQ(r->sketch_dim, 3);
    EXPECT_EQ(r->sketch_basis, p.layers[0].sketch);
    fs::remove_all(dir);
}

TEST(ZoomParams, SavingArraysThatDoNotMatchTheirShapeIsRefused) {
    const std::string dir = temp_dir();
    auto p = sample_params();
    p.layers[1].w.pop_back();
    EXPECT_THROW(save_zoom_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    p = sample_params();
    p.layers[0].gate.head_dim = 7;
    EXPECT_THROW(save_zoom_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    p = sample_params();
    std::swap(p.layers[0], p.layers[1]);
    EXPECT_THROW(save_zoom_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir + "/p.zoom.gguf"));
    fs::remove_all(dir);
}

TEST(ZoomParams, EveryMalformedFileIsRefusedWithAMessageNamingIt) {
    const std::string dir = temp_dir();
    const auto p = sample_params();
    const std::string good = dir + "/good.zoom.gguf";
    save_zoom_params(p, good);

    // Truncated (the last 33 bytes hold at least 2 of data: the padding after the last
    // tensor, at 32-byte alignment, is at most 31).
    const std::string bytes = read_file(good);
    for (const size_t keep : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 33}) {
        SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(bytes.size()));
        const std::string cut = dir + "/cut.zoom.gguf";
        std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, keep);
        expect_refused([&] { load_zoom_params(cut); }, {cut});
    }
    expect_refused([&] { load_zoom_params(dir + "/missing.zoom.gguf"); },
                   {dir + "/missing.zoom.gguf", "cannot be read"});

    // Not a zoom parameter file: a model.
    write_tiny_gemma3(dir + "/model.gguf", TinyGemma3Config{});
    expect_refused([&] { load_zoom_params(dir + "/model.gguf"); },
                   {dir + "/model.gguf", "not a zoom parameter file"});

    const std::string bad = dir + "/bad.zoom.gguf";
    auto refused = [&](const Spoil& s, const std::vector<std::string>& needles) {
        write_by_hand(p, bad, s);
        auto all = needles;
        all.push_back(bad);
        expect_refused([&] { load_zoom_params(bad); }, all);
    };
    Spoil s;
    s.version = 1; // the rank gate of version 1 read the rotated summary key
    refused(s, {"version 1", "versions 5 and 6"});
    s.version = 2; // version 2 normalised W k̄ in the relevance
    refused(s, {"version 2", "versions 5 and 6"});
    s.version = 3; // version 3's W stood for the whole score, not a correction to q·k̄
    refused(s, {"version 3", "versions 5 and 6"});
    s.version = 4; // version 4's gate counted outputs past the span's components
    refused(s, {"version 4", "versions 5 and 6"});
    s = {};
    s.reshape_tensor = "zoom.3.w";
    refused(s, {"zoom.3.w", "shape"});
    s = {};
    s.reshape_tensor = "zoom.7.gate.b2";
    refused(s, {"zoom.7.gate.b2", "shape"});
    s = {};
    s.declared_n_head = 5; // the tensors hold 4 heads
    refused(s, {"zoom.3.w", "shape"});
    s = {};
    s.skip_tensor = "zoom.7.theta";
    refused(s, {"missing tensor zoom.7.theta"});
    s = {};
    s.skip_tensor = "zoom.7.gate.w1";
    refused(s, {"missing tensor zoom.7.gate.w1"});
    s = {};
    s.nan_tensor = "zoom.3.gate.w2";
    refused(s, {"zoom.3.gate.w2", "not finite"});
    s = {};
    s.reverse_layers = true;
    refused(s, {"ascend"});
    s = {};
    s.share_group_as_text = true;
    refused(s, {"spanscope.zoom.share_group"});

    // Another model: both fingerprints and the model named.
    expect_refused([&] { load_zoom_params(good, "ffffffffffffffffffffffffffffffff", "mine.gguf"); },
                   {good, p.model_fingerprint, "ffffffffffffffffffffffffffffffff",
                    "some-model.gguf", "mine.gguf"});
    fs::remove_all(dir);
}

// The gate of DESIGN.md §3.4.9 on a tiny MLP, evaluated here by hand in double.
TEST(RankGate, InputForwardAndRankEqualAHandEvaluation) {
    RankGateMlp g;
    g.n_rank = 3;
    g.head_dim = 2;
    g.n_hidden = 2;
    g.w1 = {0.5f, -1.0f, 0.25f, 2.0f, -0.5f, -0.3f, 0.8f, 1.5f, -1.0f, 0.4f};
    g.b1 = {0.1f, -0.2f};
    g.w2 = {1.5f, -2.0f, -0.7f, 0.3f, 2.5f, 1.0f};
    g.b2 = {0.2f, -0.1f, -1.0f};
    // Spectrum {4, 1} (shorter than n_rank), Σ = 5; summary key (3, 4), ‖k̄‖ = 5.
    const std::vector<double> sigma2{4.0, 1.0};
    const float k[] = {3.0f, 4.0f};
    const double x[] = {std::sqrt(0.8), std::sqrt(0.2), 0.0, 0.6, 0.8};
    const auto xi = rank_gate_input(g, sigma2, k);
    ASSERT_EQ(xi.size(), 5u);
    for (int i = 0; i < 5; ++i)
        EXPECT_NEAR(xi[static_cast<size_t>(i)], x[i], 1e-7) << i;
    const double h0 =
        std::tanh(0.5 * x[0] - 1.0 * x[1] + 0.25 * x[2] + 2.0 * x[3] - 0.5 * x[4] + 0.1);
    const double h1 =
        std::tanh(-0.3 * x[0] + 0.8 * x[1] + 1.5 * x[2] - 1.0 * x[3] + 0.4 * x[4] - 0.2);
    const double m[] = {sigmoid(1.5 * h0 - 2.0 * h1 + 0.2), sigmoid(-0.7 * h0 + 0.3 * h1 - 0.1),
                        sigmoid(2.5 * h0 + 1.0 * h1 - 1.0)};
    std::vector<float> hidden;
    const auto mi = rank_gate_forward(g, xi.data(), &hidden);
    ASSERT_EQ(mi.size(), 3u);
    ASSERT_EQ(hidden.size(), 2u);
    EXPECT_NEAR(hidden[0], h0, 1e-6);
    EXPECT_NEAR(hidden[1], h1, 1e-6);
    int above = 0;
    for (int i = 0; i < 3; ++i) {
        EXPECT_NEAR(mi[static_cast<size_t>(i)], m[i], 1e-6) << i;
        above += m[i] > 0.5;
    }
    EXPECT_EQ(above, 2) << "the example is meant to keep the 1st and 3rd, not a prefix";
    EXPECT_EQ(rank_gate_rank(mi, 3), above);
    // The predictor SEKV uses gives the same rank.
    ZoomLayerParams l;
    l.layer = 0;
    l.n_head = 1;
    l.head_dim = 2;
    l.d_out = 1;
    l.w = {1, 0};
    l.theta = {0};
    l.gate = g;
    const auto pred = trained_rank_gate(l);
    // The spectrum has 2 components: the third output is not counted.
    const int above_available = (m[0] > 0.5) + (m[1] > 0.5);
    EXPECT_EQ(above_available, 1);
    EXPECT_EQ(pred->rank(sigma2, k, 2), above_available);
    // Three rows of dimension 2 have at most 2 components (the third singular value is 0, so the
    // gate's input and m are the ones above): the third output is not counted either.
    EXPECT_EQ(pred->rank({4.0, 1.0, 0.0}, k, 2), above_available);
    EXPECT_THROW(pred->rank(sigma2, k, 3), std::invalid_argument);

    // Edges: no energy, no key, negative rounding noise.
    const float zero[] = {0.0f, 0.0f};
    for (const float v : rank_gate_input(g, {0.0, 0.0}, zero))
        EXPECT_EQ(v, 0.0f);
    const auto neg = rank_gate_input(g, {2.0, -1e-12, 2.0, 4.0}, k);
    EXPECT_NEAR(neg[0], std::sqrt(0.25), 1e-7);
    EXPECT_EQ(neg[1], 0.0f);
    EXPECT_NEAR(neg[2], std::sqrt(0.25), 1e-7); // Σ over the whole spectrum (8), not n_rank
    EXPECT_EQ(rank_gate_rank({0.1f, 0.2f}, 2), 1);
    EXPECT_EQ(rank_gate_rank({0.5f, 0.2f}, 2), 1);
    EXPECT_EQ(rank_gate_rank({0.9f, 0.6f, 0.51f}, 3), 3);
    EXPECT_EQ(rank_gate_rank({}, 0), 1);
    // Only the span's available components count: the outputs past them are not reached by
    // training. A span with 2 components of a gate over 4.
    EXPECT_EQ(rank_gate_rank({0.2f, 0.9f, 0.9f, 0.9f}, 2), 1);
    EXPECT_EQ(rank_gate_rank({0.2f, 0.9f, 0.9f, 0.9f}, 4), 3);
    EXPECT_EQ(rank_gate_rank({0.9f, 0.9f}, 7), 2); // at most m.size()
    EXPECT_EQ(rank_gate_rank({0.9f, 0.9f}, -1), 1);
    // Arrays that do not match the sizes are refused.
    auto bad = g;
    bad.w1.pop_back();
    EXPECT_THROW(rank_gate_input(bad, sigma2, k), std::invalid_argument);
    EXPECT_THROW(rank_gate_forward(bad, xi.data()), std::invalid_argument);
}

TEST(RankGate, TrainedRouterThresholdIsTheSigmoidOfTheta) {
    ZoomLayerParams l;
    l.layer = 5;
    l.n_head = 3;
    l.head_dim = 2;
    l.d_out = 1;
    l.w = {1, 2, 3, 4, 5, 6};
    l.theta = {0.0f, 2.0f, 100.0f};
    l.gate = {1, 2, 1, {0, 0, 0}, {0}, {0}, {0}};
    const auto r = trained_router(l);
    EXPECT_EQ(r->d_out, 1);
    EXPECT_EQ(r->w, l.w);
    ASSERT_EQ(r->tau.size(), 3u);
    EXPECT_DOUBLE_EQ(r->tau[0], 0.5);
    EXPECT_NEAR(r->tau[1], 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
    EXPECT_EQ(r->tau[2], 1.0) << "no relevance exceeds it: nothing expands";
    l.theta.pop_back();
    EXPECT_THROW(trained_router(l), std::invalid_argument);
}

namespace {

// A tiny model's SEKV session over a document, then the question: the question's logits, and
// per SEKV layer its memory (spans and the last zoom).
struct Routed {
    std::vector<float> logits;
    std::vector<const SekvMemory*> layers;
    std::unique_ptr<Session> session;
};

class TrainedZoom : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        TinyGemma3Config cfg;
        cfg.n_ctx = 1024;
        write_tiny_gemma3(dir_ + "/tiny.gguf", cfg);
        model_ = Model::load(dir_ + "/tiny.gguf");
        auto toks = model_->tokenizer().encode(sample_prose(5, 1200));
        toks.insert(toks.begin(), model_->tokenizer().bos());
        toks.resize(600);
        doc_.assign(toks.begin(), toks.end() - 8);
        question_.assign(toks.end() - 8, toks.end());
        base_.threads = 2;
        base_.n_ctx = 640;
        base_.ubatch = 64;
        base_.global_policy = "sekv";
        base_.sekv.rank = {32, 1.0, nullptr};
        base_.sekv.budget = 0;
    }
    void TearDown() override { fs::remove_all(dir_); }

    Routed run(const SessionOptions& so) const {
        Routed r;
        r.session = std::make_unique<Session>(*model_, so);
        auto& s = *r.session;
        std::vector<float> surprisal(doc_.size());
        s.prefill(doc_, nullptr, {}, surprisal.data(), question_[0]);
        const auto info = s.seal_context(surprisal.data(), 0, static_cast<int64_t>(doc_.size()));
        EXPECT_GT(info.segmentation.spans.size(), 3u);
        r.logits = s.prefill(question_);
        for (const int il : s.memory().sealing_layers())
            r.layers.push_back(dynamic_cast<const SekvMemory*>(&s.memory().layer(il)));
        return r;
    }
    // learned_tau: decide with the file's thresholds (SekvRouterOptions::learned_tau), else τ
    // calibrated to the expand rate on the question.
    SessionOptions trained(const ZoomParams& p, bool learned_tau = true) const {
        auto so = base_;
        so.sekv.zoom = std::make_shared<const ZoomParams>(p);
        so.sekv.router.learned_tau = learned_tau;
        return so;
    }

    std::string dir_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> doc_, question_;
    SessionOptions base_;
};

} // namespace

TEST_F(TrainedZoom, VeryNegativeThresholdsExpandEverySpanAsExpandAll) {
    auto all = base_;
    all.sekv.router.expand_all = true;
    const auto ref = run(all);
    const auto r = run(trained(tiny_zoom_params(*model_, -100.0f, 32)));
    ASSERT_EQ(r.layers.size(), ref.layers.size());
    ASSERT_FALSE(r.layers.empty());
    EXPECT_EQ(r.logits, ref.logits) << "the same spans at the same ranks, all expanded";
    for (const auto* m : r.layers) {
        ASSERT_NE(m, nullptr);
        ASSERT_NE(m->options().router.trained, nullptr);
        for (const auto& z : *m->last_zoom())
            EXPECT_EQ(z.spans.size(), m->spans().size());
        EXPECT_EQ(m->tau(), std::vector<double>(m->tau().size(), 1.0 / (1.0 + std::exp(100.0))));
    }
}

TEST_F(TrainedZoom, VeryLargeThresholdsExpandNothing) {
    auto none = base_;
    none.sekv.router.expand_rate = 0.0; // τ: the largest relevance, so none exceeds it
    const auto ref = run(none);
    const auto r = run(trained(tiny_zoom_params(*model_, 100.0f, 32)));
    EXPECT_EQ(r.logits, ref.logits) << "every span by its summary row";
    for (const auto* m : r.layers)
        for (const auto& z : *m->last_zoom())
            EXPECT_TRUE(z.spans.empty());
    // And the opposite does differ from it (the test can fail).
    const auto all = run(trained(tiny_zoom_params(*model_, -100.0f, 32)));
    EXPECT_NE(all.logits, r.logits);
}

TEST_F(TrainedZoom, EachHeadFollowsItsOwnThresholdAndTheGateSetsTheRank) {
    auto p = tiny_zoom_params(*model_, 100.0f, 2);
    for (auto& l : p.layers)
        l.theta[0] = -100.0f; // head 0 expands everything
    auto alone = trained(p);
    alone.sekv.router.share_group = false; // each query head decides alone, as trained
    const auto r = run(alone);
    for (const auto* m : r.layers) {
        const auto& zoom = *m->last_zoom();
        ASSERT_EQ(zoom.size(), 4u);
        const auto n = m->spans().size();
        EXPECT_EQ(zoom[0].spans.size(), n);
        EXPECT_TRUE(zoom[1].spans.empty()) << "head 0's choice is not shared";
        EXPECT_TRUE(zoom[2].spans.empty());
        EXPECT_TRUE(zoom[3].spans.empty());
        for (const auto& s : m->spans())
            for (size_t g = 0; g < s.k.size(); ++g) {
                EXPECT_EQ(s.k[g].rank, 2);
                EXPECT_EQ(s.v[g].rank, 2);
            }
    }
    // By default a KV group's heads expand the union of their choices (as the training-free
    // router): head 0's whole group zooms into every span, the other groups into none.
    const auto u = run(trained(p));
    const int group = model_->info().n_head / model_->info().n_head_kv;
    ASSERT_GE(group, 2) << "the union needs a KV group of several heads";
    for (const auto* m : u.layers) {
        const auto& zoom = *m->last_zoom();
        for (int h = 0; h < 4; ++h)
            EXPECT_EQ(zoom[static_cast<size_t>(h)].spans.size(), h < group ? m->spans().size() : 0u)
                << "head " << h;
    }
    // The training-free energy gate at energy 1 keeps more: the trained gate decided.
    const auto free = run(base_);
    EXPECT_GT(free.layers.front()->spans().front().k[0].rank, 2);
}

// Without learned_tau (the default) the trained router's τ is calibrated to the expand rate on
// the question with its own relevance: the learned thresholds are not read.
TEST_F(TrainedZoom, WithoutLearnedThresholdsTauIsCalibratedToTheExpandRate) {
    for (const double rate : {0.0, 1.0}) {
        // Learned thresholds at both extremes (θ = -100: everything, θ = 100: nothing) give the
        // same τ and the same decisions, those of the rate.
        std::vector<std::vector<double>> taus;
        std::vector<std::vector<size_t>> expanded;
        for (const float theta : {-100.0f, 100.0f}) {
            auto so = trained(tiny_zoom_params(*model_, theta, 32), false);
            so.sekv.router.expand_rate = rate;
            so.sekv.router.share_group = false;
            const auto r = run(so);
            std::vector<double> tau;
            std::vector<size_t> n_expanded;
            for (const auto* m : r.layers) {
                ASSERT_NE(m->options().router.trained, nullptr);
                const auto n = m->spans().size();
                for (const auto& z : *m->last_zoom()) {
                    EXPECT_EQ(z.spans.size(), rate == 0.0 ? 0u : n) << "θ " << theta;
                    n_expanded.push_back(z.spans.size());
                }
                tau.insert(tau.end(), m->tau().begin(), m->tau().end());
            }
            ASSERT_FALSE(tau.empty());
            taus.push_back(tau);
            expanded.push_back(n_expanded);
        }
        EXPECT_EQ(taus[0], taus[1]) << "τ does not depend on the learned thresholds";
        EXPECT_EQ(expanded[0], expanded[1]);
    }
    // And with learned_tau the thresholds are read: σ(θ) per head (θ = 2, far from both ends).
    const auto learned = run(trained(tiny_zoom_params(*model_, 2.0f, 32), true));
    for (const auto* m : learned.layers)
        for (const double t : m->tau())
            EXPECT_DOUBLE_EQ(t, 1.0 / (1.0 + std::exp(-2.0)));
}

TEST_F(TrainedZoom, LayersTheFileDoesNotCoverOrAnotherShapeAreRefused) {
    const auto p = tiny_zoom_params(*model_, 0.0f, 32);
    ASSERT_GE(p.layers.size(), 2u);
    auto missing = p;
    const int last = missing.layers.back().layer;
    missing.layers.pop_back();
    SekvOptions so;
    so.zoom = std::make_shared<const ZoomParams>(missing);
    try {
        make_memory(model_->info(), 64, 64, "sekv", &so);
        ADD_FAILURE() << "a layer without parameters was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("SEKV layer " + std::to_string(last)),
                  std::string::npos)
            << e.what();
    }
    auto shape = p;
    auto& l = shape.layers.front();
    l.n_head = 2;
    l.w.resize(static_cast<size_t>(2 * l.d_out * l.head_dim));
    l.theta.resize(2);
    so.zoom = std::make_shared<const ZoomParams>(shape);
    try {
        make_memory(model_->info(), 64, 64, "sekv", &so);
        ADD_FAILURE() << "parameters for another shape were accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("SEKV layer " + std::to_string(l.layer)),
                  std::string::npos);
        EXPECT_NE(std::string(e.what()).find("2 query heads"), std::string::npos) << e.what();
    }
    // chunk_summary neither routes nor keeps factors: the parameters do not concern it.
    EXPECT_NO_THROW(make_memory(model_->info(), 64, 64, "chunk_summary", &so));
    so.zoom = std::make_shared<const ZoomParams>(p);
    EXPECT_NO_THROW(make_memory(model_->info(), 64, 64, "sekv", &so));
}

TEST_F(TrainedZoom, AFileForAnotherModelIsRefused) {
    TinyGemma3Config other_cfg;
    other_cfg.n_ctx = 1024;
    other_cfg.seed = 2;
    write_tiny_gemma3(dir_ + "/other.gguf", other_cfg);
    const auto other = Model::load(dir_ + "/other.gguf");
    const std::string mine = fingerprint_hex(model_fingerprint(*model_));
    const std::string theirs = fingerprint_hex(model_fingerprint(*other));
    ASSERT_NE(mine, theirs);
    const std::string file = dir_ + "/other.zoom.gguf";
    save_zoom_params(tiny_zoom_params(*other, 0.0f, 32), file);
    expect_refused([&] { load_zoom_params(file, mine, "tiny.gguf"); },
                   {file, mine, theirs, "other.gguf", "tiny.gguf"});
    // Chosen explicitly, in any mode but training-free: refused, never ignored.
    expect_refused([&] { choose_router("", file, model_->path(), mine); }, {file, theirs});
    expect_refused([&] { choose_router(kRouterTrained, file, model_->path(), mine); }, {file});
    EXPECT_THROW(choose_router(kRouterTrainingFree, file, model_->path(), mine),
                 std::invalid_argument);
    // Its own model takes it.
    const auto c = choose_router("", file, other->path(), theirs);
    EXPECT_EQ(c.mode, kRouterTrained);
    EXPECT_EQ(c.params->model_fingerprint, theirs);
}

TEST_F(TrainedZoom, TheDefaultIsTrainedWhenAFileForTheModelIsInstalled) {
    ScopedEnv home("XDG_DATA_HOME", dir_ + "/xdg");
    ScopedEnv dirs("XDG_DATA_DIRS", dir_ + "/none");
    const std::string fp = fingerprint_hex(model_fingerprint(*model_));
    EXPECT_EQ(zoom_file_name("/a/b/gemma-3-270m-q4_k_m.gguf"), "gemma-3-270m-q4_k_m.zoom.gguf");
    EXPECT_EQ(zoom_file_name("weights.bin"), "weights.bin.zoom.gguf");
    const auto paths = zoom_search_paths(model_->path());
    ASSERT_GE(paths.size(), 2u);
    const std::string installed = dir_ + "/xdg/spanscope/zoom/tiny.zoom.gguf";
    EXPECT_EQ(paths[0], installed);
    EXPECT_EQ(paths[1], dir_ + "/none/spanscope/zoom/tiny.zoom.gguf");

    // None installed: training-free by default; trained asked for is an error naming where it
    // looked.
    auto c = choose_router("", "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    EXPECT_EQ(c.params, nullptr);
    EXPECT_TRUE(c.notes.empty());
    expect_refused([&] { choose_router(kRouterTrained, "", model_->path(), fp); },
                   {"none was found", installed});
    EXPECT_THROW(choose_router("fancy", "", model_->path(), fp), std::invalid_argument);

    // One for another model installed under this model's name: passed over with a note.
    fs::create_directories(dir_ + "/xdg/spanscope/zoom");
    auto foreign = tiny_zoom_params(*model_, 0.0f, 32);
    foreign.model_fingerprint = "00000000000000000000000000000000";
    save_zoom_params(foreign, installed);
    c = choose_router("", "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    ASSERT_EQ(c.notes.size(), 1u);
    EXPECT_NE(c.notes[0].find(installed), std::string::npos) << c.notes[0];
    expect_refused([&] { choose_router(kRouterTrained, "", model_->path(), fp); },
                   {"none was found", "00000000000000000000000000000000"});

    // The model's own: trained by default, and when asked for; training-free when asked for.
    const auto own = tiny_zoom_params(*model_, 0.0f, 32);
    save_zoom_params(own, installed);
    for (const std::string mode : {"", "trained"}) {
        c = choose_router(mode, "", model_->path(), fp);
        EXPECT_EQ(c.mode, kRouterTrained);
        EXPECT_EQ(c.path, installed);
        ASSERT_NE(c.params, nullptr);
        EXPECT_EQ(c.params->digest(), own.digest());
    }
    c = choose_router(kRouterTrainingFree, "", model_->path(), fp);
    EXPECT_EQ(c.mode, kRouterTrainingFree);
    EXPECT_EQ(c.params, nullptr);
}

TEST_F(TrainedZoom, AnswersNameTheirRouter) {
    Session s(*model_, trained(tiny_zoom_params(*model_, 0.0f, 32)));
    s.prefill(doc_);
    const auto a = s.answer_after_context(question_, PromptStyle::Completion, 2, SamplingParams{});
    EXPECT_EQ(a.stats.router, "trained");
    Session f(*model_, base_);
    f.prefill(doc_);
    EXPECT_EQ(f.answer_after_context(question_, PromptStyle::Completion, 2, SamplingParams{})
                  .stats.router,
              "training-free");
    SessionOptions full = base_;
    full.global_policy = "full";
    Session g(*model_, full);
    g.prefill(doc_);
    EXPECT_EQ(g.answer_after_context(question_, PromptStyle::Completion, 2, SamplingParams{})
                  .stats.router,
              "");
}
