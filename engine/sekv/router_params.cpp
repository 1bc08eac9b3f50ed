#include "engine/sekv/router_params.h"

#include "engine/text/content_hash.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/sekv/sekv_routing.h" // TrainedRouterLayer
#include "engine/sekv/sekv_spans.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace spanscope {

namespace {

constexpr const char* kPrefix = "spanscope.zoom.";

// Limits on every size a file declares: far above any model we run, low enough that products
// of them fit in 64 bits and a corrupt size cannot ask for terabytes.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxLayer = 1 << 16;

std::string layer_key(int il, const char* what) {
    return std::string(kPrefix) + std::to_string(il) + "." + what;
}
std::string tensor_name(int il, const char* what) {
    return "zoom." + std::to_string(il) + "." + what;
}

void check_size(const std::string& where, const char* what, size_t got, int64_t want) {
    if (static_cast<int64_t>(got) != want)
        throw std::invalid_argument(where + ": " + what + " holds " + std::to_string(got) +
                                    " values, its shape gives " + std::to_string(want));
}

void check_gate(const RankGateMlp& g, const std::string& where) {
    if (g.n_rank < 1 || g.head_dim < 1 || g.n_hidden < 1 || g.n_rank > kMaxDim ||
        g.head_dim > kMaxDim || g.n_hidden > kMaxDim)
        throw std::invalid_argument(
            where + ": rank gate sizes out of range (n_rank " + std::to_string(g.n_rank) +
            ", head_dim " + std::to_string(g.head_dim) + ", n_hidden " +
            std::to_string(g.n_hidden) + "; each 1.." + std::to_string(kMaxDim) + ")");
    check_size(where, "gate.w1", g.w1.size(), int64_t{g.n_hidden} * g.n_in());
    check_size(where, "gate.b1", g.b1.size(), g.n_hidden);
    check_size(where, "gate.w2", g.w2.size(), int64_t{g.n_rank} * g.n_hidden);
    check_size(where, "gate.b2", g.b2.size(), g.n_rank);
}

void check_layer(const RouterLayerParams& l) {
    const std::string where = "zoom parameters of layer " + std::to_string(l.layer);
    if (l.layer < 0 || l.layer > kMaxLayer || l.n_head < 1 || l.head_dim < 1 || l.d_out < 1 ||
        l.n_head > kMaxDim || l.head_dim > kMaxDim || l.d_out > kMaxDim)
        throw std::invalid_argument(
            where + ": sizes out of range (layer " + std::to_string(l.layer) + ", n_head " +
            std::to_string(l.n_head) + ", head_dim " + std::to_string(l.head_dim) + ", d_out " +
            std::to_string(l.d_out) + ")");
    check_size(where, "w", l.w.size(), int64_t{l.n_head} * l.d_out * l.head_dim);
    check_size(where, "theta", l.theta.size(), l.n_head);
    if (l.gate.head_dim != l.head_dim)
        throw std::invalid_argument(where + ": the rank gate's head_dim " +
                                    std::to_string(l.gate.head_dim) + " differs from the layer's " +
                                    std::to_string(l.head_dim));
    check_gate(l.gate, where);
    if (l.sketch_dim == 0) {
        if (l.n_kv_head != 0 || !l.sketch.empty())
            throw std::invalid_argument(where + ": a sketch without its dimension");
        return;
    }
    if (l.sketch_dim < 0 || l.sketch_dim > l.head_dim || l.n_kv_head < 1 ||
        l.n_kv_head > l.n_head || l.n_head % l.n_kv_head != 0)
        throw std::invalid_argument(where + ": sketch sizes out of range (sketch_dim " +
                                    std::to_string(l.sketch_dim) + ", 1..head_dim; n_kv_head " +
                                    std::to_string(l.n_kv_head) + ", a divisor of n_head)");
    check_size(where, "sketch", l.sketch.size(), int64_t{l.n_kv_head} * l.sketch_dim * l.head_dim);
}

// The format version the digests hash: version 6 only adds the optional sketch, which they
// cover when present, so files without one keep their version-5 digests (and the project's
// spans keyed by rank_gate_digest stay valid).
constexpr int64_t kDigestVersion = 5;

void hash_gate(ContentHash& f, const RankGateMlp& g) {
    f.i64(g.n_rank);
    f.i64(g.head_dim);
    f.i64(g.n_hidden);
    f.floats(g.w1);
    f.floats(g.b1);
    f.floats(g.w2);
    f.floats(g.b2);
}

class TrainedRankGate final : public RankGatePredictor {
public:
    explicit TrainedRankGate(RankGateMlp g) : g_(std::move(g)) {}
    int rank(const std::vector<double>& sigma2, const float* summary_k,
             int64_t dim) const override {
        if (!summary_k || dim != g_.head_dim)
            throw std::invalid_argument("trained rank gate: a summary key of dimension " +
                                        std::to_string(dim) + ", the gate takes " +
                                        std::to_string(g_.head_dim));
        const auto x = rank_gate_input(g_, sigma2, summary_k);
        // The components the span's factors have, as training counts them: at most the gate's
        // outputs, the spectrum's length (the span's rows) and the key's dimension.
        const int available =
            std::min({g_.n_rank, static_cast<int>(sigma2.size()), static_cast<int>(dim)});
        return rank_gate_rank(rank_gate_forward(g_, x.data()), available);
    }

private:
    RankGateMlp g_;
};

// Reading: every failure becomes a RouterParamsError naming the file.
struct Reader {
    const GgufFile& f;
    const std::string& path;

