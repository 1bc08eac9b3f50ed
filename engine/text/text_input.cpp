#include "engine/text/text_input.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace spanscope {

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    const size_t n = s.size();
    while (i < n) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n)
            return false;
        for (int k = 1; k < len; ++k) {
            const unsigned char cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

namespace {
size_t first_invalid_utf8(const std::string& s) {
    // Binary search is not valid for UTF-8; scan by growing prefixes of complete characters.
    size_t i = 0;
    while (i < s.size()) {
        size_t len = 1;
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0xf0)
            len = 4;
        else if (c >= 0xe0)
            len = 3;
        else if (c >= 0xc0)
            len = 2;
        if (i + len > s.size() || !is_valid_utf8(std::string_view(s).substr(i, len)))
            return i;
        i += len;
    }
    return std::string::npos;
}
} // namespace

std::string read_text_document(const std::string& path, size_t max_bytes) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec))
        throw DocumentError(path + ": no such file");
    if (fs::is_directory(path, ec))
        throw DocumentError(path + ": is a directory, not a document");
    // Devices, pipes and sockets (/dev/zero, /dev/stdin) have no end to read to.
    if (!fs::is_regular_file(path, ec))
        throw DocumentError(path + ": is not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw DocumentError(path + ": cannot be read (" + std::strerror(errno) + ")");
    const auto size = fs::file_size(path, ec);
    if (ec)
        throw DocumentError(path + ": cannot be read (" + ec.message() + ")");
    if (size > max_bytes)
        throw DocumentError(path + ": is " + std::to_string(size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " bytes a document may have");
    // Read at most what the size said (plus one byte to notice a file that grew meanwhile).
    std::string text(static_cast<size_t>(size) + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad())
        throw DocumentError(path + ": read error");
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes)
        throw DocumentError(path + ": grew past " + std::to_string(max_bytes) +
                            " bytes while read");
    if (text.compare(0, 3, "\xef\xbb\xbf") == 0)
        text.erase(0, 3);
    if (const auto nul = text.find('\0'); nul != std::string::npos)
        throw DocumentError(path + ": is a binary file (NUL byte at offset " + std::to_string(nul) +
                            "), not plain text");
    if (!is_valid_utf8(text))
        throw DocumentError(path + ": is not valid UTF-8 (first invalid byte at offset " +
                            std::to_string(first_invalid_utf8(text)) + ")");
    if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos)
        throw DocumentError(path + ": is empty (no text)");
    return text;
}

} // namespace spanscope
