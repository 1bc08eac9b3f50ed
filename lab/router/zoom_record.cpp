#include "lab/router/zoom_record.h"

#include "engine/text/content_hash.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kernels/quant.h"

#include <cmath>
#include <cstring>
#include <system_error>

namespace spanscope {

namespace {

const std::string kPrefix = "spanscope.zoom_record.";

std::string key(const std::string& name) {
    return kPrefix + name;
}

std::string layer_key(int il, const std::string& name) {
    return kPrefix + "layer." + std::to_string(il) + "." + name;
}

std::string tensor_name(int il, const std::string& name) {
    return "layer." + std::to_string(il) + "." + name;
}

[[noreturn]] void fail(const std::string& what) {
    throw std::invalid_argument(what);
}

void expect_size(const std::string& what, size_t have, int64_t want) {
    if (static_cast<int64_t>(have) != want)
        fail(what + " holds " + std::to_string(have) + " values, its shape gives " +
             std::to_string(want));
}

void expect_finite(const std::string& what, const std::vector<float>& x) {
    for (size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i]))
            fail(what + "[" + std::to_string(i) + "] is not finite");
}

void check_layer(const ZoomRecord& r, const ZoomRecordLayer& l) {
    const std::string name = "layer " + std::to_string(l.layer);
    // Bounds far above any model's, so that the products below cannot overflow.
    if (l.n_head < 1 || l.n_head > 4096 || l.n_kv_head < 1 || l.n_kv_head > l.n_head ||
        l.n_head % l.n_kv_head != 0 || l.head_dim < 1 || l.head_dim > 65536)
        fail(name + ": bad shape: n_head " + std::to_string(l.n_head) + ", n_kv_head " +
             std::to_string(l.n_kv_head) + ", head_dim " + std::to_string(l.head_dim));
    if (!std::isfinite(l.scale) || !std::isfinite(l.rope_base) || l.rope_base <= 0)
        fail(name + ": the attention scale and the RoPE base must be finite (base > 0)");
    const int64_t n_spans = static_cast<int64_t>(r.spans.size());
    expect_size(name + " k", l.k.size(), r.n_tokens() * l.n_kv_head * l.head_dim);
    expect_size(name + " v", l.v.size(), r.n_tokens() * l.n_kv_head * l.head_dim);
    expect_size(name + " q", l.q.size(), r.n_queries() * l.n_head * l.head_dim);
    expect_size(name + " out", l.out.size(), r.n_queries() * l.n_head * l.head_dim);
    expect_size(name + " span_mass", l.span_mass.size(), r.n_queries() * l.n_head * n_spans);
    expect_finite(name + " k", l.k);
    expect_finite(name + " v", l.v);
    expect_finite(name + " q", l.q);
    expect_finite(name + " out", l.out);
    // Probabilities: rounding of a float32 sum of thousands of terms stays far below 1e-3.
    constexpr double kSlack = 1e-3;
    for (int64_t i = 0; i < r.n_queries(); ++i)
        for (int h = 0; h < l.n_head; ++h) {
            const float* m = l.span_mass.data() + (i * l.n_head + h) * n_spans;
            double sum = 0;
            for (int64_t s = 0; s < n_spans; ++s) {
                const std::string where = name + " span_mass of query " + std::to_string(i) +
                                          ", head " + std::to_string(h) + ", span " +
                                          std::to_string(s);
                if (!std::isfinite(m[s]) || m[s] < 0 || m[s] > 1 + kSlack)
                    fail(where + " is not a probability");
                if (m[s] != 0 && !r.visible(i, static_cast<size_t>(s)))
                    fail(where + " is not 0 though the query does not see the span");
                sum += m[s];
            }
            if (sum > 1 + kSlack)
                fail(name + " span_mass of query " + std::to_string(i) + ", head " +
                     std::to_string(h) + " sums to " + std::to_string(sum) + " > 1");
        }
}