    [[noreturn]] void fail(const std::string& what) const {
        throw RouterParamsError(path + ": " + what);
    }
    int64_t integer(const std::string& key, int64_t lo, int64_t hi) const {
        if (!f.has(key))
            fail("missing key " + key);
        int64_t v = 0;
        try {
            v = f.get_int(key);
        } catch (const GgufError& e) {
            fail(e.what());
        }
        if (v < lo || v > hi)
            fail(key + " = " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                 std::to_string(hi));
        return v;
    }
    std::string text(const std::string& key, bool required) const {
        if (!f.has(key)) {
            if (required)
                fail("missing key " + key);
            return {};
        }
        try {
            return f.get_string(key);
        } catch (const GgufError& e) {
            fail(e.what());
        }
    }
    // The tensor `name`: f32, of exactly the dims ne (innermost first), every value finite.
    std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& ne) const {
        const auto* t = f.find_tensor(name);
        if (!t)
            fail("missing tensor " + name);
        if (t->type != TensorType::F32)
            fail("tensor " + name + " is not f32");
        if (t->ne != ne) {
            std::string got, want;
            for (const auto n : t->ne)
                got += (got.empty() ? "" : "×") + std::to_string(n);
            for (const auto n : ne)
                want += (want.empty() ? "" : "×") + std::to_string(n);
            fail("tensor " + name + " has shape " + got + ", the sizes declared give " + want);
        }
        std::vector<float> v(static_cast<size_t>(t->n_elements()));
        if (v.size() * sizeof(float) != t->nbytes)
            fail("tensor " + name + " has " + std::to_string(t->nbytes) + " bytes, expected " +
                 std::to_string(v.size() * sizeof(float)));
        std::memcpy(v.data(), t->data, t->nbytes);
        for (size_t i = 0; i < v.size(); ++i)
            if (!std::isfinite(v[i]))
                fail("tensor " + name + " holds a value that is not finite (element " +
                     std::to_string(i) + ")");
        return v;
    }
};

} // namespace

const RouterLayerParams* RouterParams::find(int il) const {
    for (const auto& l : layers)
        if (l.layer == il)
            return &l;
    return nullptr;
}

int64_t RouterParams::n_parameters() const {
    int64_t n = 0;
    for (const auto& l : layers)
        n += static_cast<int64_t>(l.w.size() + l.theta.size() + l.gate.w1.size() +
                                  l.gate.b1.size() + l.gate.w2.size() + l.gate.b2.size());
    return n;
}

std::string RouterParams::rank_gate_digest() const {
    ContentHash f;
    f.i64(kDigestVersion); // the gate's input is part of what the spans were built with
    for (const auto& l : layers) {
        f.i64(l.layer);
        hash_gate(f, l.gate);
    }
    return f.hex();
}

