// What test_document_containers and test_document_expansion share: ZIP archives written with
// libzip, a one-paragraph DOCX body, and the order of a loaded document's anchors.
#pragma once

#include "storage/document_loader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <zip.h>

#include <string>
#include <utility>
#include <vector>

namespace spanscope::test {

/// The (name, content) entries of a ZIP archive.
using Entries = std::vector<std::pair<std::string, std::string>>;

/// A ZIP archive of (name, content) entries written by libzip; `encrypt` entries with the
/// traditional PKWARE cipher and password "secret".
inline std::string make_zip(const std::string& path, const Entries& entries, bool encrypt = false) {
    int err = 0;
    zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z)
        return "";
    for (const auto& [name, content] : entries) {
        zip_source_t* s = zip_source_buffer(z, content.data(), content.size(), 0);
        const zip_int64_t i = zip_file_add(z, name.c_str(), s, ZIP_FL_OVERWRITE);
        if (i < 0) {
            zip_source_free(s);
            zip_discard(z);
            return "";
        }
        if (encrypt && zip_file_set_encryption(z, static_cast<zip_uint64_t>(i), ZIP_EM_TRAD_PKWARE,
                                               "secret") != 0) {
            zip_discard(z);
            return "";
        }
    }
    if (zip_close(z) != 0) {
        zip_discard(z);
        return "";
    }
    return read_file(path);
}

/// A DOCX's word/document.xml of one paragraph, "Hello from a small document."
inline const char* const kDocumentXml =
    R"(<?xml version="1.0" encoding="UTF-8"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:r><w:t>Hello from a small document.</w:t></w:r></w:p></w:body></w:document>)";

/// Anchors start at 0, increase with the text, and their paragraph numbers never decrease.
inline void expect_anchors_ordered(const LoadedDocument& doc) {
    ASSERT_FALSE(doc.offset_map.empty());
    EXPECT_EQ(doc.offset_map.front().text_offset, 0);
    for (size_t i = 1; i < doc.offset_map.size(); ++i) {
        EXPECT_LT(doc.offset_map[i - 1].text_offset, doc.offset_map[i].text_offset);
        EXPECT_LE(doc.offset_map[i - 1].line, doc.offset_map[i].line);
    }
}

} // namespace spanscope::test
