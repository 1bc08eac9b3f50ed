// Writes the seed corpora of the project-store fuzz targets (chunk_state, recurrent_state,
// sekv_state, zoom_trace, router_params) with the product's own writers, in the tiny shapes of
// seed_shapes.h: valid blobs in each mode, and a few invalid ones (truncated, a bad checksum, a
// forged huge count), each file named after what it is. Every file starts with the target's mode
// byte (seed_shapes.h; fuzz_zoom_trace.cpp for the zoom trace's). Regenerate from the source
// tree after a format change:
//
//   build/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
//
// It writes <dir>/<target>/<name> for each seed, overwriting what is there.
#include "engine/kernels/fp16.h"
#include "engine/sekv/router_params.h"
#include "seed_shapes.h"
#include "storage/zoom_trace_blob.h"
#include "tests/state_patterns.h"

#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spanscope;
using namespace spanscope::fuzz;
using namespace spanscope::patterns;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

fs::path g_out;

void write(const std::string& target, const std::string& name, uint8_t mode, const Bytes& b) {
    if (b.size() + 1 > 4096)
        throw std::logic_error(target + "/" + name + " is over 4 KiB");
    fs::create_directories(g_out / target);
    std::ofstream f(g_out / target / name, std::ios::binary);
    f.put(static_cast<char>(mode));
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f)
        throw std::runtime_error("cannot write " + (g_out / target / name).string());
}

template <class T> Bytes with(Bytes b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
    return b;
}

Bytes flipped(Bytes b, size_t at) {
    b.at(at) ^= 0x40;
    return b;
}

Bytes truncated(Bytes b, size_t n) {
    b.resize(n);
    return b;
}

ChunkState attention_state(StateKind kind) {
    const auto e = attention_expectation(kind);
    ChunkState s = state_header(e);
    for (const int layer : e.layers) {
        LayerRows r;
        r.layer = layer;
        r.pos_begin = e.pos_begin;
        r.n_rows = e.n_rows;
        for (int64_t i = 0; i < e.n_rows * e.n_kv_head * e.head_dim; ++i) {
            r.k.push_back(fp32_to_fp16(std::sin(0.1f * static_cast<float>(i) + layer)));
            r.v.push_back(fp32_to_fp16(std::cos(0.2f * static_cast<float>(i) - layer)));
        }
        s.layers.push_back(r);
    }
    if (kind == StateKind::AttentionRows)
        s.surprisal = {NAN, 1.5f, 0.25f};
    return s;
}

void chunk_state_seeds() {
    const std::string t = "chunk_state";
    const Bytes rows = encode_chunk_state(attention_state(StateKind::AttentionRows));
    const Bytes tail = encode_chunk_state(attention_state(StateKind::SlidingTail));
    write(t, "valid-attention-rows", 0, rows);
    write(t, "valid-attention-rows-derived", kDerive, rows);
    write(t, "valid-attention-rows-resealed-derived", kReseal | kDerive, rows);
    write(t, "valid-sliding-tail", 4, tail);
    write(t, "valid-sliding-tail-resealed-derived", kReseal | kDerive, tail);
    write(t, "bad-header-checksum", 0, flipped(rows, 52));
    write(t, "bad-payload-checksum", 0, flipped(rows, rows.size() - 3));
    write(t, "bad-short-header", 0, truncated(rows, 60));
    write(t, "bad-truncated-payload-resealed", kReseal, truncated(rows, rows.size() - 10));
    write(t, "bad-huge-n-rows-resealed-derived", kReseal | kDerive,
          with<uint32_t>(rows, 56, 0xFFFFFFFFu));
    write(t, "bad-huge-n-layers-resealed-derived", kReseal | kDerive,
          with<uint32_t>(rows, 40, 0xFFFFFFFFu));
    write(t, "bad-huge-payload-size-resealed", kReseal, with<uint64_t>(rows, 72, ~uint64_t{0}));
}

ChunkState recurrent_state(bool with_transition) {
    const auto e = recurrent_expectation();
    ChunkState s = state_header(e);
    s.recurrent = recurrent_layers(e.recurrent, with_transition);
    return s;
}

void recurrent_state_seeds() {
    const std::string t = "recurrent_state";
    const Bytes b = encode_chunk_state(recurrent_state(true));
    const Bytes plain = encode_chunk_state(recurrent_state(false));
    // Records start after the header and the index of 3 layers padded to 16 bytes.
    const size_t rec0 = kChunkStateHeaderBytes + 16;
    write(t, "valid-recurrent-with-transition", 0, b);
    write(t, "valid-recurrent-with-transition-derived", kDerive, b);
    write(t, "valid-recurrent-with-transition-resealed-derived", kReseal | kDerive, b);
    write(t, "valid-recurrent-without-transition", 0, plain);
    write(t, "bad-header-checksum", 0, flipped(b, 44));
    write(t, "bad-payload-checksum", 0, flipped(b, b.size() - 5));
    write(t, "bad-truncated-payload-resealed", kReseal, truncated(b, b.size() - 12));
    write(t, "bad-huge-state-count-resealed-derived", kReseal | kDerive,
          with<uint32_t>(b, rec0 + 4, 0xFFFFFFFFu));
    write(t, "bad-huge-n-layers-resealed-derived", kReseal | kDerive,
          with<uint32_t>(b, 40, 0xFFFFFFFFu));
    write(t, "bad-mamba2-transition-resealed", kReseal, with<uint32_t>(b, rec0 + 16, 5));
}

