#include "storage/loader_text.h"

#include "engine/text/text_input.h" // is_valid_utf8

#include <uchardet/uchardet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iconv.h>
#include <memory>

namespace spanscope {

namespace {

constexpr std::string_view kUtf8Bom = "\xef\xbb\xbf";

/// Whether the code unit at `p` (of `unit` bytes) is U+000A; `le` says little-endian.
bool is_newline_unit(const unsigned char* p, size_t unit, bool le) {
    if (unit == 1)
        return p[0] == '\n';
    for (size_t i = 0; i < unit; ++i) {
        const unsigned char want = (le ? i == 0 : i == unit - 1) ? '\n' : 0;
        if (p[i] != want)
            return false;
    }
    return true;
}

/// C0 control bytes that text does not contain (all but tab, LF, VT, FF, CR, backspace for
/// overstrike and ESC for terminal colours), counted in the first 64 KiB.
bool mostly_control_bytes(std::string_view s) {
    const std::string_view head = s.substr(0, 1u << 16);
    size_t controls = 0;
    for (unsigned char c : head)
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\v' && c != '\f' && c != '\r' &&
            c != '\b' && c != 0x1b)
            ++controls;
    // Random bytes have about 10 % of them; real text, next to none.
    return controls * 20 > head.size();
}

/// UTF-16 without a byte-order mark: mostly ASCII text has a NUL in every other byte. Returns
/// "UTF-16LE", "UTF-16BE" or "".
std::string guess_bomless_utf16(std::string_view s) {
    if (s.size() < 4 || s.size() % 2 != 0)
        return "";
    const std::string_view head = s.substr(0, 1u << 16);
    size_t pairs = 0, high_zero_le = 0, high_zero_be = 0, both_zero = 0;
    for (size_t i = 0; i + 1 < head.size(); i += 2, ++pairs) {
        const bool z0 = head[i] == '\0', z1 = head[i + 1] == '\0';
        both_zero += z0 && z1;
        high_zero_le += !z0 && z1;
        high_zero_be += z0 && !z1;
    }
    if (both_zero > 0) // U+0000 does not occur in text
        return "";
    if (high_zero_le * 10 >= pairs * 7)
        return "UTF-16LE";
    if (high_zero_be * 10 >= pairs * 7)
        return "UTF-16BE";
    return "";
}

/// One anchor per line of UTF-8 text that starts at byte `shift` of the source.
std::vector<SourceAnchor> line_anchors(std::string_view text, int64_t shift) {
    std::vector<SourceAnchor> anchors;
    anchors.push_back({0, shift, 0, 1});
    int32_t line = 1;
    for (size_t i = text.find('\n'); i != std::string_view::npos; i = text.find('\n', i + 1))
        if (i + 1 < text.size())
            anchors.push_back(
                {static_cast<int64_t>(i + 1), static_cast<int64_t>(i + 1) + shift, 0, ++line});
    return anchors;
}

/// Whether non-UTF-8 bytes look like damaged UTF-8 rather than another encoding: more valid
/// multi-byte UTF-8 sequences than invalid bytes. (In Latin-1 or Windows-1252 text, valid UTF-8
/// sequences need a letter such as Ã followed by a symbol, which real text rarely has.)
bool mostly_utf8(std::string_view s) {
    size_t valid = 0, invalid = 0;
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (len > 1 && i + len <= s.size() && is_valid_utf8(s.substr(i, len))) {
            ++valid;
            i += len;
        } else {
            ++invalid;
            ++i;
        }
    }
    return valid > invalid;
}

struct IconvCloser {
    void operator()(void* cd) const { iconv_close(static_cast<iconv_t>(cd)); }
};

} // namespace

size_t first_invalid_utf8(std::string_view s) {
    // Check character by character: a valid prefix check would not say where the error is.
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (i + len > s.size() || !is_valid_utf8(s.substr(i, len)))
            return i;
        i += len;
    }
    return std::string_view::npos;
}

