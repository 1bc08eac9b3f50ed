#include "storage/sekv_state.h"

#include "storage/byte_stream.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace spanscope {

namespace {
constexpr char kMagic[8] = {'S', 'S', 'S', 'E', 'K', 'V', 0, 0};
constexpr uint32_t kVersion = 2;

// An f16 value's exponent bits all set: an infinity or a NaN.
bool f16_finite(uint16_t h) {
    return (h & 0x7C00u) != 0x7C00u;
}

void put_factors(ByteWriter& w, const SpanFactors& f, int64_t rows, int64_t dim) {
    // Factors that get_factors would refuse for their span are not written.
    if (!factors_fit(f, rows, dim))
        throw std::invalid_argument("SEKV state: span factors of another shape or type than "
                                    "their span");
    w.put<uint32_t>(static_cast<uint32_t>(f.rank));
    w.put<uint32_t>(static_cast<uint32_t>(f.right_type));
    w.put_array(f.left.data(), f.left.size());
    w.put_array(f.right.data(), f.right.size());
}

SpanFactors get_factors(ByteReader& r, int64_t rows, int64_t dim) {
    SpanFactors f;
    f.rows = rows;
    f.dim = dim;
    const auto rank = r.get<uint32_t>();
    if (rank < 1 || rank > static_cast<uint32_t>(std::min<int64_t>(rows, dim)))
        r.fail("holds a factor rank of " + std::to_string(rank) + " for a span of " +
               std::to_string(rows) + " rows");
    f.rank = static_cast<int>(rank);
    const auto type = r.get<uint32_t>();
    if ((type != static_cast<uint32_t>(TensorType::F16) &&
         type != static_cast<uint32_t>(TensorType::Q8_0)) ||
        !right_factor_type_fits(static_cast<TensorType>(type), dim))
        r.fail("holds a right factor of type " + std::to_string(type) +
               " (F16, or Q8_0 for a head dimension a multiple of 32)");
    f.right_type = static_cast<TensorType>(type);
    f.left = r.get_array<uint16_t>(static_cast<uint64_t>(rows) * rank);
    f.right = r.get_array<uint8_t>(static_cast<uint64_t>(rank) * row_bytes(f.right_type, dim));
    // One infinity or NaN would poison every softmax the span enters: refused, so the state is
    // rebuilt. F16 values are checked whole, Q8_0 by its blocks' f16 scales (the int8 values
    // are finite by their type).
    bool finite = std::all_of(f.left.begin(), f.left.end(), f16_finite);
    if (f.right_type == TensorType::F16) {
        for (size_t i = 0; finite && i + 1 < f.right.size(); i += 2)
            finite = f16_finite(static_cast<uint16_t>(f.right[i] | (f.right[i + 1] << 8)));
    } else {
        const size_t block = traits(TensorType::Q8_0).block_bytes;
        for (size_t i = 0; finite && i + 1 < f.right.size(); i += block)
            finite = f16_finite(static_cast<uint16_t>(f.right[i] | (f.right[i + 1] << 8)));
    }
    if (!finite)
        r.fail("holds a factor that is not finite");
    return f;
}

// Summary rows are built f16-rounded (build_span), so f16 holds them exactly.
void put_summary(ByteWriter& w, const std::vector<float>& x) {
    const auto h = to_f16(x.data(), static_cast<int64_t>(x.size()), "SEKV state summary");
    w.put_array(h.data(), h.size());
}

std::vector<float> get_summary(ByteReader& r, uint64_t n) {
    const auto h = r.get_array<uint16_t>(n);
    if (!std::all_of(h.begin(), h.end(), f16_finite))
        r.fail("holds a summary row that is not finite");
    return from_f16(h.data(), static_cast<int64_t>(h.size()));
}
} // namespace

std::vector<uint8_t> encode_sekv_state(const SekvUnitState& s, const Fingerprint& fingerprint) {
    const auto& seg = s.segmentation;
    if (s.token_surprisal.size() != static_cast<size_t>(s.n_tokens) ||
        s.span_chars.size() != 2 * seg.spans.size() ||
        s.anchor_chars.size() != 2 * seg.anchors.size())
        throw std::invalid_argument("SEKV state: sizes do not match the segmentation");
    int n_kv = 0, d = 0;
    for (const auto& l : s.layers) {
        if (l.spans.size() != seg.spans.size())
            throw std::invalid_argument("SEKV state: layer spans do not match the segmentation");
        if (!l.spans.empty()) {
            n_kv = static_cast<int>(l.spans[0].k.size());
            d = n_kv ? static_cast<int>(l.spans[0].summary_k.size()) / n_kv : 0;
        }
    }
    ByteWriter w;
    w.put_array(kMagic, 8);
    w.put<uint32_t>(kVersion);
    w.put_array(fingerprint.data(), fingerprint.size());
    w.put_string(s.options_key);
    w.put<int64_t>(s.n_tokens);
    w.put<double>(s.alpha);
    w.put<double>(seg.threshold);
    w.put<uint32_t>(static_cast<uint32_t>(n_kv));
    w.put<uint32_t>(static_cast<uint32_t>(d));
    w.put_array(s.token_surprisal.data(), s.token_surprisal.size());
    w.put<uint32_t>(static_cast<uint32_t>(seg.anchors.size()));
    w.put_array(seg.anchors.data(), seg.anchors.size());
    w.put_array(s.anchor_chars.data(), s.anchor_chars.size());
    w.put<uint32_t>(static_cast<uint32_t>(seg.spans.size()));
    for (const auto& t : seg.spans) {
        w.put<int64_t>(t.begin);
        w.put<int64_t>(t.end);
    }
    w.put_array(s.span_chars.data(), s.span_chars.size());
    w.put<uint32_t>(static_cast<uint32_t>(s.layers.size()));
    for (const auto& l : s.layers) {
        w.put<uint32_t>(static_cast<uint32_t>(l.layer));
        for (size_t i = 0; i < l.spans.size(); ++i) {
            const auto& sp = l.spans[i];
            if (sp.begin != seg.spans[i].begin || sp.size != seg.spans[i].size() ||
                sp.k.size() != static_cast<size_t>(n_kv) ||
                sp.v.size() != static_cast<size_t>(n_kv) ||
                sp.summary_k.size() != static_cast<size_t>(n_kv) * d ||
                sp.summary_v.size() != static_cast<size_t>(n_kv) * d)
                throw std::invalid_argument("SEKV state: a span does not match its shape");
            put_summary(w, sp.summary_k);
            put_summary(w, sp.summary_v);
            for (int g = 0; g < n_kv; ++g) {
                put_factors(w, sp.k[static_cast<size_t>(g)], sp.size, d);
                put_factors(w, sp.v[static_cast<size_t>(g)], sp.size, d);
            }
        }
    }
    auto& b = w.bytes();
    const uint64_t h = XXH3_64bits(b.data(), b.size());
    w.put<uint64_t>(h);
    return std::move(w.bytes());
}

