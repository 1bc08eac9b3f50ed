#include "storage/chunk_state.h"

#include <xxhash.h>

#include <array>
#include <bit>
#include <cstring>

namespace spanscope {

static_assert(std::endian::native == std::endian::little,
              "the chunk state format is written little-endian by a little-endian host");

namespace {

constexpr char kMagic[8] = {'S', 'S', 'C', 'H', 'U', 'N', 'K', '\0'};
constexpr uint32_t kByteOrderMark = 0x01020304u;

template <class T> void put(std::vector<uint8_t>& b, size_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof v);
}
template <class T> T get(const uint8_t* p, size_t at) {
    T v;
    std::memcpy(&v, p + at, sizeof v);
    return v;
}

std::string fp_hex(const Fingerprint& f) {
    return fingerprint_hex(f);
}

} // namespace

ChunkState state_header(const StateExpectation& e) {
    ChunkState s;
    s.kind = e.kind;
    s.fingerprint = e.fingerprint;
    s.token_hash = e.token_hash;
    s.pos_begin = e.pos_begin;
    s.n_rows = e.n_rows;
    s.n_kv_head = e.n_kv_head;
    s.head_dim = e.head_dim;
    return s;
}

int64_t chunk_state_rows(const std::vector<uint8_t>& blob) {
    return blob.size() < kChunkStateHeaderBytes ? 0 : get<uint32_t>(blob.data(), 56);
}

uint64_t token_ids_hash(const std::vector<int32_t>& ids) {
    return XXH3_64bits(ids.data(), ids.size() * sizeof(int32_t));
}

std::vector<RecurrentLayerShape> recurrent_layer_shapes(const ModelInfo& info) {
    std::vector<RecurrentLayerShape> out;
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        RecurrentLayerShape r;
        r.layer = il;
        if (li.kind == LayerKind::Mamba2) {
            const auto& m = li.mamba2;
            r.state = m.n_heads * m.head_dim * m.d_state;
            r.conv = (m.d_conv - 1) * m.conv_dim();
            r.decay = m.n_heads;
        } else if (li.kind == LayerKind::GatedDeltaNet) {
            const auto& g = li.gated_deltanet;
            r.mamba2 = false;
            r.state = g.n_v_heads * g.d_v * g.d_k;
            r.conv = (g.d_conv - 1) * g.conv_dim();
            r.transition = g.n_v_heads * g.d_k * g.d_k;
        } else {
            continue;
        }
        out.push_back(r);
    }
    return out;
}

