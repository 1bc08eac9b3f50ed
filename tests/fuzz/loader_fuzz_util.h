// What the document-loader fuzz targets share: a scratch file of this process's own for the
// input (the loaders read a path), and the checks every loaded document must pass.
#pragma once

#include "engine/text/text_input.h" // is_valid_utf8
#include "storage/document_loader.h"
#include "storage/loader_text.h" // has_visible_text

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace spanscope::fuzz {

/// A directory for scratch files: /dev/shm when it is writable (no disk writes per input),
/// else $TMPDIR, else /tmp.
inline std::string scratch_dir() {
    if (::access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    if (const char* t = std::getenv("TMPDIR"); t && *t)
        return t;
    return "/tmp";
}

/// `data` written to <scratch_dir>/spanscope-fuzz-<pid>-<name>; removed again on destruction.
class ScratchFile {
public:
    ScratchFile(const std::string& name, const uint8_t* data, size_t size)
        : path_(scratch_dir() + "/spanscope-fuzz-" + std::to_string(::getpid()) + "-" + name) {
        std::FILE* f = std::fopen(path_.c_str(), "wb");
        if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0)
            std::abort(); // the harness cannot work without its scratch file
    }
    ~ScratchFile() { std::remove(path_.c_str()); }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

/// Load options for the targets: no OCR (Tesseract is not what is tested) and a small byte
/// limit, so that a decompression bomb is refused quickly.
inline LoadOptions fuzz_load_options(size_t max_bytes) {
    LoadOptions o;
    o.ocr = false;
    o.max_bytes = max_bytes;
    return o;
}

/// Traps unless `doc` keeps what document_loader.h promises: UTF-8 text, an offset map sorted
/// by text offset whose offsets lie inside the text and inside the `source_bytes` bytes of
/// the (decompressed) source, no negative page or line; `complete` (what load_document
/// returns): visible text and a map whose first anchor is at text offset 0. Every byte of the
/// text is read, so a bad length shows up under AddressSanitizer here.
inline void check_document(const LoadedDocument& doc, size_t source_bytes, bool complete) {
    volatile size_t sink = 0;
    for (const char c : doc.text)
        sink = sink + static_cast<unsigned char>(c);
    for (const auto& w : doc.warnings)
        sink = sink + w.size();
    (void)sink;
    if (!is_valid_utf8(doc.text))
        __builtin_trap();
    if (complete && (!has_visible_text(doc.text) || doc.offset_map.empty() ||
                     doc.offset_map.front().text_offset != 0))
        __builtin_trap();
    const auto text_size = static_cast<int64_t>(doc.text.size());
    int64_t previous = 0;
    for (const auto& a : doc.offset_map) {
        if (a.text_offset < previous || a.text_offset > text_size)
            __builtin_trap();
        if (a.source_offset < 0 || a.source_offset > static_cast<int64_t>(source_bytes))
            __builtin_trap();
        if (a.page < 0 || a.line < 0)
            __builtin_trap();
        previous = a.text_offset;
    }
    if (!doc.offset_map.empty()) {
        // anchor_at must land on an anchor for any offset of the text.
        const SourceAnchor& last = doc.anchor_at(text_size);
        if (last.text_offset > text_size)
            __builtin_trap();
    }
}

} // namespace spanscope::fuzz
