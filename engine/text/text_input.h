// Reading plain-text documents given by the user, with a clear error for every way a file can
// be unusable, and the UTF-8 check every reader of text shares. (Richer formats — Markdown, HTML,
// PDF, gzip — come with the project store.)
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace spanscope {

/// A document that cannot be used; the message starts with the path and says why.
class DocumentError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// True if `s` is valid UTF-8 (no overlongs, no surrogates, <= U+10FFFF; RFC 3629 §3).
bool is_valid_utf8(std::string_view s);

/// Read `path` as UTF-8 text (a leading UTF-8 BOM is dropped, CRLF kept as is).
/// Throws DocumentError: missing/unreadable file, a directory or other non-regular file, a
/// binary file (NUL byte),
/// invalid UTF-8 (with the byte offset), or a document with no non-whitespace text.
/// max_bytes bounds what is read (default 64 MiB).
std::string read_text_document(const std::string& path, size_t max_bytes = 64u << 20);

} // namespace spanscope