SpanFactors factors(int64_t rows, int64_t dim, int rank, float phase, TensorType type) {
    SpanFactors f;
    f.rows = rows;
    f.dim = dim;
    f.rank = rank;
    const auto left = ramp(rows * rank, phase);
    f.left = to_f16(left.data(), rows * rank, "seed");
    f.right_type = type;
    set_right_factor(f, ramp(rank * dim, -phase));
    return f;
}

// The unit tests' SEKV state (state_patterns.h) with ramps for factors of type `type`.
SekvUnitState sekv_state(int n_kv, int d, TensorType type) {
    const auto e = sekv_expectation();
    return sekv_pattern_state(e.options_key, e.layers, n_kv, d,
                              [type](int64_t rows, int64_t dim, int rank, float phase) {
                                  return factors(rows, dim, rank, phase, type);
                              });
}

void sekv_state_seeds() {
    const std::string t = "sekv_state";
    const auto e = sekv_expectation();
    const Bytes b =
        encode_sekv_state(sekv_state(e.n_kv_head, e.head_dim, TensorType::F16), e.fingerprint);
    const Bytes q8 = encode_sekv_state(sekv_state(1, 32, TensorType::Q8_0), e.fingerprint);
    // Offsets: magic 8, version 4, fingerprint 16, options key (u32 + bytes), then n_tokens.
    const size_t n_tokens_at = 28 + 4 + e.options_key.size();
    const size_t n_anchors_at = n_tokens_at + 8 + 16 + 8 + 4 * 12;
    const size_t n_spans_at = n_anchors_at + 4 + 3 * 8 * 3;
    const size_t first_rank_at = n_spans_at + 4 + 4 * 8 * 2 + 4 + 4 + 2 * 2 * 2 * 4;
    write(t, "valid-f16-2x4", 0, b);
    write(t, "valid-f16-2x4-derived", kDerive, b);
    write(t, "valid-f16-2x4-resealed-derived", kReseal | kDerive, b);
    write(t, "valid-q8_0-1x32-resealed-derived", kReseal | kDerive, q8);
    write(t, "bad-checksum", 0, flipped(b, 40));
    write(t, "bad-short", 0, truncated(b, 20));
    write(t, "bad-truncated-resealed", kReseal, truncated(b, b.size() - 30));
    write(t, "bad-huge-n-tokens-resealed-derived", kReseal | kDerive,
          with<int64_t>(b, n_tokens_at, int64_t{1} << 60));
    write(t, "bad-huge-n-anchors-resealed", kReseal, with<uint32_t>(b, n_anchors_at, 0xFFFFFFFFu));
    write(t, "bad-huge-n-spans-resealed-derived", kReseal | kDerive,
          with<uint32_t>(b, n_spans_at, 0xFFFFFFFFu));
    write(t, "bad-huge-rank-resealed", kReseal, with<uint32_t>(b, first_rank_at, 0xFFFFFFFFu));
}

// The stream inside a stored trace, without its trailing checksum (fuzz_zoom_trace.cpp mode 1).
Bytes zoom_stream(const Bytes& blob) {
    uint64_t n = 0;
    std::memcpy(&n, blob.data(), 8);
    Bytes raw(n);
    uLongf got = static_cast<uLongf>(n);
    if (uncompress(raw.data(), &got, blob.data() + 8, static_cast<uLong>(blob.size() - 8)) != Z_OK)
        throw std::runtime_error("zoom trace seed does not decompress");
    raw.resize(n - 8);
    return raw;
}