bool has_visible_text(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            ++i;
            continue;
        }
        if (c < 0x80)
            return true;
        const size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        const std::string_view ch = s.substr(i, len);
        // U+00A0, U+1680, U+2000..U+200B, U+2028, U+2029, U+202F, U+205F, U+3000, U+FEFF.
        const auto last = ch.size() == 3 ? static_cast<unsigned char>(ch[2]) : 0u;
        const bool space =
            ch == "\xc2\xa0" || ch == "\xe1\x9a\x80" ||
            (ch.starts_with("\xe2\x80") &&
             ((last >= 0x80 && last <= 0x8b) || last == 0xa8 || last == 0xa9 || last == 0xaf)) ||
            ch == "\xe2\x81\x9f" || ch == "\xe3\x80\x80" || ch == kUtf8Bom;
        if (!space)
            return true;
        i += len;
    }
    return false;
}

size_t code_unit_bytes(const std::string& encoding) {
    std::string e;
    for (char c : encoding)
        e += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    if (e.find("UTF-16") != std::string::npos || e.find("UCS-2") != std::string::npos)
        return 2;
    if (e.find("UTF-32") != std::string::npos || e.find("UCS-4") != std::string::npos)
        return 4;
    return 1;
}

std::string detect_encoding(std::string_view bytes) {
    std::unique_ptr<uchardet, void (*)(uchardet_t)> ud(uchardet_new(), uchardet_delete);
    if (!ud)
        return "";
    // The first MiB is enough to decide and bounds the time spent on a large file.
    const std::string_view head = bytes.substr(0, 1u << 20);
    if (uchardet_handle_data(ud.get(), head.data(), head.size()) != 0)
        return "";
    uchardet_data_end(ud.get());
    const char* cs = uchardet_get_charset(ud.get());
    return cs ? cs : "";
}

ConvertedText convert_to_utf8(const std::string& path, std::string_view bytes, size_t start,
                              const std::string& encoding) {
    iconv_t raw = iconv_open("UTF-8", encoding.c_str());
    if (raw == reinterpret_cast<iconv_t>(-1))
        throw DocumentError(path + ": is in the encoding " + encoding +
                            ", which cannot be converted to UTF-8 here");
    const std::unique_ptr<void, IconvCloser> cd(raw);

    const size_t unit = code_unit_bytes(encoding);
    // UTF-16/32 without an explicit byte order is big-endian unless a BOM said otherwise; the
    // callers pass "UTF-16LE" etc. after a BOM.
    const bool le = encoding.size() >= 2 && (encoding.ends_with("LE") || encoding.ends_with("le"));
    const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size();
    constexpr size_t kMaxSegment = 4096;

    ConvertedText out;
    out.text.reserve(n + n / 2);
    int32_t line = 1;
    size_t pos = start;
    while (pos < n) {
        // A segment ends after the next newline unit or after kMaxSegment bytes.
        size_t end = pos;
        const size_t limit = std::min(n, pos + kMaxSegment);
        while (end + unit <= limit) {
            end += unit;
            if (is_newline_unit(data + end - unit, unit, le))
                break;
        }
        if (end == pos)
            end = n; // fewer than `unit` bytes left: let iconv report the incomplete unit
        const SourceAnchor anchor{static_cast<int64_t>(out.text.size()), static_cast<int64_t>(pos),
                                  0, line};
        if (!out.anchors.empty() && out.anchors.back().text_offset == anchor.text_offset)
            out.anchors.back() = anchor; // the previous segment produced no text
        else
            out.anchors.push_back(anchor);

        const size_t seg_start = pos;
        for (;;) {
            char* in = const_cast<char*>(bytes.data() + pos);
            size_t in_left = end - pos;
            const size_t old_size = out.text.size();
            out.text.resize(old_size + in_left * 4 + 16);
            char* o = out.text.data() + old_size;
            size_t o_left = out.text.size() - old_size;
            const size_t rc = iconv(static_cast<iconv_t>(cd.get()), &in, &in_left, &o, &o_left);
            const int err = errno;
            out.text.resize(out.text.size() - o_left);
            pos = static_cast<size_t>(in - bytes.data());
            if (rc != static_cast<size_t>(-1))
                break;
            if (err == E2BIG)
                continue;
            if (err == EILSEQ)
                throw DocumentError(path + ": is not valid " + encoding +
                                    " (invalid byte sequence at offset " + std::to_string(pos) +
                                    ")");
            if (err == EINVAL) { // a character continues past the segment's end
                if (end == n)
                    throw DocumentError(path + ": ends in the middle of a character (" + encoding +
                                        ", offset " + std::to_string(pos) + ")");
                if (pos == seg_start) { // nothing converted: widen the segment
                    end = std::min(n, end + 16);
                    continue;
                }
                break; // the rest starts the next segment
            }
            throw DocumentError(path + ": cannot be converted from " + encoding + " (" +
                                std::strerror(err) + ")");
        }
        for (size_t i = seg_start; i + unit <= pos; i += unit)
            if (is_newline_unit(data + i, unit, le))
                ++line;
    }
    // Stateful encodings (ISO-2022-JP) may have to return to their initial state.
    char tail[16];
    char* o = tail;
    size_t o_left = sizeof tail;
    iconv(static_cast<iconv_t>(cd.get()), nullptr, nullptr, &o, &o_left);
    out.text.append(tail, static_cast<size_t>(o - tail));
    if (out.anchors.empty())
        out.anchors.push_back({0, static_cast<int64_t>(start), 0, 1});
    return out;
}

