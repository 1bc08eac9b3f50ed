// The trained zoom-in's parameter file (issue 8): the file round-trips, every malformed file is
// refused with a message naming it, and the rank gate's maths equal a hand evaluation. What uses
// the file in a session is tested in test_trained_router.cpp.
#include "engine/sekv/router_params.h"
#include "router_params_refusal.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include "engine/gguf/gguf_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

// Two layers of small, distinct, random-valued parameters.
RouterParams sample_params() {
    RouterParams p;
    p.model_fingerprint = "0123456789abcdef0123456789abcdef";
    p.model_name = "some-model.gguf";
    p.provenance = {"/data/recordings (12 documents)", "spanscope-lab zoom-train --epochs 3",
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
        RouterLayerParams l;
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

// The file format written out by hand from its description (router_params.h, docs/sekv.md), with
// one thing spoiled on request, so that the reader is tested against the format and not
// against its own writer.
struct Spoil {
    uint32_t version = RouterParams::kVersion;
    std::string skip_tensor;    ///< not written
    std::string reshape_tensor; ///< written one row short
    std::string nan_tensor;     ///< its first value NaN
    int declared_n_head = 0;    ///< > 0: layer 3 declares this many heads
    bool reverse_layers = false;
    bool share_group_as_text = false; ///< spanscope.zoom.share_group a string, not a bool
    bool sketch_without_dim = false;  ///< the sketch written without its key sketch_dim
};
void write_by_hand(const RouterParams& p, const std::string& path, const Spoil& s = {}) {
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

void expect_equal(const RouterParams& a, const RouterParams& b) {
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

double sigmoid(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

} // namespace

TEST(RouterParams, SaveAndLoadRoundTripExactly) {
    const std::string dir = temp_dir();
    const auto p = sample_params();
    save_router_params(p, dir + "/p.zoom.gguf");
    const auto back = load_router_params(dir + "/p.zoom.gguf");
    expect_equal(back, p);
    // With the fingerprint it was trained for, too.
    expect_equal(load_router_params(dir + "/p.zoom.gguf", p.model_fingerprint), p);
    // The format as described, written by hand, reads the same (unknown keys and tensors are
    // skipped).
    write_by_hand(p, dir + "/hand.zoom.gguf");
    expect_equal(load_router_params(dir + "/hand.zoom.gguf"), p);
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
    save_router_params(united, dir + "/u.zoom.gguf");
    expect_equal(load_router_params(dir + "/u.zoom.gguf"), united);
    write_by_hand(united, dir + "/hand-u.zoom.gguf");
    EXPECT_TRUE(load_router_params(dir + "/hand-u.zoom.gguf").share_group);
    EXPECT_FALSE(back.share_group);
    EXPECT_NE(united.digest(), p.digest());
    EXPECT_EQ(united.rank_gate_digest(), p.rank_gate_digest());
    fs::remove_all(dir);
}

// Version 6: a layer may carry a sketch basis (span_sketch.h). It round-trips, changes the
// digest (it changes the relevance) but not the rank gates' digest, and a version-5 file, which
// has none, still loads; a version-5 file that declares one, or a sketch of the wrong shape, is
// refused.
TEST(RouterParams, TheSketchBasisRoundTripsAndVersion5FilesStillLoad) {
    const std::string dir = temp_dir();
    const auto plain = sample_params();
    auto p = plain;
    auto& l = p.layers[0]; // layer 3: 4 heads of dimension 8
    l.sketch_dim = 3;
    l.n_kv_head = 2;
    for (int i = 0; i < 2 * 3 * 8; ++i)
        l.sketch.push_back(0.125f * static_cast<float>(i % 7) - 0.25f);
    save_router_params(p, dir + "/s.zoom.gguf");
    expect_equal(load_router_params(dir + "/s.zoom.gguf"), p);
    write_by_hand(p, dir + "/hand-s.zoom.gguf");
    expect_equal(load_router_params(dir + "/hand-s.zoom.gguf"), p);
    EXPECT_NE(p.digest(), plain.digest());
    EXPECT_EQ(p.rank_gate_digest(), plain.rank_gate_digest());
    EXPECT_EQ(p.n_parameters(), plain.n_parameters()); // fitted, not trained

    Spoil v5;
    v5.version = 5;
    write_by_hand(plain, dir + "/v5.zoom.gguf", v5);
    expect_equal(load_router_params(dir + "/v5.zoom.gguf"), plain);
    write_by_hand(p, dir + "/v5-s.zoom.gguf", v5);
    expect_router_params_refused([&] { load_router_params(dir + "/v5-s.zoom.gguf"); },
                                 {"v5-s.zoom.gguf", "version-5", "sketch"});
    Spoil bad;
    bad.reshape_tensor = "zoom.3.sketch";
    write_by_hand(p, dir + "/bad-s.zoom.gguf", bad);
    expect_router_params_refused([&] { load_router_params(dir + "/bad-s.zoom.gguf"); },
                                 {"bad-s.zoom.gguf", "zoom.3.sketch"});
    Spoil no_dim;
    no_dim.sketch_without_dim = true;
    write_by_hand(p, dir + "/nodim-s.zoom.gguf", no_dim);
    expect_router_params_refused([&] { load_router_params(dir + "/nodim-s.zoom.gguf"); },
                                 {"nodim-s.zoom.gguf", "sketch_dim"});
    // In memory: a sketch whose size does not match, or a KV head count that does not divide
    // the heads, is refused before anything is written.
    auto q = p;
    q.layers[0].sketch.pop_back();
    EXPECT_THROW(save_router_params(q, dir + "/q.zoom.gguf"), std::invalid_argument);
    q = p;
    q.layers[0].n_kv_head = 3;
    q.layers[0].sketch.resize(3 * 3 * 8);
    EXPECT_THROW(save_router_params(q, dir + "/q.zoom.gguf"), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir + "/q.zoom.gguf"));
    // The router takes the basis as stored.
    const auto r = trained_router(p.layers[0]);
    EXPECT_EQ(r->sketch_dim, 3);
    EXPECT_EQ(r->sketch_basis, p.layers[0].sketch);
    fs::remove_all(dir);
}

TEST(RouterParams, SavingArraysThatDoNotMatchTheirShapeIsRefused) {
    const std::string dir = temp_dir();
    auto p = sample_params();
    p.layers[1].w.pop_back();
    EXPECT_THROW(save_router_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    p = sample_params();
    p.layers[0].gate.head_dim = 7;
    EXPECT_THROW(save_router_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    p = sample_params();
    std::swap(p.layers[0], p.layers[1]);
    EXPECT_THROW(save_router_params(p, dir + "/p.zoom.gguf"), std::invalid_argument);
    EXPECT_FALSE(fs::exists(dir + "/p.zoom.gguf"));
    fs::remove_all(dir);
}

TEST(RouterParams, EveryMalformedFileIsRefusedWithAMessageNamingIt) {
    const std::string dir = temp_dir();
    const auto p = sample_params();
    const std::string good = dir + "/good.zoom.gguf";
    save_router_params(p, good);

    // Truncated (the last 33 bytes hold at least 2 of data: the padding after the last
    // tensor, at 32-byte alignment, is at most 31).
    const std::string bytes = read_file(good);
    for (const size_t keep : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 33}) {
        SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(bytes.size()));
        const std::string cut = dir + "/cut.zoom.gguf";
        std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, keep);
        expect_router_params_refused([&] { load_router_params(cut); }, {cut});
    }
    expect_router_params_refused([&] { load_router_params(dir + "/missing.zoom.gguf"); },
                                 {dir + "/missing.zoom.gguf", "cannot be read"});

    // Not a zoom parameter file: a model.
    write_tiny_gemma3(dir + "/model.gguf", TinyGemma3Config{});
    expect_router_params_refused([&] { load_router_params(dir + "/model.gguf"); },
                                 {dir + "/model.gguf", "not a zoom parameter file"});

    const std::string bad = dir + "/bad.zoom.gguf";
    auto refused = [&](const Spoil& s, const std::vector<std::string>& needles) {
        write_by_hand(p, bad, s);
        auto all = needles;
        all.push_back(bad);
        expect_router_params_refused([&] { load_router_params(bad); }, all);
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
    expect_router_params_refused(
        [&] { load_router_params(good, "ffffffffffffffffffffffffffffffff", "mine.gguf"); },
        {good, p.model_fingerprint, "ffffffffffffffffffffffffffffffff", "some-model.gguf",
         "mine.gguf"});
    fs::remove_all(dir);
}

// The gate of docs/sekv.md on a tiny MLP, evaluated here by hand in double.
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
    RouterLayerParams l;
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
    RouterLayerParams l;
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
