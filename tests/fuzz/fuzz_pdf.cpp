// libFuzzer target for the PDF loader (load_pdf: poppler-cpp's document and page text), reached
// through load_document on the input saved as "<scratch>.pdf" (the name alone chooses the PDF
// loader, so that inputs without the %PDF- magic reach poppler's own refusal too), OCR off
// (Tesseract is not what is tested) and a 1 MiB limit on the file.
// The rule: any input either loads or raises DocumentError (not a PDF poppler can read,
// encrypted, no pages, no text on any page) — never crashes, reads out of bounds, hits
// undefined behaviour or throws anything else. What loads passes check_document
// (loader_fuzz_util.h): valid UTF-8, anchors in order inside the text, page numbers from 1 and
// no more than one anchor per page. Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"

#include <cstddef>
#include <cstdint>

namespace {
constexpr size_t kMaxBytes = size_t{1} << 20;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const spanscope::fuzz::ScratchFile file("input.pdf", data, size);
    try {
        const auto doc =
            spanscope::load_document(file.path(), spanscope::fuzz::fuzz_load_options(kMaxBytes));
        spanscope::fuzz::check_document(doc, size, /*complete=*/true);
        if (doc.format != spanscope::DocumentFormat::Pdf)
            __builtin_trap();
        int32_t previous_page = 0;
        for (const auto& a : doc.offset_map) {
            if (a.page < 1 || a.page <= previous_page)
                __builtin_trap(); // one anchor per page, pages in order
            previous_page = a.page;
        }
    } catch (const spanscope::DocumentError&) {
        // Refused: damaged, truncated, encrypted, no pages or no text layer.
    }
    return 0;
}