std::string RouterParams::digest() const {
    ContentHash f;
    f.i64(kDigestVersion); // the relevance's form: the same W means another score in another
                           // version
    f.bytes(model_fingerprint.data(), model_fingerprint.size());
    if (share_group) // only then, so that the digests of earlier files stay
        f.i64(-1);
    for (const auto& l : layers) {
        f.i64(l.layer);
        f.i64(l.n_head);
        f.i64(l.head_dim);
        f.i64(l.d_out);
        f.floats(l.w);
        f.floats(l.theta);
        hash_gate(f, l.gate);
        if (l.sketch_dim > 0) {
            f.i64(l.sketch_dim);
            f.i64(l.n_kv_head);
            f.floats(l.sketch);
        }
    }
    return f.hex();
}

void check_router_params(const RouterParams& p) {
    if (p.layers.empty())
        throw std::invalid_argument("zoom parameters: no layer (a router trained for no SEKV "
                                    "layer serves none)");
    for (size_t i = 0; i < p.layers.size(); ++i) {
        check_layer(p.layers[i]);
        if (i > 0 && p.layers[i].layer <= p.layers[i - 1].layer)
            throw std::invalid_argument(
                "zoom parameters: layer " + std::to_string(p.layers[i].layer) + " follows layer " +
                std::to_string(p.layers[i - 1].layer) + " (layers must ascend, each once)");
    }
}

void save_router_params(const RouterParams& p, const std::string& path) {
    check_router_params(p);
    GgufWriter w;
    const std::string k = kPrefix;
    w.set_uint32(k + "version", RouterParams::kVersion);
    w.set_string(k + "model_fingerprint", p.model_fingerprint);
    w.set_string(k + "model_name", p.model_name);
    w.set_string(k + "provenance.data", p.provenance.data);
    w.set_string(k + "provenance.command", p.provenance.command);
    w.set_string(k + "provenance.commit", p.provenance.commit);
    w.set_string(k + "provenance.created", p.provenance.created);
    if (p.share_group)
        w.set_bool(k + "share_group", true);
    std::vector<int32_t> ids;
    for (const auto& l : p.layers)
        ids.push_back(l.layer);
    w.set_int32_array(k + "layers", ids);
    for (const auto& l : p.layers) {
        const int il = l.layer;
        w.set_uint32(layer_key(il, "n_head"), static_cast<uint32_t>(l.n_head));
        w.set_uint32(layer_key(il, "head_dim"), static_cast<uint32_t>(l.head_dim));
        w.set_uint32(layer_key(il, "d_out"), static_cast<uint32_t>(l.d_out));
        w.set_uint32(layer_key(il, "gate.n_rank"), static_cast<uint32_t>(l.gate.n_rank));
        w.set_uint32(layer_key(il, "gate.n_hidden"), static_cast<uint32_t>(l.gate.n_hidden));
        // ggml order: ne[0] innermost.
        w.add_tensor_f32(tensor_name(il, "w"), TensorType::F32, {l.head_dim, l.d_out, l.n_head},
                         l.w);
        w.add_tensor_f32(tensor_name(il, "theta"), TensorType::F32, {l.n_head}, l.theta);
        w.add_tensor_f32(tensor_name(il, "gate.w1"), TensorType::F32,
                         {l.gate.n_in(), l.gate.n_hidden}, l.gate.w1);
        w.add_tensor_f32(tensor_name(il, "gate.b1"), TensorType::F32, {l.gate.n_hidden}, l.gate.b1);
        w.add_tensor_f32(tensor_name(il, "gate.w2"), TensorType::F32,
                         {l.gate.n_hidden, l.gate.n_rank}, l.gate.w2);
        w.add_tensor_f32(tensor_name(il, "gate.b2"), TensorType::F32, {l.gate.n_rank}, l.gate.b2);
        if (l.sketch_dim > 0) {
            w.set_uint32(layer_key(il, "sketch_dim"), static_cast<uint32_t>(l.sketch_dim));
            w.set_uint32(layer_key(il, "n_kv_head"), static_cast<uint32_t>(l.n_kv_head));
            w.add_tensor_f32(tensor_name(il, "sketch"), TensorType::F32,
                             {l.head_dim, l.sketch_dim, l.n_kv_head}, l.sketch);
        }
    }
    w.write(path);
}

