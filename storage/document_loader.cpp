#include "storage/document_loader.h"

#include "storage/loader_docx.h"
#include "storage/loader_epub.h"
#include "storage/loader_html.h"
#include "storage/loader_odt.h"
#include "storage/loader_pdf.h"
#include "storage/loader_text.h"
#include "storage/zip_container.h"

#include <libxml/parser.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace spanscope {

const char* format_name(DocumentFormat f) {
    switch (f) {
    case DocumentFormat::Text:
        return "text";
    case DocumentFormat::Markdown:
        return "markdown";
    case DocumentFormat::Html:
        return "html";
    case DocumentFormat::Pdf:
        return "pdf";
    case DocumentFormat::Docx:
        return "docx";
    case DocumentFormat::Odt:
        return "odt";
    case DocumentFormat::Epub:
        return "epub";
    }
    return "unknown";
}

const SourceAnchor& LoadedDocument::anchor_at(int64_t offset) const {
    // The last anchor whose text_offset <= offset; offsets before the first anchor map to it.
    auto it =
        std::upper_bound(offset_map.begin(), offset_map.end(), offset,
                         [](int64_t off, const SourceAnchor& a) { return off < a.text_offset; });
    if (it == offset_map.begin())
        return offset_map.front();
    return *(it - 1);
}

namespace {

/// Closes a file descriptor on scope exit.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0)
            ::close(fd);
    }
};

/// Reads the whole regular file `path` (at most max_bytes bytes).
std::string read_file(const std::string& path, size_t max_bytes) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below by fstat.
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (f.fd < 0) {
        const int err = errno;
        if (err == ENOENT || err == ENOTDIR)
            throw DocumentError(path + ": no such file");
        throw DocumentError(path + ": cannot be read (" + std::strerror(err) + ")");
    }
    // fstat on the open descriptor: what is checked is what is read.
    struct stat st {};
    if (::fstat(f.fd, &st) != 0)
        throw DocumentError(path + ": cannot be read (" + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode))
        throw DocumentError(path + ": is a directory, not a document");
    // Devices, pipes and sockets (/dev/zero, /dev/stdin) have no end to read to.
    if (!S_ISREG(st.st_mode))
        throw DocumentError(path + ": is not a regular file");
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size > max_bytes)
        throw DocumentError(path + ": is " + std::to_string(size) + " bytes, more than the " +
                            std::to_string(max_bytes) + " bytes a document may have");
    // Read at most what the size said plus one byte, to notice a file that grew meanwhile.
    std::string bytes(static_cast<size_t>(size) + 1, '\0');
    size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw DocumentError(path + ": read error (" + std::strerror(errno) + ")");
        }
        if (n == 0)
            break;
        got += static_cast<size_t>(n);
    }
    bytes.resize(got);
    if (bytes.size() > max_bytes)
        throw DocumentError(path + ": grew past " + std::to_string(max_bytes) +
                            " bytes while read");
    return bytes;
}

bool is_gzip(std::string_view bytes) {
    return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
           static_cast<unsigned char>(bytes[1]) == 0x8b;
}