// Copy an F32 or F16 tensor's values after checking its type and shape against `ne`.
std::vector<float> read_tensor(const GgufFile& f, const std::string& name, TensorType type,
                               const std::vector<int64_t>& ne) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t)
        fail("tensor '" + name + "' is missing");
    if (t->type != type)
        fail("tensor '" + name + "' is " + std::string(traits(t->type).name) + ", not " +
             std::string(traits(type).name));
    if (t->ne != ne) {
        auto dims = [](const std::vector<int64_t>& d) {
            std::string s;
            for (const auto x : d)
                s += (s.empty() ? "" : " x ") + std::to_string(x);
            return "[" + s + "]";
        };
        fail("tensor '" + name + "' has shape " + dims(t->ne) + " (innermost first), the header " +
             "declares " + dims(ne));
    }
    std::vector<float> out(static_cast<size_t>(t->n_elements()));
    if (out.empty())
        return out;
    if (type == TensorType::F32)
        std::memcpy(out.data(), t->data, out.size() * sizeof(float));
    else
        dequantize_row(type, t->data, out.data(), static_cast<int64_t>(out.size()));
    return out;
}

std::vector<int32_t> read_int32_array(const GgufFile& f, const std::string& k, int64_t want) {
    const auto a = f.get_int_array(k);
    if (static_cast<int64_t>(a.size()) != want)
        fail("'" + k + "' holds " + std::to_string(a.size()) + " values, the header declares " +
             std::to_string(want));
    std::vector<int32_t> out(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] < INT32_MIN || a[i] > INT32_MAX)
            fail("'" + k + "'[" + std::to_string(i) + "] does not fit 32 bits");
        out[i] = static_cast<int32_t>(a[i]);
    }
    return out;
}

// A declared count: a non-negative integer below `limit`.
int64_t read_count(const GgufFile& f, const std::string& k, int64_t limit) {
    const int64_t n = f.get_int(k);
    if (n < 0 || n > limit)
        fail("'" + k + "' = " + std::to_string(n) + " is outside [0, " + std::to_string(limit) +
             "]");
    return n;
}

ZoomRecord read_record(const GgufFile& f) {
    ZoomRecord r;
    const uint64_t version = f.get_uint(key("version"));
    if (version != ZoomRecord::kVersion)
        fail("recording format version " + std::to_string(version) + ", this build reads " +
             std::to_string(ZoomRecord::kVersion));
    r.source = f.get_string(key("source"));
    r.model_fingerprint = f.get_string(key("model_fingerprint"));
    r.command = f.get_string(key("command"));
    r.commit = f.get_string(key("commit"));
    r.settings = f.get_string(key("settings"));
    r.budget = f.get_float(key("budget"));
    const int64_t tail = f.get_int(key("tail"));
    if (tail < 0 || tail > INT32_MAX)
        fail("tail " + std::to_string(tail) + " is outside [0, 2^31)");
    r.tail = static_cast<int32_t>(tail);

    // Counts are bounded by positions (int32); the arrays are then checked against them.
    const int64_t n_tokens = read_count(f, key("n_tokens"), INT32_MAX);
    const int64_t n_spans = read_count(f, key("n_spans"), INT32_MAX);
    const int64_t n_queries = read_count(f, key("n_queries"), INT32_MAX);
    r.tokens = read_int32_array(f, key("tokens"), n_tokens);
    r.token_surprisal = read_tensor(f, "token_surprisal", TensorType::F32, {n_tokens});
    const auto begin = read_int32_array(f, key("spans.begin"), n_spans);
    const auto end = read_int32_array(f, key("spans.end"), n_spans);
    r.spans.resize(static_cast<size_t>(n_spans));
    for (size_t s = 0; s < r.spans.size(); ++s)
        r.spans[s] = TokenSpan{begin[s], end[s]};
    r.query_pos = read_int32_array(f, key("query_pos"), n_queries);

    const auto ids = f.get_int_array(key("layers"));
    for (const int64_t il64 : ids) {
        if (il64 < 0 || il64 > 65535)
            fail("layer index " + std::to_string(il64) + " is outside [0, 65535]");
        const int il = static_cast<int>(il64);
        ZoomRecordLayer l;
        l.layer = il;
        l.n_head = static_cast<int>(read_count(f, layer_key(il, "n_head"), 4096));
        l.n_kv_head = static_cast<int>(read_count(f, layer_key(il, "n_kv_head"), 4096));
        l.head_dim = static_cast<int>(read_count(f, layer_key(il, "head_dim"), 65536));
        l.scale = static_cast<float>(f.get_float(layer_key(il, "scale")));
        l.rope_base = f.get_float(layer_key(il, "rope_base"));
        const int64_t d = l.head_dim, nh = l.n_head, nkv = l.n_kv_head;
        l.k = read_tensor(f, tensor_name(il, "k"), TensorType::F16, {d, nkv, n_tokens});
        l.v = read_tensor(f, tensor_name(il, "v"), TensorType::F16, {d, nkv, n_tokens});
        l.q = read_tensor(f, tensor_name(il, "q"), TensorType::F32, {d, nh, n_queries});
        l.out = read_tensor(f, tensor_name(il, "out"), TensorType::F32, {d, nh, n_queries});
        l.span_mass =
            read_tensor(f, tensor_name(il, "span_mass"), TensorType::F32, {n_spans, nh, n_queries});
        r.layers.push_back(std::move(l));
    }
    check_zoom_record(r);
    return r;
}

} // namespace

