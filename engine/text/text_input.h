// Reading plain-text documents given by the user, with a clear error for every way a file can
// be unusable. (Richer formats — Markdown, HTML, PDF, gzip — come with the project store.)
#pragma once

#include <stdexcept>
#include <string>

namespace spanscope {

/// A document that cannot be used; the message starts with the path and says why.
class DocumentError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Read `path` as UTF-8 text (a leading UTF-8 BOM is dropped, CRLF kept as is).
/// Throws DocumentError: missing/unreadable file, a directory or other non-regular file, a
/// binary file (NUL byte),
/// invalid UTF-8 (with the byte offset), or a document with no non-whitespace text.
/// max_bytes bounds what is read (default 64 MiB).
std::string read_text_document(const std::string& path, size_t max_bytes = 64u << 20);

} // namespace spanscope