namespace {

constexpr size_t kRecurrentRecordBytes = 24;

// The float arrays of one recurrent layer, in payload order.
std::vector<const std::vector<float>*> recurrent_arrays(const RecurrentLayerState& r) {
    static const std::vector<float> kNone;
    if (r.mamba2)
        return {&r.mamba2->ssm, &r.mamba2->conv, &r.mamba2->log_decay, &kNone};
    return {&r.gated_deltanet->s, &r.gated_deltanet->conv, &kNone, &r.gated_deltanet->transition};
}

std::vector<uint8_t> encode_recurrent(const ChunkState& s) {
    const size_t n_layers = s.recurrent.size();
    const size_t index_bytes = (n_layers * 4 + 7) / 8 * 8;
    size_t floats = 0;
    for (const auto& r : s.recurrent) {
        if (r.mamba2.has_value() == r.gated_deltanet.has_value())
            throw std::invalid_argument("recurrent layer " + std::to_string(r.layer) +
                                        " needs exactly one state");
        for (const auto* a : recurrent_arrays(r))
            floats += a->size();
    }
    const size_t payload = index_bytes + n_layers * kRecurrentRecordBytes + floats * 4;
    std::vector<uint8_t> b(kChunkStateHeaderBytes + payload, 0);
    std::memcpy(b.data(), kMagic, sizeof kMagic);
    put<uint32_t>(b, 8, kChunkStateVersion);
    put<uint32_t>(b, 12, kByteOrderMark);
    std::memcpy(b.data() + 16, s.fingerprint.data(), 16);
    put<uint32_t>(b, 32, static_cast<uint32_t>(StateKind::RecurrentStates));
    put<uint32_t>(b, 36, static_cast<uint32_t>(StateDtype::F32));
    put<uint32_t>(b, 40, static_cast<uint32_t>(n_layers));
    put<int32_t>(b, 52, 0);
    put<uint32_t>(b, 56, static_cast<uint32_t>(s.n_rows));
    put<uint64_t>(b, 64, s.token_hash);
    put<uint64_t>(b, 72, payload);
    size_t at = kChunkStateHeaderBytes;
    for (const auto& r : s.recurrent) {
        put<uint32_t>(b, at, static_cast<uint32_t>(r.layer));
        at += 4;
    }
    at = kChunkStateHeaderBytes + index_bytes;
    for (const auto& r : s.recurrent) {
        put<uint32_t>(b, at, r.mamba2 ? 1u : 2u);
        const auto arrays = recurrent_arrays(r);
        for (size_t i = 0; i < 4; ++i)
            put<uint32_t>(b, at + 4 + 4 * i, static_cast<uint32_t>(arrays[i]->size()));
        at += kRecurrentRecordBytes;
    }
    for (const auto& r : s.recurrent)
        for (const auto* a : recurrent_arrays(r)) {
            if (!a->empty())
                std::memcpy(b.data() + at, a->data(), a->size() * 4);
            at += a->size() * 4;
        }
    put<uint64_t>(b, 80, XXH3_64bits(b.data() + kChunkStateHeaderBytes, payload));
    put<uint64_t>(b, 88, XXH3_64bits(b.data(), 88));
    return b;
}

// The rest of a RecurrentStates blob whose magic, version, byte order, header checksum,
// fingerprint and kind were checked.
void decode_recurrent(const uint8_t* p, size_t size, const StateExpectation& e, ChunkState& s) {
    const auto dtype = get<uint32_t>(p, 36);
    if (dtype != static_cast<uint32_t>(StateDtype::F32))
        throw StateError("recurrent chunk state dtype " + std::to_string(dtype) +
                         " is not supported");
    const auto n_layers = get<uint32_t>(p, 40);
    s.n_kv_head = static_cast<int>(get<uint32_t>(p, 44));
    s.head_dim = static_cast<int>(get<uint32_t>(p, 48));
    s.pos_begin = get<int32_t>(p, 52);
    s.n_rows = get<uint32_t>(p, 56);
    s.token_hash = get<uint64_t>(p, 64);
    if (n_layers != e.recurrent.size() || s.n_kv_head != 0 || s.head_dim != 0 || s.pos_begin != 0 ||
        s.n_rows != e.n_rows || get<uint32_t>(p, 60) != 0)
        throw StateError("recurrent chunk state shape (" + std::to_string(n_layers) +
                         " layers, standing for " + std::to_string(s.n_rows) +
                         " tokens) does not match the chunk (" +
                         std::to_string(e.recurrent.size()) + " layers, " +
                         std::to_string(e.n_rows) + " tokens)");
    if (s.token_hash != e.token_hash)
        throw StateError("chunk state was computed over other token ids");
    const size_t index_bytes = (n_layers * size_t{4} + 7) / 8 * 8;
    const size_t fixed = index_bytes + n_layers * kRecurrentRecordBytes;
    const auto payload = get<uint64_t>(p, 72);
    if (payload < fixed || payload != size - kChunkStateHeaderBytes)
        throw StateError("chunk state payload size mismatch (" + std::to_string(size) +
                         " bytes, header says " + std::to_string(kChunkStateHeaderBytes + payload) +
                         ")");
    if (get<uint64_t>(p, 80) != XXH3_64bits(p + kChunkStateHeaderBytes, payload))
        throw StateError("chunk state payload checksum mismatch (corrupted data)");
    // Every count against the model's shapes before any float is read.
    uint64_t floats = 0;
    std::vector<std::array<uint32_t, 4>> counts(n_layers);
    for (uint32_t i = 0; i < n_layers; ++i) {
        const auto& want = e.recurrent[i];
        const auto layer = get<uint32_t>(p, kChunkStateHeaderBytes + 4 * i);
        const size_t rec = kChunkStateHeaderBytes + index_bytes + i * kRecurrentRecordBytes;
        const auto kind = get<uint32_t>(p, rec);
        for (size_t k = 0; k < 4; ++k)
            counts[i][k] = get<uint32_t>(p, rec + 4 + 4 * k);
        const auto& c = counts[i];
        const bool transition_ok =
            c[3] == 0 || (!want.mamba2 && static_cast<int64_t>(c[3]) == want.transition);
        if (static_cast<int>(layer) != want.layer || kind != (want.mamba2 ? 1u : 2u) ||
            c[0] != want.state || c[1] != want.conv || c[2] != want.decay || !transition_ok ||
            get<uint32_t>(p, rec + 20) != 0)
            throw StateError("recurrent chunk state: record " + std::to_string(i) + " (layer " +
                             std::to_string(layer) + ", kind " + std::to_string(kind) +
                             ") does not match recurrent layer " + std::to_string(want.layer) +
                             " of the model");
        floats += uint64_t{c[0]} + c[1] + c[2] + c[3];
    }
    if (fixed + floats * 4 != payload)
        throw StateError("recurrent chunk state: the layers' sizes do not add up to the payload");
    size_t at = kChunkStateHeaderBytes + fixed;
    auto take = [&](uint32_t n) {
        std::vector<float> v(n);
        if (n)
            std::memcpy(v.data(), p + at, size_t{n} * 4);
        at += size_t{n} * 4;
        return v;
    };
    for (uint32_t i = 0; i < n_layers; ++i) {
        RecurrentLayerState r;
        r.layer = e.recurrent[i].layer;
        const auto& c = counts[i];
        if (e.recurrent[i].mamba2) {
            Mamba2State m;
            m.ssm = take(c[0]);
            m.conv = take(c[1]);
            m.log_decay = take(c[2]);
            (void)take(c[3]);
            r.mamba2 = std::move(m);
        } else {
            GatedDeltaNetState g;
            g.s = take(c[0]);
            g.conv = take(c[1]);
            (void)take(c[2]);
            g.transition = take(c[3]);
            r.gated_deltanet = std::move(g);
        }
        s.recurrent.push_back(std::move(r));
    }
}

} // namespace

