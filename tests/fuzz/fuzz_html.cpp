// libFuzzer target for the HTML loader (load_html: libxml2's HTML parser, charset from a BOM,
// the meta tag or uchardet, lists, tables, footnotes moved to their references).
// The rule: any non-empty byte string either loads or raises DocumentError — never crashes,
// reads out of bounds, hits undefined behaviour or throws anything else. What loads is valid
// UTF-8 with an offset map inside its text and its source (loader_fuzz_util.h), and no larger
// than 8 bytes of text per source byte (plus 1 KiB): markup only ever shrinks, a character
// grows to at most 3 bytes, a list label is a few bytes per <li>, so anything more is text
// multiplied. Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"
#include "storage/loader_html.h"

#include <libxml/parser.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool libxml2_ready = (xmlInitParser(), true); // as load_document does
    (void)libxml2_ready;
    if (size == 0)
        return 0; // load_document refuses an empty file before any loader sees it
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const auto doc = spanscope::load_html("input.html", bytes);
        spanscope::fuzz::check_document(doc, size, /*complete=*/false);
        if (doc.text.size() > 8 * size + 1024)
            __builtin_trap();
    } catch (const spanscope::DocumentError&) {
        // Refused: libxml2 made no document of it.
    }
    return 0;
}
