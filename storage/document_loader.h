// Loading documents into UTF-8 text: plain text (UTF-8, other encodings detected with uchardet
// and converted with iconv, or refused), Markdown (kept as its source text), HTML (text from
// libxml2's HTML parser), PDF (poppler-cpp, page by page), DOCX, ODT and EPUB (ZIP containers
// read with libzip, their XML with libxml2) and gzip-compressed files of these (zlib). Each loader
// keeps a map from offsets in the extracted text back to the source, so that a span of text can be
// highlighted in the original later.
#pragma once

#include "engine/text/text_input.h" // DocumentError

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spanscope {

enum class DocumentFormat { Text, Markdown, Html, Pdf, Docx, Odt, Epub };

/// "text", "markdown", "html", "pdf", "docx", "odt", "epub".
const char* format_name(DocumentFormat f);

/// One entry of the offset map: extracted text from byte `text_offset` on (up to the next
/// entry's text_offset) comes from the source at byte `source_offset` (of the decompressed
/// source, in the source's own encoding), on `page` (1-based, PDF only; 0 otherwise) and
/// `line` (1-based where known, 0 otherwise: the source line of text, Markdown and HTML, the
/// paragraph of DOCX and ODT, the line of an EPUB's spine documents joined in order). Entries are
/// sorted by text_offset and the first one has text_offset 0.
struct SourceAnchor {
    int64_t text_offset = 0;
    int64_t source_offset = 0;
    int32_t page = 0;
    int32_t line = 0;
};

struct LoadedDocument {
    std::string text; ///< UTF-8, valid, non-empty (not only whitespace)
    DocumentFormat format = DocumentFormat::Text;
    std::string source_encoding; ///< "UTF-8", or what uchardet detected and iconv converted
    bool gzip = false;           ///< the file was gzip-compressed
    int32_t pages = 0;           ///< PDF: number of pages; 0 otherwise
    std::vector<int32_t> pages_without_text; ///< PDF: 1-based pages with no text (nor by OCR)
    std::vector<int32_t> ocr_pages;    ///< PDF: 1-based pages without a text layer, read by OCR
    std::vector<std::string> warnings; ///< one line each, for the user (e.g. those pages)
    std::vector<SourceAnchor> offset_map;

    /// The anchor that covers text byte `offset` (binary search); offset_map must be non-empty.
    const SourceAnchor& anchor_at(int64_t offset) const;
};

struct LoadOptions {
    size_t max_bytes = 256u << 20; ///< most bytes read (after decompression)
    bool ocr = true;               ///< read PDF pages without a text layer by OCR (Tesseract)
    /// Called before each page OCR reads: (its 1-based index among them, how many they are).
    std::function<void(int page, int pages)> on_ocr_page;
    /// Set by another thread to stop OCR: load_document then throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
};

/// Load `path`, choosing the loader by content (PDF magic, gzip magic, a ZIP container's
/// parts: DOCX, ODT, EPUB) and by extension (.md/.markdown, .html/.htm/.xhtml, .docx, .odt,
/// .epub; a .gz name is looked at without its .gz).
/// Throws DocumentError (message starts with the path): missing or unreadable file, a
/// directory, an empty file or one with no text, a binary file, text in an encoding that cannot
/// be detected, a corrupt gzip stream or PDF, a PDF in which no page has a text layer, a
/// damaged, truncated or password-protected DOCX, ODT or EPUB (or one with DRM), a ZIP archive
/// that is none of these, a file larger than max_bytes or a container that inflates past it;
/// Cancelled (engine/kernels/cancel.h) when options.cancel is set while OCR reads a PDF.
LoadedDocument load_document(const std::string& path, const LoadOptions& options = {});

} // namespace spanscope