/// Decompresses a gzip file (one or more members, as gzip(1) writes them) into at most
/// max_bytes bytes; a note about ignored trailing bytes goes to `warnings`.
std::string gunzip(const std::string& path, std::string_view in, size_t max_bytes,
                   std::vector<std::string>& warnings) {
    z_stream zs{};
    // 16 + MAX_WBITS: a gzip wrapper (header, CRC-32 and length checked), not raw zlib.
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        throw DocumentError(path + ": cannot decompress (zlib could not start)");
    struct End {
        z_stream* zs;
        ~End() { inflateEnd(zs); }
    } end{&zs};

    std::string out;
    size_t pos = 0; // bytes of `in` consumed
    constexpr size_t kChunk = 1u << 16;
    for (;;) {
        // zlib counts in uInt: feed at most 1 GiB at a time. `out` holds at most max_bytes
        // bytes here, so there is always room for one more byte to notice an overflow.
        const size_t feed = std::min<size_t>(in.size() - pos, 1u << 30);
        zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + pos));
        zs.avail_in = static_cast<uInt>(feed);
        const size_t before = out.size();
        out.resize(std::min(before + kChunk, max_bytes + 1));
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + before);
        zs.avail_out = static_cast<uInt>(out.size() - before);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        pos += feed - zs.avail_in;
        out.resize(out.size() - zs.avail_out);
        if (out.size() > max_bytes)
            throw DocumentError(path + ": decompresses to more than the " +
                                std::to_string(max_bytes) + " bytes a document may have");
        if (rc == Z_OK)
            continue;
        if (rc == Z_STREAM_END) {
            const std::string_view rest = in.substr(pos);
            if (rest.empty())
                break;
            if (is_gzip(rest)) { // another member follows (cat a.gz b.gz)
                inflateReset(&zs);
                continue;
            }
            // gzip(1) ignores trailing zeros (tape padding) silently, other bytes with a warning.
            if (rest.find_first_not_of('\0') != std::string_view::npos)
                warnings.push_back(std::to_string(rest.size()) +
                                   " bytes after the end of the gzip stream were ignored");
            break;
        }
        // Z_BUF_ERROR: no progress although there was room for output, so the input ran out.
        if (rc == Z_BUF_ERROR)
            throw DocumentError(path + ": is a truncated gzip file (the compressed data ends "
                                       "before the end of the stream)");
        if (rc == Z_DATA_ERROR)
            throw DocumentError(path + ": is a corrupt gzip file (" +
                                (zs.msg ? zs.msg : "invalid compressed data") + ")");
        if (rc == Z_MEM_ERROR)
            throw DocumentError(path + ": cannot decompress (out of memory)");
        throw DocumentError(path + ": cannot decompress (zlib error " + std::to_string(rc) + ")");
    }
    return out;
}

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// "DOCX", "ODT" or "EPUB" for a name with that extension.
std::string kind_of_name(const std::string& name) {
    std::string ext = name.substr(name.rfind('.') + 1);
    for (char& c : ext)
        c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return ext;
}

/// The container's own kind, from its parts (the OpenDocument and EPUB "mimetype" entry, the
/// main part of a DOCX), else from the file name.
LoadedDocument load_container(const std::string& path, const std::string& name,
                              const std::string& bytes, size_t max_bytes) {
    ZipContainer zip(path, bytes, max_bytes);
    std::string mimetype;
    if (zip.has("mimetype"))
        mimetype = zip.read("mimetype").value_or("");
    while (!mimetype.empty() &&
           (mimetype.back() == '\n' || mimetype.back() == '\r' || mimetype.back() == ' '))
        mimetype.pop_back();
    if (mimetype == "application/epub+zip")
        return load_epub(path, zip);
    if (mimetype == "application/vnd.oasis.opendocument.text" ||
        mimetype == "application/vnd.oasis.opendocument.text-template")
        return load_odt(path, zip);
    if (mimetype.starts_with("application/vnd.oasis.opendocument."))
        throw DocumentError(path + ": is an OpenDocument file of another kind (" + mimetype +
                            "); Spanscope reads OpenDocument text (.odt)");
    if (zip.has("word/document.xml"))
        return load_docx(path, zip);
    if (zip.has("content.xml") && ends_with(name, ".odt"))
        return load_odt(path, zip);
    if (zip.has("META-INF/container.xml") && ends_with(name, ".epub"))
        return load_epub(path, zip);
    if (zip.has("xl/workbook.xml") || zip.has("ppt/presentation.xml"))
        throw DocumentError(path + ": is an Excel or PowerPoint file; Spanscope reads Word "
                                   "documents (.docx), ODT, EPUB, PDF, HTML and text");
    if (ends_with(name, ".docx") || ends_with(name, ".odt") || ends_with(name, ".epub"))
        throw DocumentError(path + ": is a ZIP archive without the parts of a " +
                            kind_of_name(name) + " document (damaged?)");
    throw DocumentError(path + ": is a ZIP archive, not a DOCX, ODT or EPUB document; unpack it "
                               "and add the documents it holds");
}