void check_zoom_record(const ZoomRecord& r) {
    const int64_t n = r.n_tokens();
    if (n < 1 || n > INT32_MAX)
        fail("a recording needs 1 to 2^31 - 1 tokens, not " + std::to_string(n));
    expect_size("token_surprisal", r.token_surprisal.size(), n);
    for (size_t i = 0; i < r.tokens.size(); ++i)
        if (r.tokens[i] < 0)
            fail("token " + std::to_string(i) + " has a negative id");
    // -log p >= 0; a float log-softmax may land a rounding step below 0.
    for (size_t i = 0; i < r.token_surprisal.size(); ++i)
        if (std::isinf(r.token_surprisal[i]) || r.token_surprisal[i] < -1e-3f)
            fail("token_surprisal[" + std::to_string(i) + "] is not a surprisal (nats >= 0)");
    int64_t last_end = 0;
    for (size_t s = 0; s < r.spans.size(); ++s) {
        const TokenSpan& sp = r.spans[s];
        if (sp.begin < last_end || sp.end <= sp.begin || sp.end > n)
            fail("span " + std::to_string(s) + " [" + std::to_string(sp.begin) + ", " +
                 std::to_string(sp.end) + ") is empty, overlaps the one before or lies outside " +
                 "the " + std::to_string(n) + " tokens");
        last_end = sp.end;
    }
    for (size_t i = 0; i < r.query_pos.size(); ++i) {
        const int32_t p = r.query_pos[i];
        if (p < 0 || p >= n || (i > 0 && p <= r.query_pos[i - 1]))
            fail("query position " + std::to_string(i) + " (" + std::to_string(p) +
                 ") is not ascending or lies outside the " + std::to_string(n) + " tokens");
    }
    if (r.tail < 0)
        fail("tail " + std::to_string(r.tail) + " is negative");
    if (!std::isfinite(r.budget))
        fail("budget is not finite");
    for (size_t i = 0; i < r.layers.size(); ++i) {
        if (r.layers[i].layer < 0 || (i > 0 && r.layers[i].layer <= r.layers[i - 1].layer))
            fail("layer indices must be ascending, distinct and >= 0");
        check_layer(r, r.layers[i]);
    }
}

