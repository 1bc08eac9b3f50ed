// libFuzzer target for the plain-text loader (load_text: UTF-8 kept, byte-order marks,
// UTF-16/32, encodings detected by uchardet and converted by iconv, binary files refused).
// The rule: any non-empty byte string either loads or raises DocumentError — never crashes,
// reads out of bounds, hits undefined behaviour or throws anything else. What loads is valid
// UTF-8 without NUL, at most 4 bytes of text per source byte, with an offset map inside its
// text and its source (loader_fuzz_util.h). Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"
#include "storage/loader_text.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0)
        return 0; // load_document refuses an empty file before any loader sees it
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        // Markdown is loaded by the same code (kept as its source text); only the format differs.
        const auto doc = spanscope::load_text("input.txt", bytes, spanscope::DocumentFormat::Text);
        spanscope::fuzz::check_document(doc, size, /*complete=*/false);
        if (doc.text.size() > 4 * size || doc.text.find('\0') != std::string::npos)
            __builtin_trap();
    } catch (const spanscope::DocumentError&) {
        // Refused: binary, undetectable or invalid encoding.
    }
    return 0;
}
