// libFuzzer target for the zoom trace reader: decode_zoom_trace() on any bytes either returns a
// trace whose every span id, count and size is consistent, or throws ZoomTraceError (its
// documented error) — never crashes, reads out of bounds, inflates or allocates for a forged
// size, or throws anything else.
//
// Input: a mode byte, then:
//   mode % 3 == 0: the blob as stored (u64 declared size + zlib stream), decoded as it is;
//   mode % 3 == 1: the uncompressed stream without its checksum: the target appends the XXH3,
//                  compresses it and declares its true size, so mutations reach the field checks;
//   mode % 3 == 2: a u64 declared size, then the stream as in 1: sealed and compressed, but with
//                  the declared size given (the size prefix lies outside the checksum).
// A trace the reader accepts must be one the writer writes again and the reader reads back.
// Build and run: docs/fuzzing.md.
#include "storage/zoom_trace_blob.h"

#include <xxhash.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace spanscope;

namespace {

// u64 declared size, then the zlib stream of `raw` followed by its XXH3-64.
std::vector<uint8_t> seal(std::vector<uint8_t> raw, uint64_t declared, bool true_size) {
    const uint64_t h = XXH3_64bits(raw.data(), raw.size());
    raw.resize(raw.size() + 8);
    std::memcpy(raw.data() + raw.size() - 8, &h, 8);
    uLongf n = compressBound(static_cast<uLong>(raw.size()));
    std::vector<uint8_t> out(8 + n);
    if (compress2(out.data() + 8, &n, raw.data(), static_cast<uLong>(raw.size()), 1) != Z_OK)
        __builtin_trap();
    out.resize(8 + n);
    const uint64_t size = true_size ? raw.size() : declared;
    std::memcpy(out.data(), &size, 8);
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1)
        return 0;
    const int mode = data[0] % 3;
    std::vector<uint8_t> rest(data + 1, data + size);
    std::vector<uint8_t> blob;
    if (mode == 0) {
        blob = std::move(rest);
    } else if (mode == 1) {
        blob = seal(std::move(rest), 0, true);
    } else {
        if (rest.size() < 8)
            return 0;
        uint64_t declared = 0;
        std::memcpy(&declared, rest.data(), 8);
        blob = seal(std::vector<uint8_t>(rest.begin() + 8, rest.end()), declared, false);
    }
    StoredZoomTrace t;
    try {
        t = decode_zoom_trace(blob);
    } catch (const ZoomTraceError&) {
        return 0; // refused: the expected outcome for most inputs
    }
    const auto& steps = t.trace.steps;
    if (t.trace.n_spans < 0 || t.tokens.size() != steps.size() ||
        t.token_texts.size() != steps.size())
        __builtin_trap();
    for (const auto& s : t.sources)
        if (s.first_span < 0 || s.n_spans < 0 ||
            int64_t{s.first_span} + s.n_spans > t.trace.n_spans)
            __builtin_trap();
    volatile uint64_t sink = 0; // unsigned: the sums of forged values wrap, defined
    volatile float fsink = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
        sink = sink + static_cast<uint64_t>(t.tokens[i]) +
               static_cast<uint64_t>(steps[i].fast_tier_bytes) +
               static_cast<uint64_t>(steps[i].host_tier_bytes);
        for (const char c : t.token_texts[i])
            sink = sink + static_cast<unsigned char>(c);
        for (const auto& l : steps[i].layers)
            for (const auto& h : l.heads) {
                if (h.relevance.size() != h.spans.size() ||
                    (!h.mass.empty() && h.mass.size() != h.spans.size()))
                    __builtin_trap();
                for (size_t j = 0; j < h.spans.size(); ++j) {
                    if (h.spans[j] < 0 || h.spans[j] >= t.trace.n_spans ||
                        (j > 0 && h.spans[j] <= h.spans[j - 1]))
                        __builtin_trap();
                    fsink = fsink + h.relevance[j] + (h.mass.empty() ? 0.0f : h.mass[j]);
                }
            }
    }
    // encode_zoom_trace throws std::invalid_argument for a trace it would not write: escaping
    // here, that is a finding too (the reader accepted what the writer refuses).
    const auto again = decode_zoom_trace(encode_zoom_trace(t));
    if (again.trace.steps.size() != steps.size() || again.sources.size() != t.sources.size())
        __builtin_trap();
    return 0;
}