void save_zoom_record(const ZoomRecord& r, const std::string& path) {
    check_zoom_record(r);
    const int64_t n = r.n_tokens(), nq = r.n_queries();
    const int64_t n_spans = static_cast<int64_t>(r.spans.size());
    GgufWriter w;
    w.set_uint32(key("version"), ZoomRecord::kVersion);
    w.set_string(key("source"), r.source);
    w.set_string(key("model_fingerprint"), r.model_fingerprint);
    w.set_string(key("command"), r.command);
    w.set_string(key("commit"), r.commit);
    w.set_string(key("settings"), r.settings);
    w.set_value(key("budget"), GgufValue{GgufValueType::Float64, {}, r.budget});
    w.set_int32(key("tail"), r.tail);
    w.set_uint64(key("n_tokens"), static_cast<uint64_t>(n));
    w.set_uint64(key("n_spans"), static_cast<uint64_t>(n_spans));
    w.set_uint64(key("n_queries"), static_cast<uint64_t>(nq));
    w.set_int32_array(key("tokens"), r.tokens);
    std::vector<int32_t> begin, end, ids;
    for (const auto& s : r.spans) {
        begin.push_back(static_cast<int32_t>(s.begin));
        end.push_back(static_cast<int32_t>(s.end));
    }
    w.set_int32_array(key("spans.begin"), begin);
    w.set_int32_array(key("spans.end"), end);
    w.set_int32_array(key("query_pos"), r.query_pos);
    for (const auto& l : r.layers)
        ids.push_back(l.layer);
    w.set_int32_array(key("layers"), ids);
    w.add_tensor_f32("token_surprisal", TensorType::F32, {n}, r.token_surprisal);
    for (const auto& l : r.layers) {
        const int il = l.layer;
        const int64_t d = l.head_dim, nh = l.n_head, nkv = l.n_kv_head;
        w.set_int32(layer_key(il, "n_head"), l.n_head);
        w.set_int32(layer_key(il, "n_kv_head"), l.n_kv_head);
        w.set_int32(layer_key(il, "head_dim"), l.head_dim);
        w.set_float32(layer_key(il, "scale"), l.scale);
        w.set_value(layer_key(il, "rope_base"), GgufValue{GgufValueType::Float64, {}, l.rope_base});
        // The cache rows are f16-rounded already (memory.h), so F16 keeps them exactly.
        w.add_tensor_f32(tensor_name(il, "k"), TensorType::F16, {d, nkv, n}, l.k);
        w.add_tensor_f32(tensor_name(il, "v"), TensorType::F16, {d, nkv, n}, l.v);
        w.add_tensor_f32(tensor_name(il, "q"), TensorType::F32, {d, nh, nq}, l.q);
        w.add_tensor_f32(tensor_name(il, "out"), TensorType::F32, {d, nh, nq}, l.out);
        w.add_tensor_f32(tensor_name(il, "span_mass"), TensorType::F32, {n_spans, nh, nq},
                         l.span_mass);
    }
    w.write(path);
}

ZoomRecord load_zoom_record(const std::string& path) {
    try {
        const auto f = GgufFile::open(path);
        return read_record(*f);
    } catch (const std::invalid_argument& e) {
        throw ZoomRecordError(path + ": " + e.what());
    } catch (const GgufError& e) {
        throw ZoomRecordError(path + ": not a readable recording: " + e.what());
    } catch (const std::system_error& e) {
        throw ZoomRecordError(path + ": cannot be read: " + e.what());
    }
}

std::string zoom_record_digest(const ZoomRecord& r) {
    ContentHash h;
    h.str(r.source);
    h.str(r.model_fingerprint);
    h.str(r.settings);
    h.values(r.tokens);
    h.values(r.token_surprisal);
    h.i64(static_cast<int64_t>(r.spans.size()));
    for (const auto& s : r.spans) {
        h.i64(s.begin);
        h.i64(s.end);
    }
    h.f64(r.budget);
    h.i64(r.tail);
    h.values(r.query_pos);
    for (const auto& l : r.layers) {
        h.i64(l.layer);
        h.i64(l.n_head);
        h.i64(l.n_kv_head);
        h.i64(l.head_dim);
        h.f64(l.scale);
        h.f64(l.rope_base);
        for (const auto* t : {&l.k, &l.v, &l.q, &l.out, &l.span_mass})
            h.values(*t);
    }
    return h.hex();
}

} // namespace spanscope
