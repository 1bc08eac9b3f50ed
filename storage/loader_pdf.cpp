#include "storage/loader_pdf.h"

#include "storage/loader_text.h" // has_visible_text, first_invalid_utf8
#include "storage/page_ocr.h"

#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

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

/// "page 3 has" / "pages 2, 5-7 have": numbers ascending.
std::string page_list(const std::vector<int32_t>& numbers) {
    std::string list;
    for (size_t i = 0; i < numbers.size();) {
        size_t j = i;
        while (j + 1 < numbers.size() && numbers[j + 1] == numbers[j] + 1)
            ++j;
        if (!list.empty())
            list += ", ";
        list += std::to_string(numbers[i]);
        if (j > i)
            list += "\u2013" + std::to_string(numbers[j]);
        i = j + 1;
    }
    return (numbers.size() == 1 ? "page " : "pages ") + list +
           (numbers.size() == 1 ? " has" : " have");
}

} // namespace

LoadedDocument load_pdf(const std::string& path, const std::string& bytes,
                        const LoadOptions& options) {
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

    // The text layer of every page first; the pages without one are then read by OCR.
    std::vector<std::string> texts(static_cast<size_t>(pages));
    std::vector<int32_t> without_layer;
    for (int i = 0; i < pages; ++i) {
        const std::unique_ptr<poppler::page> page(pdf->create_page(i));
        if (page) {
            // pdftotext's default order: reading order by text flows, no layout spaces.
            const poppler::byte_array utf8 =
                page->text(poppler::rectf(), poppler::page::non_raw_non_physical_layout).to_utf8();
            texts[static_cast<size_t>(i)] = clean_page_text(std::string(utf8.begin(), utf8.end()));
        }
        if (!has_visible_text(texts[static_cast<size_t>(i)]))
            without_layer.push_back(i + 1);
    }

    LoadedDocument doc;
    doc.format = DocumentFormat::Pdf;
    doc.source_encoding = "PDF";
    doc.pages = pages;
    std::string ocr_unavailable;
    std::map<int32_t, std::string> failed; // pages OCR could not read, and why
    if (!without_layer.empty() && options.ocr) {
        PageOcr ocr;
        if (!ocr.available()) {
            ocr_unavailable = ocr.unavailable_reason();
        } else {
            const int total = static_cast<int>(without_layer.size());
            for (int k = 0; k < total; ++k) {
                const int32_t number = without_layer[static_cast<size_t>(k)];
                if (options.on_ocr_page)
                    options.on_ocr_page(k + 1, total);
                const std::unique_ptr<poppler::page> page(pdf->create_page(number - 1));
                if (!page)
                    continue;
                // A page OCR cannot read costs that page, not the document.
                std::string text;
                try {
                    text = clean_page_text(ocr.read(*page, path, number, options.cancel));
                } catch (const DocumentError& e) {
                    failed[number] = e.what();
                    continue;
                }
                if (has_visible_text(text)) {
                    texts[static_cast<size_t>(number - 1)] = std::move(text);
                    doc.ocr_pages.push_back(number);
                }
            }
        }
    }
    for (int i = 0; i < pages; ++i) {
        const int32_t number = i + 1;
        const std::string& text = texts[static_cast<size_t>(i)];
        if (!has_visible_text(text)) {
            doc.pages_without_text.push_back(number);
            continue;
        }
        if (!doc.text.empty())
            doc.text += "\n\n";
        doc.offset_map.push_back({static_cast<int64_t>(doc.text.size()), 0, number, 0});
        doc.text += text;
    }
    if (!doc.ocr_pages.empty())
        doc.warnings.push_back(page_list(doc.ocr_pages) + " no text layer; read by OCR " +
                               "(Tesseract, English): its words may differ from the scan");
    const std::string why_empty = !options.ocr ? "OCR is off"
                                  : !ocr_unavailable.empty()
                                      ? "OCR is not available: " + ocr_unavailable
                                      : "OCR found no text on it";
    for (const int32_t number : doc.pages_without_text) {
        const auto f = failed.find(number);
        doc.warnings.push_back(f != failed.end() ? f->second
                                                 : "page " + std::to_string(number) +
                                                       " has no text layer (" + why_empty + ")");
    }
    if (doc.text.empty())
        throw DocumentError(path + ": the PDF has no text layer (" + std::to_string(pages) +
                            (pages == 1 ? " page" : " pages") + " of scanned images?) and " +
                            (options.ocr && ocr_unavailable.empty()
                                 ? "OCR found no text in it"
                                 : "it needs OCR: " + why_empty));
    return doc;
}

} // namespace spanscope