LoadedDocument load_text(const std::string& path, const std::string& bytes, DocumentFormat format) {
    LoadedDocument doc;
    doc.format = format;
    const std::string_view b = bytes;

    // Byte-order marks; UTF-32LE's starts like UTF-16LE's, so it is checked first.
    std::string encoding;
    size_t bom = 0;
    if (b.starts_with(kUtf8Bom))
        bom = 3;
    else if (b.starts_with(std::string_view("\xff\xfe\0\0", 4)))
        encoding = "UTF-32LE", bom = 4;
    else if (b.starts_with(std::string_view("\0\0\xfe\xff", 4)))
        encoding = "UTF-32BE", bom = 4;
    else if (b.starts_with("\xff\xfe"))
        encoding = "UTF-16LE", bom = 2;
    else if (b.starts_with("\xfe\xff"))
        encoding = "UTF-16BE", bom = 2;

    if (encoding.empty()) {
        if (const size_t nul = b.find('\0'); nul != std::string_view::npos) {
            encoding = guess_bomless_utf16(b.substr(bom));
            if (encoding.empty())
                throw DocumentError(path + ": is a binary file (NUL byte at offset " +
                                    std::to_string(nul) + "), not text");
        }
    }
    if (encoding.empty()) {
        const std::string_view body = b.substr(bom);
        if (is_valid_utf8(body)) {
            encoding = "UTF-8";
            doc.text.assign(body);
            doc.offset_map = line_anchors(doc.text, static_cast<int64_t>(bom));
        } else if (mostly_utf8(body)) {
            throw DocumentError(path + ": is not valid UTF-8 (first invalid byte at offset " +
                                std::to_string(first_invalid_utf8(body) + bom) + ")");
        } else {
            encoding = detect_encoding(body);
            if (encoding.empty())
                throw DocumentError(
                    path +
                    ": is not UTF-8 and its encoding could not be detected (first invalid "
                    "UTF-8 byte at offset " +
                    std::to_string(first_invalid_utf8(body) + bom) +
                    "); convert it to UTF-8 first");
            if (encoding == "UTF-8" || encoding == "ASCII")
                throw DocumentError(path + ": is not valid UTF-8 (first invalid byte at offset " +
                                    std::to_string(first_invalid_utf8(body) + bom) + ")");
        }
    }
    if (encoding != "UTF-8") {
        ConvertedText converted = convert_to_utf8(path, b, bom, encoding);
        doc.text = std::move(converted.text);
        doc.offset_map = std::move(converted.anchors);
        if (!is_valid_utf8(doc.text)) // iconv writes valid UTF-8; this guards the invariant
            throw DocumentError(path + ": could not be converted from " + encoding +
                                " to valid UTF-8");
        if (const size_t nul = doc.text.find('\0'); nul != std::string::npos)
            throw DocumentError(path + ": is a binary file (U+0000 in its " + encoding +
                                " text), not text");
        doc.warnings.push_back("not UTF-8: read as " + encoding + " and converted");
    }
    if (mostly_control_bytes(doc.text))
        throw DocumentError(path + ": is a binary file (many control bytes), not text");
    doc.source_encoding = encoding;
    return doc;
}

} // namespace spanscope