SekvUnitState decode_sekv_state(const uint8_t* data, size_t size, const SekvExpectation& e) {
    try {
        if (size < 8 + 4 + 16 + 8)
            throw BlobError("SEKV state is too short");
        uint64_t stored = 0;
        std::memcpy(&stored, data + size - 8, 8);
        if (stored != XXH3_64bits(data, size - 8))
            throw BlobError("SEKV state checksum mismatch (damaged)");
        ByteReader r(data, size - 8, "SEKV state");
        const auto magic = r.get_array<char>(8);
        if (std::memcmp(magic.data(), kMagic, 8) != 0)
            r.fail("has no SEKV magic");
        if (const auto v = r.get<uint32_t>(); v != kVersion)
            r.fail("has format version " + std::to_string(v) + ", expected " +
                   std::to_string(kVersion));
        const auto fp = r.get_array<uint8_t>(16);
        if (!std::equal(fp.begin(), fp.end(), e.fingerprint.begin()))
            r.fail("belongs to another model");
        SekvUnitState s;
        s.options_key = r.get_string();
        if (s.options_key != e.options_key)
            r.fail("was built with other options (" + s.options_key + ")");
        s.n_tokens = r.get<int64_t>();
        if (s.n_tokens != e.n_tokens)
            r.fail("covers " + std::to_string(s.n_tokens) + " tokens, the unit has " +
                   std::to_string(e.n_tokens));
        s.alpha = r.get<double>();
        s.segmentation.threshold = r.get<double>();
        const auto n_kv = r.get<uint32_t>(), d = r.get<uint32_t>();
        if (static_cast<int>(n_kv) != e.n_kv_head || static_cast<int>(d) != e.head_dim)
            r.fail("has another head shape");
        s.token_surprisal = r.get_array<float>(static_cast<uint64_t>(s.n_tokens));
        auto& seg = s.segmentation;
        const auto n_anchors = r.get<uint32_t>();
        seg.anchors = r.get_array<int64_t>(n_anchors);
        s.anchor_chars = r.get_array<int64_t>(2ull * n_anchors);
        const auto n_spans = r.get<uint32_t>();
        const auto ends = r.get_array<int64_t>(2ull * n_spans);
        int64_t prev = 0;
        for (uint32_t i = 0; i < n_spans; ++i) {
            const TokenSpan t{ends[2 * i], ends[2 * i + 1]};
            if (t.begin < prev || t.end <= t.begin || t.end > s.n_tokens)
                r.fail("holds a span outside its tokens or out of order");
            prev = t.end;
            seg.spans.push_back(t);
        }
        for (const auto a : seg.anchors)
            if (a < 0 || a >= s.n_tokens)
                r.fail("holds an anchor outside its tokens");
        // Every token not in a span is held at full resolution.
        size_t k = 0;
        for (int64_t i = 0; i < s.n_tokens; ++i) {
            while (k < seg.spans.size() && seg.spans[k].end <= i)
                ++k;
            if (k == seg.spans.size() || i < seg.spans[k].begin)
                seg.full_resolution.push_back(i);
        }
        s.span_chars = r.get_array<int64_t>(2ull * n_spans);
        const auto n_layers = r.get<uint32_t>();
        if (n_layers != e.layers.size())
            r.fail("holds " + std::to_string(n_layers) + " layers, expected " +
                   std::to_string(e.layers.size()));
        for (uint32_t l = 0; l < n_layers; ++l) {
            SekvLayerState ls;
            ls.layer = static_cast<int>(r.get<uint32_t>());
            if (ls.layer != e.layers[l])
                r.fail("holds layer " + std::to_string(ls.layer) + ", expected " +
                       std::to_string(e.layers[l]));
            for (const auto& t : seg.spans) {
                SekvSpan sp;
                sp.begin = static_cast<int32_t>(t.begin);
                sp.size = t.size();
                sp.summary_k = get_summary(r, static_cast<uint64_t>(n_kv) * d);
                sp.summary_v = get_summary(r, static_cast<uint64_t>(n_kv) * d);
                for (uint32_t g = 0; g < n_kv; ++g) {
                    sp.k.push_back(get_factors(r, sp.size, d));
                    sp.v.push_back(get_factors(r, sp.size, d));
                }
                ls.spans.push_back(std::move(sp));
            }
            s.layers.push_back(std::move(ls));
        }
        if (r.left() != 0)
            r.fail("has " + std::to_string(r.left()) + " trailing bytes");
        return s;
    } catch (const BlobError& err) {
        throw StateError(err.what());
    }
}

} // namespace spanscope