/// An OLE2 compound file (what Office wraps a password-protected .docx in, and the format of
/// the older .doc).
bool is_compound_file(std::string_view bytes) {
    return bytes.starts_with(std::string_view("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8));
}

/// Whether a compound file holds an encrypted Office Open XML package: its directory names the
/// stream "EncryptedPackage" (UTF-16LE), as MS-OFFCRYPTO specifies.
bool holds_encrypted_package(std::string_view bytes) {
    static const std::string kName = [] {
        std::string s;
        for (const char c : std::string_view("EncryptedPackage"))
            s += c, s += '\0';
        return s;
    }();
    return bytes.find(kName) != std::string_view::npos;
}

} // namespace

LoadedDocument load_document(const std::string& path, const LoadOptions& options) {
    // libxml2's global state is set up once, before any thread parses (its loaders run on the
    // window's worker thread too).
    static std::once_flag libxml2_ready;
    std::call_once(libxml2_ready, [] { xmlInitParser(); });
    std::string bytes = read_file(path, options.max_bytes);
    // The file name without its folders, lower-cased, .gz dropped when compressed.
    std::string name = path;
    if (const auto slash = name.rfind('/'); slash != std::string::npos)
        name.erase(0, slash + 1);
    name = lower(name);

    std::vector<std::string> gzip_warnings;
    const bool gz = is_gzip(bytes);
    if (gz) {
        bytes = gunzip(path, bytes, options.max_bytes, gzip_warnings);
        if (ends_with(name, ".gz"))
            name.resize(name.size() - 3);
        else if (ends_with(name, ".tgz"))
            name.resize(name.size() - 4); // a tar archive: refused below as binary
    }
    if (bytes.empty())
        throw DocumentError(
            path + (gz ? ": is empty (0 bytes after decompression)" : ": is empty (0 bytes)"));

    LoadedDocument doc;
    // A PDF by its magic, or by its name: poppler also accepts up to 1 KiB of junk before the
    // magic, and refuses clearly what is not a PDF.
    if (bytes.starts_with("%PDF-") || ends_with(name, ".pdf"))
        doc = load_pdf(path, bytes, options);
    else if (is_zip(bytes))
        doc = load_container(path, name, bytes, options.max_bytes);
    else if (is_compound_file(bytes) && holds_encrypted_package(bytes))
        throw DocumentError(path + ": is encrypted with a password; open it in Word or "
                                   "LibreOffice, remove the password and add it again");
    else if (is_compound_file(bytes))
        throw DocumentError(path + ": is a legacy binary Office file (.doc, .xls, .ppt); save "
                                   "it as .docx or .odt and add that");
    else if (ends_with(name, ".docx") || ends_with(name, ".odt") || ends_with(name, ".epub"))
        throw DocumentError(path + ": is not a " + kind_of_name(name) +
                            " document (not a ZIP container: damaged, or another file renamed)");
    else if (ends_with(name, ".html") || ends_with(name, ".htm") || ends_with(name, ".xhtml"))
        doc = load_html(path, bytes);
    else if (ends_with(name, ".md") || ends_with(name, ".markdown"))
        doc = load_text(path, bytes, DocumentFormat::Markdown);
    else
        doc = load_text(path, bytes, DocumentFormat::Text);

    if (!has_visible_text(doc.text))
        throw DocumentError(path + ": is empty (no text, only whitespace)");
    if (doc.offset_map.empty() || doc.offset_map.front().text_offset != 0)
        doc.offset_map.insert(doc.offset_map.begin(), SourceAnchor{});
    doc.gzip = gz;
    doc.warnings.insert(doc.warnings.begin(), gzip_warnings.begin(), gzip_warnings.end());
    return doc;
}

} // namespace spanscope