void zoom_trace_seeds() {
    const std::string t = "zoom_trace";
    const Bytes blob = encode_zoom_trace(zoom_trace_pattern(true));
    const Bytes plain = encode_zoom_trace(zoom_trace_pattern(false));
    const Bytes stream = zoom_stream(blob);
    Bytes declared(8);
    const uint64_t true_size = stream.size() + 8;
    std::memcpy(declared.data(), &true_size, 8);
    declared.insert(declared.end(), stream.begin(), stream.end());
    // Stream offsets: magic 8, version 4, n_spans 4, n_sources 4, 2 sources of 28 bytes.
    const size_t n_steps_at = 20 + 2 * 28;
    const size_t first_span_id_at = n_steps_at + 4 + 4 + 4 + 2 + 8 + 8 + 4 + 4 + 4 + 4;
    write(t, "valid-stored-with-mass", 0, blob);
    write(t, "valid-stored-without-mass", 0, plain);
    write(t, "valid-stream-sealed", 1, stream);
    write(t, "valid-stream-declared-size", 2, declared);
    write(t, "bad-stored-truncated-zlib", 0, truncated(blob, blob.size() - 9));
    write(t, "bad-stored-checksum", 0, flipped(blob, 12));
    write(t, "bad-stored-huge-declared-size", 0, with<uint64_t>(blob, 0, uint64_t{1} << 40));
    write(t, "bad-stream-huge-n-steps", 1, with<uint32_t>(stream, n_steps_at, 0xFFFFFFFFu));
    write(t, "bad-stream-span-id-outside", 1, with<int32_t>(stream, first_span_id_at, 7));
    write(t, "bad-stream-huge-n-sources", 1, with<uint32_t>(stream, 16, 0xFFFFFFFFu));
    write(t, "bad-declared-size-short", 2, with<uint64_t>(declared, 0, true_size - 1));
}

RouterParams router_params(bool sketch) {
    RouterParams p;
    p.model_fingerprint = seed_fingerprint_hex();
    p.model_name = "seed-model.gguf";
    p.provenance = {"seeds", "fuzz_make_seeds", "0000000", "2026-01-01T00:00:00Z"};
    for (const int il : {1, 3}) {
        RouterLayerParams l;
        l.layer = il;
        l.n_head = 2;
        l.head_dim = 4;
        l.d_out = 2;
        l.w = ramp(l.n_head * l.d_out * l.head_dim, 0.5f * il);
        l.theta = ramp(l.n_head, 1.0f);
        l.gate.n_rank = 2;
        l.gate.head_dim = l.head_dim;
        l.gate.n_hidden = 2;
        l.gate.w1 = ramp(l.gate.n_hidden * l.gate.n_in(), 2.0f);
        l.gate.b1 = ramp(l.gate.n_hidden, 3.0f);
        l.gate.w2 = ramp(l.gate.n_rank * l.gate.n_hidden, 4.0f);
        l.gate.b2 = ramp(l.gate.n_rank, 5.0f);
        if (sketch && il == 3) {
            l.sketch_dim = 2;
            l.n_kv_head = 1;
            l.sketch = ramp(l.n_kv_head * l.sketch_dim * l.head_dim, 6.0f);
        }
        p.layers.push_back(std::move(l));
    }
    return p;
}

Bytes router_file(const RouterParams& p) {
    const auto path = fs::temp_directory_path() / ("fuzz_make_seeds." + std::to_string(::getpid()));
    save_router_params(p, path.string());
    std::ifstream in(path, std::ios::binary);
    Bytes b((std::istreambuf_iterator<char>(in)), {});
    fs::remove(path);
    return b;
}

// The u32 value of GGUF key `key` (u64 length, the key, u32 type, then the value).
size_t gguf_value_at(const Bytes& b, const std::string& key) {
    const auto it = std::search(b.begin(), b.end(), key.begin(), key.end());
    if (it == b.end())
        throw std::logic_error("no key " + key);
    return static_cast<size_t>(it - b.begin()) + key.size() + 4;
}

void router_params_seeds() {
    const std::string t = "router_params";
    const Bytes b = router_file(router_params(false));
    const Bytes sketch = router_file(router_params(true));
    auto other = router_params(false);
    other.model_fingerprint = "0123456789abcdef0123456789abcdef";
    auto nan = router_params(false);
    nan.layers[0].theta[1] = NAN;
    write(t, "valid-2-layers", 0, b);
    write(t, "valid-2-layers-expected-model", 1, b);
    write(t, "valid-sketch-expected-model", 1, sketch);
    write(t, "bad-other-model", 1, router_file(other));
    write(t, "bad-nan-theta", 0, router_file(nan));
    write(t, "bad-truncated-tensor-data", 0, truncated(b, b.size() - 100));
    write(t, "bad-truncated-metadata", 0, truncated(b, b.size() / 2));
    write(t, "bad-huge-n-head", 0,
          with<uint32_t>(b, gguf_value_at(b, "spanscope.zoom.1.n_head"), 0xFFFFFFFFu));
    write(t, "bad-huge-sketch-dim", 0,
          with<uint32_t>(sketch, gguf_value_at(sketch, "spanscope.zoom.3.sketch_dim"), 1u << 20));
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
        return 2;
    }
    g_out = argv[1];
    try {
        chunk_state_seeds();
        recurrent_state_seeds();
        sekv_state_seeds();
        zoom_trace_seeds();
        router_params_seeds();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
        return 1;
    }
    return 0;
}
