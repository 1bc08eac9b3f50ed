// libFuzzer target for the ZIP-based loaders (DOCX, ODT, EPUB: libzip over the bytes, their XML
// parts through libxml2), reached through load_document as a user's file reaches them, with an
// 8 MiB limit on the bytes inflated. The container's content chooses the loader (its mimetype
// entry, a DOCX's main part); for the name-based fallbacks the file is called .docx, .epub or
// .odt after the first of word/document.xml, META-INF/container.xml the bytes contain (.odt
// otherwise). Inputs that are not ZIP archives (no "PK" magic) are left to the other targets.
// The rule: any input either loads or raises DocumentError — never crashes, reads out of
// bounds, hits undefined behaviour or throws anything else; an archive that inflates past the
// limit is refused (a ZIP bomb). What loads passes check_document (loader_fuzz_util.h) and
// holds at most 8 bytes of text per byte its entries inflate to (plus 64 KiB): the ratio
// fuzz_html allows per source byte, as an EPUB's chapters are HTML pages (a character grows to
// at most 3 bytes from a legacy charset, a list label is a few bytes per <li>); XML markup only
// shrinks, so anything more is text multiplied (a part read many times). The inflated bytes are
// counted by reading every entry here (libzip, at most the limit in all), never taken from the
// sizes the archive declares: an entry the loader never reads could declare megabytes and so
// raise the bound enough to hide a multiplied text.
// Build and run: docs/fuzzing.md.
#include "loader_fuzz_util.h"

#include <zip.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace {

constexpr size_t kMaxBytes = size_t{8} << 20;

/// The bytes the archive's entries inflate to, each entry read through libzip as the loader
/// reads it, added up to at most kMaxBytes (reading stops there, as the loader's does one byte
/// past it); an entry that libzip cannot open or read to its end (encrypted, a CRC-32 or inflate
/// error) counts nothing, since the loader refuses the archive when it reads such an entry.
/// std::nullopt when libzip cannot open the archive as the loader opens it.
std::optional<size_t> inflated_size(const uint8_t* data, size_t size) {
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* source = zip_source_buffer_create(data, size, 0, &error);
    zip_t* archive =
        source ? zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error) : nullptr;
    zip_error_fini(&error);
    if (!archive) {
        if (source)
            zip_source_free(source);
        return std::nullopt;
    }
    char buffer[1 << 16];
    size_t total = 0;
    const zip_int64_t n = zip_get_num_entries(archive, 0);
    for (zip_int64_t i = 0; i < n && total < kMaxBytes; ++i) {
        zip_file_t* file = zip_fopen_index(archive, static_cast<zip_uint64_t>(i), 0);
        if (!file)
            continue;
        size_t entry = 0;
        bool whole = false;
        while (total + entry < kMaxBytes) {
            const zip_int64_t got = zip_fread(file, buffer, sizeof buffer);
            if (got <= 0) {
                whole = got == 0;
                break;
            }
            entry += static_cast<size_t>(got);
        }
        zip_fclose(file);
        // At the limit the entry counts as far as it was read: the bound is the limit's then.
        if (whole || total + entry >= kMaxBytes)
            total += entry;
    }
    zip_discard(archive); // frees the source too
    return std::min(total, kMaxBytes);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    if (!bytes.starts_with("PK"))
        return 0;
    const char* name = bytes.find("word/document.xml") != std::string_view::npos ? "input.docx"
                       : bytes.find("META-INF/container.xml") != std::string_view::npos
                           ? "input.epub"
                           : "input.odt";
    const spanscope::fuzz::ScratchFile file(name, data, size);
    try {
        const auto doc =
            spanscope::load_document(file.path(), spanscope::fuzz::fuzz_load_options(kMaxBytes));
        // The loader opened this archive with libzip as inflated_size does.
        const auto inflated = inflated_size(data, size);
        if (!inflated)
            __builtin_trap();
        spanscope::fuzz::check_document(doc, *inflated, /*complete=*/true);
        if (doc.text.size() > 8 * *inflated + (64 << 10))
            __builtin_trap();
    } catch (const spanscope::DocumentError&) {
        // Refused: damaged, truncated, encrypted, too large, or not one of the three kinds.
    }
    return 0;
}