RouterParams load_router_params(const std::string& path, const std::string& expected_fingerprint,
                                const std::string& expected_model) {
    std::unique_ptr<GgufFile> file;
    try {
        file = GgufFile::open(path);
    } catch (const GgufError& e) {
        throw RouterParamsError(path + ": not a valid GGUF file (" + e.what() + ")");
    } catch (const std::system_error& e) {
        throw RouterParamsError(path + ": cannot be read (" + e.what() + ")");
    }
    const Reader r{*file, path};
    const std::string k = kPrefix;
    if (!file->has(k + "version"))
        r.fail("not a zoom parameter file (no key " + k + "version)");
    const int64_t version = r.integer(k + "version", 0, INT32_MAX);
    if (version != RouterParams::kVersion && version != 5)
        r.fail("zoom parameter file version " + std::to_string(version) +
               "; this build reads versions 5 and " + std::to_string(RouterParams::kVersion));
    RouterParams p;
    p.model_fingerprint = r.text(k + "model_fingerprint", true);
    p.model_name = r.text(k + "model_name", false);
    if (!expected_fingerprint.empty() && p.model_fingerprint != expected_fingerprint)
        r.fail("trained for the model " + (p.model_name.empty() ? "(unnamed)" : p.model_name) +
               " (fingerprint " + p.model_fingerprint + "), not for " +
               (expected_model.empty() ? "the model loaded" : "the model " + expected_model) +
               " (fingerprint " + expected_fingerprint + ")");
    p.provenance.data = r.text(k + "provenance.data", false);
    p.provenance.command = r.text(k + "provenance.command", false);
    p.provenance.commit = r.text(k + "provenance.commit", false);
    p.provenance.created = r.text(k + "provenance.created", false);
    if (file->has(k + "share_group")) {
        try {
            p.share_group = file->get_bool(k + "share_group");
        } catch (const GgufError& e) {
            r.fail(e.what());
        }
    }
    if (!file->has(k + "layers"))
        r.fail("missing key " + k + "layers");
    std::vector<int64_t> ids;
    try {
        ids = file->get_int_array(k + "layers");
    } catch (const GgufError& e) {
        r.fail(e.what());
    }
    for (const auto il64 : ids) {
        if (il64 < 0 || il64 > kMaxLayer)
            r.fail("layer index " + std::to_string(il64) + " is outside 0.." +
                   std::to_string(kMaxLayer));
        const int il = static_cast<int>(il64);
        if (!p.layers.empty() && il <= p.layers.back().layer)
            r.fail("layer " + std::to_string(il) + " follows layer " +
                   std::to_string(p.layers.back().layer) + " (layers must ascend, each once)");
        RouterLayerParams l;
        l.layer = il;
        l.n_head = static_cast<int>(r.integer(layer_key(il, "n_head"), 1, kMaxDim));
        l.head_dim = static_cast<int>(r.integer(layer_key(il, "head_dim"), 1, kMaxDim));
        l.d_out = static_cast<int>(r.integer(layer_key(il, "d_out"), 1, kMaxDim));
        l.gate.n_rank = static_cast<int>(r.integer(layer_key(il, "gate.n_rank"), 1, kMaxDim));
        l.gate.n_hidden = static_cast<int>(r.integer(layer_key(il, "gate.n_hidden"), 1, kMaxDim));
        l.gate.head_dim = l.head_dim;
        l.w = r.tensor(tensor_name(il, "w"), {l.head_dim, l.d_out, l.n_head});
        l.theta = r.tensor(tensor_name(il, "theta"), {l.n_head});
        l.gate.w1 = r.tensor(tensor_name(il, "gate.w1"), {l.gate.n_in(), l.gate.n_hidden});
        l.gate.b1 = r.tensor(tensor_name(il, "gate.b1"), {l.gate.n_hidden});
        l.gate.w2 = r.tensor(tensor_name(il, "gate.w2"), {l.gate.n_hidden, l.gate.n_rank});
        l.gate.b2 = r.tensor(tensor_name(il, "gate.b2"), {l.gate.n_rank});
        if (!file->has(layer_key(il, "sketch_dim")) &&
            (file->has(layer_key(il, "n_kv_head")) || file->find_tensor(tensor_name(il, "sketch"))))
            r.fail("layer " + std::to_string(il) + " holds a sketch basis without its key " +
                   layer_key(il, "sketch_dim"));
        if (file->has(layer_key(il, "sketch_dim"))) {
            if (version < 6)
                r.fail("a version-" + std::to_string(version) +
                       " file with a sketch basis (sketches came with version 6)");
            l.sketch_dim = static_cast<int>(r.integer(layer_key(il, "sketch_dim"), 1, l.head_dim));
            l.n_kv_head = static_cast<int>(r.integer(layer_key(il, "n_kv_head"), 1, l.n_head));
            l.sketch = r.tensor(tensor_name(il, "sketch"), {l.head_dim, l.sketch_dim, l.n_kv_head});
        }
        p.layers.push_back(std::move(l));
    }
    try {
        check_router_params(p); // what the reads above have not (a belt to their braces)
    } catch (const std::invalid_argument& e) {
        r.fail(e.what());
    }
    return p;
}

