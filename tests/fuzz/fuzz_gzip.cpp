// libFuzzer target for gzip-compressed documents: load_document on the input saved as
// "<scratch>.txt.gz" and as "<scratch>.html.gz" (gzip magic -> inflate, one or more members ->
// the inner loader the name and content choose), with a 1 MiB limit on the decompressed bytes.
// The rule: any input either loads or raises DocumentError — never crashes, reads out of
// bounds, hits undefined behaviour or throws anything else; a stream that inflates past the
// limit is refused, not held (a decompression bomb). What loads passes check_document
// (loader_fuzz_util.h) against the limit. Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"

#include <cstddef>
#include <cstdint>

namespace {
constexpr size_t kMaxBytes = size_t{1} << 20;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto options = spanscope::fuzz::fuzz_load_options(kMaxBytes);
    for (const char* name : {"input.txt.gz", "input.html.gz"}) {
        const spanscope::fuzz::ScratchFile file(name, data, size);
        try {
            const auto doc = spanscope::load_document(file.path(), options);
            spanscope::fuzz::check_document(doc, kMaxBytes, /*complete=*/true);
            const bool gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
            if (doc.gzip != gz || doc.text.size() > 8 * kMaxBytes + 1024)
                __builtin_trap();
        } catch (const spanscope::DocumentError&) {
            // Refused: corrupt or truncated stream, past the limit, or the inner loader's no.
        }
    }
    return 0;
}
