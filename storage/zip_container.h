// ZIP containers (DOCX, ODT and EPUB are ZIP archives of XML) read from memory through libzip,
// with the bytes taken out of them bounded: a ZIP bomb is refused, never inflated.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

struct zip;

namespace spanscope {

/// True when `bytes` start with a ZIP local file header ("PK\3\4") or, for an archive with no
/// entries, the end-of-central-directory record ("PK\5\6").
bool is_zip(const std::string& bytes);

/// A ZIP archive held in memory (libzip over a buffer; the archive's central directory and
/// every entry's CRC-32 are checked as libzip reads them).
class ZipContainer {
public:
    /// Opens `bytes` (which must outlive this object) as a ZIP archive. `path` begins every
    /// message; `max_bytes` bounds the bytes `read` returns over this object's life, and the
    /// uncompressed sizes the archive declares for all its entries together.
    /// Throws DocumentError: not a ZIP archive libzip can open (damaged, truncated: the central
    /// directory at its end is missing or inconsistent), more than 100 000 entries, declared
    /// uncompressed sizes above max_bytes ("a ZIP bomb?").
    ZipContainer(const std::string& path, const std::string& bytes, size_t max_bytes);
    ~ZipContainer();
    ZipContainer(const ZipContainer&) = delete;
    ZipContainer& operator=(const ZipContainer&) = delete;

    /// The entries' names, in the archive's order.
    const std::vector<std::string>& names() const { return names_; }
    /// Whether an entry has exactly this name (case-sensitive, as ZIP names are).
    bool has(const std::string& name) const;
    /// The uncompressed content of entry `name`; std::nullopt when there is no such entry.
    /// Throws DocumentError: the entry is encrypted with a password, its data is damaged (a
    /// CRC-32 or inflate error, or it ends early), or reading it would take the bytes read
    /// from this archive past max_bytes (whatever its header declares).
    std::optional<std::string> read(const std::string& name);
    /// As `read`, but a missing entry throws DocumentError naming `what` ("a DOCX document").
    std::string read_required(const std::string& name, const std::string& what);

private:
    std::string path_;
    zip* archive_ = nullptr;
    std::vector<std::string> names_;
    size_t max_bytes_ = 0;
    size_t bytes_read_ = 0;
};

} // namespace spanscope