std::vector<uint8_t> encode_chunk_state(const ChunkState& s) {
    if (s.kind == StateKind::RecurrentStates)
        return encode_recurrent(s);
    const size_t n_layers = s.layers.size();
    const size_t row = static_cast<size_t>(s.n_kv_head) * s.head_dim;
    const size_t per_matrix = static_cast<size_t>(s.n_rows) * row * 2;
    for (const auto& l : s.layers)
        if (l.n_rows != s.n_rows || l.pos_begin != s.pos_begin || l.k.size() * 2 != per_matrix ||
            l.v.size() * 2 != per_matrix)
            throw std::invalid_argument("chunk state rows do not match the declared shape");
    if (s.kind == StateKind::AttentionRows && static_cast<int64_t>(s.surprisal.size()) != s.n_rows)
        throw std::invalid_argument("chunk state needs one surprisal per row");
    const size_t index_bytes = (n_layers * 4 + 7) / 8 * 8;
    const size_t payload = index_bytes + n_layers * 2 * per_matrix + s.surprisal.size() * 4;
    std::vector<uint8_t> b(kChunkStateHeaderBytes + payload, 0);
    std::memcpy(b.data(), kMagic, sizeof kMagic);
    put<uint32_t>(b, 8, kChunkStateVersion);
    put<uint32_t>(b, 12, kByteOrderMark);
    std::memcpy(b.data() + 16, s.fingerprint.data(), 16);
    put<uint32_t>(b, 32, static_cast<uint32_t>(s.kind));
    put<uint32_t>(b, 36, static_cast<uint32_t>(StateDtype::F16));
    put<uint32_t>(b, 40, static_cast<uint32_t>(n_layers));
    put<uint32_t>(b, 44, static_cast<uint32_t>(s.n_kv_head));
    put<uint32_t>(b, 48, static_cast<uint32_t>(s.head_dim));
    put<int32_t>(b, 52, s.pos_begin);
    put<uint32_t>(b, 56, static_cast<uint32_t>(s.n_rows));
    put<uint32_t>(b, 60, static_cast<uint32_t>(s.surprisal.size()));
    put<uint64_t>(b, 64, s.token_hash);
    put<uint64_t>(b, 72, payload);
    size_t at = kChunkStateHeaderBytes;
    for (const auto& l : s.layers) {
        put<uint32_t>(b, at, static_cast<uint32_t>(l.layer));
        at += 4;
    }
    at = kChunkStateHeaderBytes + index_bytes;
    for (const auto& l : s.layers) {
        std::memcpy(b.data() + at, l.k.data(), per_matrix);
        at += per_matrix;
        std::memcpy(b.data() + at, l.v.data(), per_matrix);
        at += per_matrix;
    }
    if (!s.surprisal.empty())
        std::memcpy(b.data() + at, s.surprisal.data(), s.surprisal.size() * 4);
    put<uint64_t>(b, 80, XXH3_64bits(b.data() + kChunkStateHeaderBytes, payload));
    put<uint64_t>(b, 88, XXH3_64bits(b.data(), 88));
    return b;
}