std::vector<float> rank_gate_input(const RankGateMlp& g, const std::vector<double>& sigma2,
                                   const float* summary_k) {
    check_gate(g, "rank gate");
    std::vector<float> x(static_cast<size_t>(g.n_in()), 0.0f);
    double total = 0;
    for (const double s : sigma2)
        total += std::max(0.0, s);
    if (total > 0)
        for (int i = 0; i < g.n_rank && i < static_cast<int>(sigma2.size()); ++i)
            x[static_cast<size_t>(i)] = static_cast<float>(
                std::sqrt(std::max(0.0, sigma2[static_cast<size_t>(i)]) / total));
    double norm2 = 0;
    for (int j = 0; j < g.head_dim; ++j)
        norm2 += static_cast<double>(summary_k[j]) * summary_k[j];
    if (norm2 > 0) {
        const double inv = 1.0 / std::sqrt(norm2);
        for (int j = 0; j < g.head_dim; ++j)
            x[static_cast<size_t>(g.n_rank + j)] = static_cast<float>(summary_k[j] * inv);
    }
    return x;
}

std::vector<float> rank_gate_forward(const RankGateMlp& g, const float* x,
                                     std::vector<float>* hidden) {
    check_gate(g, "rank gate");
    const int n_in = g.n_in();
    std::vector<float> h(static_cast<size_t>(g.n_hidden));
    for (int o = 0; o < g.n_hidden; ++o) {
        double acc = g.b1[static_cast<size_t>(o)];
        const float* row = g.w1.data() + static_cast<size_t>(o) * n_in;
        for (int i = 0; i < n_in; ++i)
            acc += static_cast<double>(row[i]) * x[i];
        h[static_cast<size_t>(o)] = static_cast<float>(std::tanh(acc));
    }
    std::vector<float> m(static_cast<size_t>(g.n_rank));
    for (int o = 0; o < g.n_rank; ++o) {
        double acc = g.b2[static_cast<size_t>(o)];
        const float* row = g.w2.data() + static_cast<size_t>(o) * g.n_hidden;
        for (int i = 0; i < g.n_hidden; ++i)
            acc += static_cast<double>(row[i]) * h[static_cast<size_t>(i)];
        m[static_cast<size_t>(o)] = static_cast<float>(1.0 / (1.0 + std::exp(-acc)));
    }
    if (hidden)
        *hidden = std::move(h);
    return m;
}

int rank_gate_rank(const std::vector<float>& m, int n_available) {
    const int n = std::clamp(n_available, 0, static_cast<int>(m.size()));
    int kept = 0;
    for (int i = 0; i < n; ++i)
        kept += m[static_cast<size_t>(i)] > 0.5f ? 1 : 0;
    return std::max(1, kept);
}

std::shared_ptr<const TrainedRouterLayer> trained_router(const RouterLayerParams& layer) {
    check_layer(layer);
    auto r = std::make_shared<TrainedRouterLayer>();
    r->d_out = layer.d_out;
    r->w = layer.w;
    r->sketch_dim = layer.sketch_dim;
    r->sketch_basis = layer.sketch;
    r->tau.resize(layer.theta.size());
    for (size_t h = 0; h < layer.theta.size(); ++h)
        r->tau[h] = 1.0 / (1.0 + std::exp(-static_cast<double>(layer.theta[h])));
    return r;
}

std::shared_ptr<const RankGatePredictor> trained_rank_gate(const RouterLayerParams& layer) {
    check_layer(layer);
    return std::make_shared<TrainedRankGate>(layer.gate);
}

} // namespace spanscope
