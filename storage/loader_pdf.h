// PDF: the text layer of each page, from poppler-cpp, in the reading order pdftotext uses; pages
// without one (scans) read by OCR.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

/// Load `bytes` (the decompressed file content) as PDF, page by page, with poppler's default
/// text order (neither physical layout nor raw content order: the order of `pdftotext` without
/// -layout or -raw). Pages are separated by a blank line; each page starts an anchor that
/// carries its 1-based page number (source_offset 0: a PDF's text has no byte offset). Pages
/// without a text layer are read by OCR (page_ocr.h) when options.ocr is set, in page order,
/// each announced to options.on_ocr_page first, and listed in ocr_pages with one warning for
/// them all; pages with no text either way are listed in pages_without_text with a warning
/// each. poppler's error messages are silenced (they would go to stderr).
/// Throws DocumentError (message starts with `path`): not a PDF poppler can read (corrupt,
/// truncated), encrypted with a password, no pages, no text on any page (no text layer, and OCR
/// off, not installed or finding nothing), a page OCR cannot render, a file larger than 2 GiB;
/// Cancelled when options.cancel is set during OCR.
LoadedDocument load_pdf(const std::string& path, const std::string& bytes,
                        const LoadOptions& options);

} // namespace spanscope