ChunkState decode_chunk_state(const uint8_t* p, size_t size, const StateExpectation& e) {
    if (size < kChunkStateHeaderBytes)
        throw StateError("chunk state of " + std::to_string(size) +
                         " bytes is shorter than its header");
    if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
        throw StateError("not a chunk state (bad magic)");
    const auto version = get<uint32_t>(p, 8);
    if (version != kChunkStateVersion)
        throw StateError("chunk state format version " + std::to_string(version) +
                         " is not supported (this build reads version " +
                         std::to_string(kChunkStateVersion) + ")");
    if (get<uint32_t>(p, 12) != kByteOrderMark)
        throw StateError("chunk state written with another byte order");
    if (get<uint64_t>(p, 88) != XXH3_64bits(p, 88))
        throw StateError("chunk state header checksum mismatch");
    ChunkState s;
    std::memcpy(s.fingerprint.data(), p + 16, 16);
    if (s.fingerprint != e.fingerprint)
        throw StateError("chunk state computed by another model (fingerprint " +
                         fp_hex(s.fingerprint) + ", this model " + fp_hex(e.fingerprint) + ")");
    const auto kind = get<uint32_t>(p, 32);
    if (kind != static_cast<uint32_t>(e.kind))
        throw StateError("chunk state of kind " + std::to_string(kind) + ", expected " +
                         std::to_string(static_cast<uint32_t>(e.kind)));
    s.kind = e.kind;
    if (s.kind == StateKind::RecurrentStates) {
        decode_recurrent(p, size, e, s);
        return s;
    }
    const auto dtype = get<uint32_t>(p, 36);
    if (dtype != static_cast<uint32_t>(StateDtype::F16))
        throw StateError("chunk state dtype " + std::to_string(dtype) + " is not supported");
    const auto n_layers = get<uint32_t>(p, 40);
    s.n_kv_head = static_cast<int>(get<uint32_t>(p, 44));
    s.head_dim = static_cast<int>(get<uint32_t>(p, 48));
    s.pos_begin = get<int32_t>(p, 52);
    s.n_rows = get<uint32_t>(p, 56);
    const auto n_surprisal = get<uint32_t>(p, 60);
    s.token_hash = get<uint64_t>(p, 64);
    if (n_layers != e.layers.size() || s.n_kv_head != e.n_kv_head || s.head_dim != e.head_dim ||
        s.pos_begin != e.pos_begin || s.n_rows != e.n_rows)
        throw StateError("chunk state shape (" + std::to_string(n_layers) + " layers, " +
                         std::to_string(s.n_rows) + " rows from position " +
                         std::to_string(s.pos_begin) + ", " + std::to_string(s.n_kv_head) + "x" +
                         std::to_string(s.head_dim) + ") does not match the chunk (" +
                         std::to_string(e.layers.size()) + " layers, " + std::to_string(e.n_rows) +
                         " rows from position " + std::to_string(e.pos_begin) + ", " +
                         std::to_string(e.n_kv_head) + "x" + std::to_string(e.head_dim) + ")");
    const uint32_t want_surprisal =
        e.kind == StateKind::AttentionRows ? static_cast<uint32_t>(e.n_rows) : 0;
    if (n_surprisal != want_surprisal)
        throw StateError("chunk state has " + std::to_string(n_surprisal) +
                         " surprisal values, expected " + std::to_string(want_surprisal));
    if (s.token_hash != e.token_hash)
        throw StateError("chunk state was computed over other token ids");
    const size_t row = static_cast<size_t>(s.n_kv_head) * s.head_dim;
    const size_t per_matrix = static_cast<size_t>(s.n_rows) * row * 2;
    const size_t index_bytes = (n_layers * size_t{4} + 7) / 8 * 8;
    const size_t payload = index_bytes + n_layers * 2 * per_matrix + n_surprisal * size_t{4};
    if (get<uint64_t>(p, 72) != payload || size != kChunkStateHeaderBytes + payload)
        throw StateError("chunk state payload size mismatch (" + std::to_string(size) +
                         " bytes, shape needs " + std::to_string(kChunkStateHeaderBytes + payload) +
                         ")");
    if (get<uint64_t>(p, 80) != XXH3_64bits(p + kChunkStateHeaderBytes, payload))
        throw StateError("chunk state payload checksum mismatch (corrupted data)");
    size_t at = kChunkStateHeaderBytes + index_bytes;
    for (uint32_t i = 0; i < n_layers; ++i) {
        const auto layer = get<uint32_t>(p, kChunkStateHeaderBytes + 4 * i);
        if (static_cast<int>(layer) != e.layers[i])
            throw StateError("chunk state holds layer " + std::to_string(layer) + ", expected " +
                             std::to_string(e.layers[i]));
        LayerRows r;
        r.layer = static_cast<int>(layer);
        r.pos_begin = s.pos_begin;
        r.n_rows = s.n_rows;
        r.k.resize(per_matrix / 2);
        r.v.resize(per_matrix / 2);
        std::memcpy(r.k.data(), p + at, per_matrix);
        at += per_matrix;
        std::memcpy(r.v.data(), p + at, per_matrix);
        at += per_matrix;
        s.layers.push_back(std::move(r));
    }
    s.surprisal.resize(n_surprisal);
    if (n_surprisal)
        std::memcpy(s.surprisal.data(), p + at, n_surprisal * size_t{4});
    return s;
}

} // namespace spanscope
