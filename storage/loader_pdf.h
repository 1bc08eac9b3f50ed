// PDF: the text layer of each page, from poppler-cpp, in the reading order pdftotext uses.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

/// Load `bytes` (the decompressed file content) as PDF, page by page, with poppler's default
/// text order (neither physical layout nor raw content order: the order of `pdftotext` without
/// -layout or -raw). Pages are separated by a blank line; each page starts an anchor that
/// carries its 1-based page number (source_offset 0: a PDF's text has no byte offset). Pages
/// with no text are listed in pages_without_text with a warning each. poppler's error messages
/// are silenced (they would go to stderr).
/// Throws DocumentError (message starts with `path`): not a PDF poppler can read (corrupt,
/// truncated), encrypted with a password, no pages, no page with a text layer (scanned images:
/// OCR needed), a file larger than 2 GiB.
LoadedDocument load_pdf(const std::string& path, const std::string& bytes);

} // namespace spanscope
