// Plain text and Markdown: UTF-8 kept as it is, UTF-16/32 with a byte-order mark and other
// encodings (detected with uchardet) converted with iconv, binary files refused. Also the text
// helpers the other loaders share (encoding detection, visible-text test).
#pragma once

#include "storage/document_loader.h"

#include <string>
#include <string_view>
#include <vector>

namespace spanscope {

/// Load `bytes` (the decompressed file content, non-empty) as plain text or Markdown (`format`;
/// Markdown is kept as its source text). A leading UTF-8 BOM is dropped; UTF-16/UTF-32 with a
/// BOM, UTF-16 without one (recognised by its NUL bytes) and other encodings that uchardet
/// detects are converted to UTF-8. The offset map has one anchor per source line (and one per
/// 4 KiB of a longer line when converted), mapping text bytes to source bytes.
/// Throws DocumentError (message starts with `path`): a binary file (NUL bytes that are not
/// UTF-16, or many control bytes), an encoding uchardet cannot detect or iconv cannot convert,
/// an invalid byte sequence in the detected encoding.
LoadedDocument load_text(const std::string& path, const std::string& bytes, DocumentFormat format);

/// The character set uchardet guesses for `bytes` (an iconv name such as "WINDOWS-1252"), or ""
/// when it cannot tell.
std::string detect_encoding(std::string_view bytes);

/// Text converted to UTF-8 with anchors into the source.
struct ConvertedText {
    std::string text;
    std::vector<SourceAnchor> anchors; ///< one per source line at least (line numbers 1-based)
};

/// Convert `bytes` from byte `start` on (after a byte-order mark, say) from `encoding` (an
/// iconv name) to UTF-8 with iconv, one anchor per source line and per 4 KiB of a longer line;
/// source offsets count bytes of `bytes`.
/// Throws DocumentError (message starts with `path`): iconv does not know `encoding`, an invalid
/// or incomplete byte sequence (with its byte offset).
ConvertedText convert_to_utf8(const std::string& path, std::string_view bytes, size_t start,
                              const std::string& encoding);

/// Bytes per code unit of an iconv encoding name as far as newlines go: 2 for UTF-16/UCS-2, 4
/// for UTF-32/UCS-4, 1 for the others (ASCII-compatible: a newline is the byte 0x0A).
size_t code_unit_bytes(const std::string& encoding);

/// True if `s` (UTF-8) has a character that is not whitespace (ASCII whitespace, no-break and
/// other Unicode spaces, BOM).
bool has_visible_text(std::string_view s);

/// Byte offset of the first invalid UTF-8 sequence in `s`, std::string_view::npos if none.
size_t first_invalid_utf8(std::string_view s);

} // namespace spanscope
