#include "storage/zoom_trace_blob.h"

#include "storage/byte_stream.h"

#include <xxhash.h>
#include <zlib.h>

#include <cstring>
#include <stdexcept>

namespace spanscope {

namespace {
constexpr char kMagic[8] = {'S', 'S', 'Z', 'O', 'O', 'M', 0, 0};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kVersionWithoutMass = 1; // still read: its heads have no attention mass
constexpr uint64_t kMaxTraceBytes = uint64_t{1} << 31; // refuse to inflate beyond 2 GiB

// Whether a head's masses are none, or one share in [0, 1] per span (with float rounding).
bool masses_valid(const ZoomHead& h) {
    if (h.mass.empty())
        return true;
    if (h.mass.size() != h.spans.size())
        return false;
    for (const float m : h.mass)
        if (!(m >= 0.0f && m <= 1.0001f))
            return false;
    return true;
}
} // namespace

int clear_invalid_masses(ZoomTrace& trace) {
    int cleared = 0;
    for (auto& st : trace.steps)
        for (auto& l : st.layers)
            for (auto& h : l.heads)
                if (!masses_valid(h)) {
                    h.mass.clear();
                    ++cleared;
                }
    return cleared;
}

std::vector<uint8_t> encode_zoom_trace(const StoredZoomTrace& t) {
    const auto& steps = t.trace.steps;
    if (t.tokens.size() != steps.size() || t.token_texts.size() != steps.size())
        throw std::invalid_argument("zoom trace: one token and one text per step");
    ByteWriter w;
    w.put_array(kMagic, 8);
    w.put<uint32_t>(kVersion);
    w.put<int32_t>(t.trace.n_spans);
    w.put<uint32_t>(static_cast<uint32_t>(t.sources.size()));
    for (const auto& s : t.sources) {
        w.put<int64_t>(s.document_id);
        w.put<int32_t>(s.unit);
        w.put<int32_t>(s.first_span);
        w.put<int32_t>(s.n_spans);
        w.put<int64_t>(s.offset);
    }
    w.put<uint32_t>(static_cast<uint32_t>(steps.size()));
    for (size_t i = 0; i < steps.size(); ++i) {
        const auto& st = steps[i];
        w.put<int32_t>(t.tokens[i]);
        w.put_string(t.token_texts[i]);
        w.put<int64_t>(st.fast_tier_bytes);
        w.put<int64_t>(st.host_tier_bytes);
        w.put<uint32_t>(static_cast<uint32_t>(st.layers.size()));
        for (const auto& l : st.layers) {
            w.put<uint32_t>(static_cast<uint32_t>(l.layer));
            w.put<uint32_t>(static_cast<uint32_t>(l.heads.size()));
            for (const auto& h : l.heads) {
                if (h.relevance.size() != h.spans.size())
                    throw std::invalid_argument("zoom trace: one relevance per span");
                if (!h.mass.empty() && h.mass.size() != h.spans.size())
                    throw std::invalid_argument("zoom trace: one attention mass per span, or none");
                if (!masses_valid(h))
                    throw std::invalid_argument("zoom trace: an attention share outside "
                                                "[0, 1]");
                w.put<uint32_t>(static_cast<uint32_t>(h.spans.size()));
                w.put_array(h.spans.data(), h.spans.size());
                w.put_array(h.relevance.data(), h.relevance.size());
                w.put<uint8_t>(h.mass.empty() ? 0 : 1);
                w.put_array(h.mass.data(), h.mass.size());
            }
        }
    }
    const uint64_t hash = XXH3_64bits(w.bytes().data(), w.bytes().size());
    w.put<uint64_t>(hash);
    const auto& raw = w.bytes();
    uLongf out_size = compressBound(static_cast<uLong>(raw.size()));
    std::vector<uint8_t> out(8 + out_size);
    const uint64_t raw_size = raw.size();
    std::memcpy(out.data(), &raw_size, 8);
    if (compress2(out.data() + 8, &out_size, raw.data(), static_cast<uLong>(raw.size()), 6) != Z_OK)
        throw std::runtime_error("zoom trace: zlib could not compress");
    out.resize(8 + out_size);
    return out;
}

StoredZoomTrace decode_zoom_trace(const std::vector<uint8_t>& blob) {
    try {
        if (blob.size() < 8)
            throw BlobError("zoom trace is too short");
        uint64_t raw_size = 0;
        std::memcpy(&raw_size, blob.data(), 8);
        // zlib's deflate expands at most ~1032:1, so a declared size beyond that is damage (the
        // size prefix lies outside the checksum).
        if (raw_size < 16 || raw_size > kMaxTraceBytes || raw_size > 1040 * blob.size() + 64)
            throw BlobError("zoom trace declares an impossible size");
        std::vector<uint8_t> raw(static_cast<size_t>(raw_size));
        uLongf got = static_cast<uLongf>(raw_size);
        if (uncompress(raw.data(), &got, blob.data() + 8, static_cast<uLong>(blob.size() - 8)) !=
                Z_OK ||
            got != raw_size)
            throw BlobError("zoom trace does not decompress (damaged)");
        uint64_t stored = 0;
        std::memcpy(&stored, raw.data() + raw.size() - 8, 8);
        if (stored != XXH3_64bits(raw.data(), raw.size() - 8))
            throw BlobError("zoom trace checksum mismatch (damaged)");
        ByteReader r(raw.data(), raw.size() - 8, "zoom trace");
        const auto magic = r.get_array<char>(8);
        if (std::memcmp(magic.data(), kMagic, 8) != 0)
            r.fail("has no zoom trace magic");
        const auto version = r.get<uint32_t>();
        if (version != kVersion && version != kVersionWithoutMass)
            r.fail("has format version " + std::to_string(version));
        StoredZoomTrace t;
        t.trace.n_spans = r.get<int32_t>();
        if (t.trace.n_spans < 0)
            r.fail("has a negative span count");
        const auto n_sources = r.get<uint32_t>();
        for (uint32_t i = 0; i < n_sources; ++i) {
            ZoomSource s;
            s.document_id = r.get<int64_t>();
            s.unit = r.get<int32_t>();
            s.first_span = r.get<int32_t>();
            s.n_spans = r.get<int32_t>();
            s.offset = r.get<int64_t>();
            if (s.first_span < 0 || s.n_spans < 0 ||
                static_cast<int64_t>(s.first_span) + s.n_spans > t.trace.n_spans)
                r.fail("holds a section whose spans lie outside the context");
            t.sources.push_back(s);
        }
        const auto n_steps = r.get<uint32_t>();
        if (n_steps > r.left())
            r.fail("holds a step count that exceeds its size");
        for (uint32_t i = 0; i < n_steps; ++i) {
            ZoomStep st;
            t.tokens.push_back(r.get<int32_t>());
            t.token_texts.push_back(r.get_string());
            st.fast_tier_bytes = r.get<int64_t>();
            st.host_tier_bytes = r.get<int64_t>();
            const auto n_layers = r.get<uint32_t>();
            if (n_layers > r.left())
                r.fail("holds a layer count that exceeds its size");
            for (uint32_t l = 0; l < n_layers; ++l) {
                LayerZoom lz;
                lz.layer = static_cast<int>(r.get<uint32_t>());
                const auto n_heads = r.get<uint32_t>();
                if (n_heads > r.left())
                    r.fail("holds a head count that exceeds its size");
                for (uint32_t h = 0; h < n_heads; ++h) {
                    ZoomHead zh;
                    const auto n = r.get<uint32_t>();
                    zh.spans = r.get_array<int32_t>(n);
                    zh.relevance = r.get_array<float>(n);
                    if (version >= 2) {
                        const auto has_mass = r.get<uint8_t>();
                        if (has_mass > 1)
                            r.fail("holds an attention-mass flag of " + std::to_string(has_mass));
                        if (has_mass)
                            zh.mass = r.get_array<float>(n);
                        if (!masses_valid(zh))
                            r.fail("holds an attention share outside [0, 1]");
                    }
                    for (size_t i = 0; i < zh.spans.size(); ++i) {
                        if (zh.spans[i] < 0 || zh.spans[i] >= t.trace.n_spans)
                            r.fail("holds a span id outside the context");
                        if (i > 0 && zh.spans[i] <= zh.spans[i - 1])
                            r.fail("holds a head's span ids out of order or twice");
                    }
                    lz.heads.push_back(std::move(zh));
                }
                st.layers.push_back(std::move(lz));
            }
            t.trace.steps.push_back(std::move(st));
        }
        if (r.left() != 0)
            r.fail("has trailing bytes");
        return t;
    } catch (const BlobError& e) {
        throw ZoomTraceError(e.what());
    }
}

} // namespace spanscope
