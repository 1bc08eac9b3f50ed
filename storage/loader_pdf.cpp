#include "storage/loader_pdf.h"

#include "storage/loader_text.h" // has_visible_text, first_invalid_utf8

#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <climits>
#include <memory>
#include <mutex>

namespace spanscope {

namespace {

void quiet(const std::string&, void*) {}

/// poppler reports every oddity of a damaged file on stderr unless told otherwise. The handler
/// is process-wide; Spanscope has no other use for poppler's messages.
void silence_poppler() {
    static std::once_flag once;
    std::call_once(once, [] { poppler::set_debug_error_function(quiet, nullptr); });
}

/// A page's text as valid UTF-8 without control characters other than tab and newline (form
/// feeds and broken ToUnicode maps would otherwise reach the model), trailing whitespace
/// trimmed.
std::string clean_page_text(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    std::string_view rest = s;
    while (!rest.empty()) {
        const size_t bad = first_invalid_utf8(rest);
        const std::string_view good = rest.substr(0, bad);
        for (char c : good) {
            const auto u = static_cast<unsigned char>(c);
            if (c == '\f' || c == '\r' || c == '\v')
                out += '\n';
            else if (u >= 0x20 || c == '\t' || c == '\n')
                out += c;
        }
        if (bad == std::string_view::npos)
            break;
        out += "\xef\xbf\xbd"; // U+FFFD for the invalid byte
        rest.remove_prefix(bad + 1);
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\n' || out.back() == '\t'))
        out.pop_back();
    return out;
}

} // namespace

LoadedDocument load_pdf(const std::string& path, const std::string& bytes) {
    silence_poppler();
    if (bytes.size() > static_cast<size_t>(INT_MAX))
        throw DocumentError(path + ": is too large for the PDF reader (more than 2 GiB)");
    // poppler reads from `bytes` without copying it; `bytes` outlives the document.
    const std::unique_ptr<poppler::document> pdf(
        poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
    if (!pdf)
        throw DocumentError(path + ": is not a readable PDF (corrupt, truncated or not a PDF)");
    if (pdf->is_locked())
        throw DocumentError(path + ": is an encrypted PDF that needs a password; Spanscope "
                                   "cannot open it (save an unprotected copy first)");
    const int pages = pdf->pages();
    if (pages <= 0)
        throw DocumentError(path + ": is a PDF with no pages (empty or damaged)");

    LoadedDocument doc;
    doc.format = DocumentFormat::Pdf;
    doc.source_encoding = "PDF";
    doc.pages = pages;
    for (int i = 0; i < pages; ++i) {
        const int32_t number = i + 1;
        const std::unique_ptr<poppler::page> page(pdf->create_page(i));
        std::string text;
        if (page) {
            // pdftotext's default order: reading order by text flows, no layout spaces.
            const poppler::byte_array utf8 =
                page->text(poppler::rectf(), poppler::page::non_raw_non_physical_layout).to_utf8();
            text = clean_page_text(std::string(utf8.begin(), utf8.end()));
        }
        if (!has_visible_text(text)) {
            doc.pages_without_text.push_back(number);
            doc.warnings.push_back("page " + std::to_string(number) +
                                   " has no text layer (scanned image?)");
            continue;
        }
        if (!doc.text.empty())
            doc.text += "\n\n";
        doc.offset_map.push_back({static_cast<int64_t>(doc.text.size()), 0, number, 0});
        doc.text += text;
    }
    if (doc.text.empty())
        throw DocumentError(
            path + ": the PDF has no text layer (" + std::to_string(pages) +
            (pages == 1 ? " page" : " pages") +
            " of scanned images?); it needs OCR first, which Spanscope does not do");
    return doc;
}

} // namespace spanscope
