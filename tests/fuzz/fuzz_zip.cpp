// libFuzzer target for the ZIP-based loaders (DOCX, ODT, EPUB: libzip over the bytes, their XML
// parts through libxml2), reached through load_document as a user's file reaches them, with an
// 8 MiB limit on the bytes inflated. The container's content chooses the loader (its mimetype
// entry, a DOCX's main part); for the name-based fallbacks the file is called .docx, .epub or
// .odt after the first of word/document.xml, META-INF/container.xml the bytes contain (.odt
// otherwise). Inputs that are not ZIP archives (no "PK" magic) are left to the other targets.
// The rule: any input either loads or raises DocumentError — never crashes, reads out of
// bounds, hits undefined behaviour or throws anything else; an archive that inflates past the
// limit is refused (a ZIP bomb). What loads passes check_document (loader_fuzz_util.h) and
// holds at most 8 bytes of text per byte the limit lets inflate.
// Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {
constexpr size_t kMaxBytes = size_t{8} << 20;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    if (!bytes.starts_with("PK"))
        return 0;
    const char* name = bytes.find("word/document.xml") != std::string_view::npos ? "input.docx"
                       : bytes.find("META-INF/container.xml") != std::string_view::npos
                           ? "input.epub"
                           : "input.odt";
    const spanscope::fuzz::ScratchFile file(name, data, size);
    try {
        const auto doc =
            spanscope::load_document(file.path(), spanscope::fuzz::fuzz_load_options(kMaxBytes));
        spanscope::fuzz::check_document(doc, kMaxBytes, /*complete=*/true);
        // At most 8 bytes of text per byte inflated (markup only shrinks, a list label is a
        // few bytes per paragraph): anything more is text multiplied.
        if (doc.text.size() > 8 * kMaxBytes + 1024)
            __builtin_trap();
    } catch (const spanscope::DocumentError&) {
        // Refused: damaged, truncated, encrypted, too large, or not one of the three kinds.
    }
    return 0;
}
