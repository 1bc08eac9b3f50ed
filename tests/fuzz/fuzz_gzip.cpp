// libFuzzer target for gzip-compressed documents: load_document on the input saved as
// "<scratch>.txt.gz" and as "<scratch>.html.gz" (gzip magic -> inflate, one or more members ->
// the inner loader the name and content choose), with a 1 MiB limit on the decompressed bytes.
// The rule: any input either loads or raises DocumentError — never crashes, reads out of
// bounds, hits undefined behaviour or throws anything else; a stream that inflates past the
// limit is refused, not held (a decompression bomb). The target inflates the input itself
// (zlib, every member, at most the limit): what loads passes check_document
// (loader_fuzz_util.h) against that decompressed size, and a text or HTML document holds at
// most 8 bytes of text per decompressed byte (plus 1 KiB), the ratio fuzz_html allows (a
// character grows to at most 3 bytes, a list label is a few bytes per <li>). A ZIP container or
// PDF inside the gzip stream is inflated or drawn further by its loader (fuzz_zip, fuzz_pdf).
// Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace {

constexpr size_t kMaxBytes = size_t{1} << 20;

/// The bytes the gzip members of `data` decompress to, at most kMaxBytes + 1 (one more shows
/// the limit passed); decompression stops at the first error, as the loader's does.
size_t decompressed_size(const uint8_t* data, size_t size) {
    z_stream zs{};
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        __builtin_trap();
    std::string out(64 << 10, '\0');
    size_t total = 0, pos = 0;
    while (total <= kMaxBytes) {
        zs.next_in = const_cast<Bytef*>(data + pos);
        zs.avail_in = static_cast<uInt>(size - pos);
        zs.next_out = reinterpret_cast<Bytef*>(out.data());
        zs.avail_out = static_cast<uInt>(out.size());
        const int rc = inflate(&zs, Z_NO_FLUSH);
        pos = size - zs.avail_in;
        total += out.size() - zs.avail_out;
        if (rc == Z_OK)
            continue;
        // Another member follows (gzip magic), as the loader reads cat a.gz b.gz.
        if (rc == Z_STREAM_END && size - pos >= 2 && data[pos] == 0x1f && data[pos + 1] == 0x8b) {
            inflateReset(&zs);
            continue;
        }
        break;
    }
    inflateEnd(&zs);
    return std::min(total, kMaxBytes + 1);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto options = spanscope::fuzz::fuzz_load_options(kMaxBytes);
    const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    const size_t source = gz ? decompressed_size(data, size) : size;
    for (const char* name : {"input.txt.gz", "input.html.gz"}) {
        const spanscope::fuzz::ScratchFile file(name, data, size);
        try {
            const auto doc = spanscope::load_document(file.path(), options);
            if (doc.gzip != gz || source > kMaxBytes)
                __builtin_trap(); // loaded past the limit
            spanscope::fuzz::check_document(doc, source, /*complete=*/true);
            const bool read_directly = doc.format == spanscope::DocumentFormat::Text ||
                                       doc.format == spanscope::DocumentFormat::Markdown ||
                                       doc.format == spanscope::DocumentFormat::Html;
            if (read_directly && doc.text.size() > 8 * source + 1024)
                __builtin_trap();
        } catch (const spanscope::DocumentError&) {
            // Refused: corrupt or truncated stream, past the limit, or the inner loader's no.
        }
    }
    return 0;
}
