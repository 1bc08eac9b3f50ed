// DOCX, ODT and EPUB: files pandoc writes from a Markdown source, against that source's words;
// real files from Debian packages, against pandoc's reading of them; the containers a loader
// must refuse (truncated, damaged, encrypted), each in one line; and hrefs in an EPUB package.
// ZIP bombs and text out of proportion to its file: test_document_expansion.cpp.
#include "container_test_support.h"
#include "storage/document_loader.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using spanscope::DocumentError;
using spanscope::DocumentFormat;
using spanscope::load_document;
using spanscope::LoadedDocument;
using spanscope::test::document_error;
using spanscope::test::expect_anchors_ordered;
using spanscope::test::expect_document_refused;
using spanscope::test::have_program;
using spanscope::test::kDocumentXml;
using spanscope::test::lcs_length;
using spanscope::test::letter_words;
using spanscope::test::make_zip;
using spanscope::test::run_command;
using spanscope::test::TempDir;
using spanscope::test::write_file;

namespace {

/// The words of a Markdown source as a reader sees them: the YAML block's title, then the body
/// (its markup is not words; list numbers are).
std::vector<std::string> markdown_words(const std::string& md) {
    std::string title, body = md;
    if (md.starts_with("---\n")) {
        const size_t end = md.find("\n---\n", 4);
        const std::string yaml = md.substr(4, end - 4);
        if (const size_t t = yaml.find("title:"); t != std::string::npos)
            title = yaml.substr(t + 6, yaml.find('\n', t) - t - 6);
        body = md.substr(end + 5);
    }
    auto out = letter_words(title);
    for (auto& w : letter_words(body))
        out.push_back(std::move(w));
    return out;
}

struct Agreement {
    double of_reference = 0; ///< words of the reference found, in order, in ours
    double of_ours = 0;      ///< words of ours found, in order, in the reference
};

Agreement agreement(const std::vector<std::string>& reference, const std::vector<std::string>& ours,
                    const std::string& label) {
    const size_t common = lcs_length(reference, ours);
    Agreement a;
    a.of_reference = reference.empty() ? 0 : double(common) / double(reference.size());
    a.of_ours = ours.empty() ? 0 : double(common) / double(ours.size());
    std::cout << "[ info ] " << label << ": " << reference.size() << " reference words, "
              << ours.size() << " ours, " << common
              << " in common in order: " << 100 * a.of_reference << " % of the reference, "
              << 100 * a.of_ours << " % of ours\n";
    return a;
}

/// Writes the Markdown fixture as `ext` with pandoc; "" (and the test skips) without pandoc.
std::string pandoc_file(const TempDir& dir, const std::string& ext) {
    if (!have_program("pandoc"))
        return "";
    const std::string src = spanscope::test::data_dir() + "/fixtures/office/field-notes.md";
    const std::string out = dir.file("field-notes." + ext);
    if (!run_command("pandoc '" + src + "' -o '" + out + "' 2>/dev/null"))
        return "";
    return out;
}

/// The loaded text of the pandoc-written fixture agrees with the Markdown source word for word
/// in order (>= 99 % both ways), and keeps the layout it promises.
void check_pandoc_document(const std::string& ext, DocumentFormat format) {
    TempDir dir;
    const std::string path = pandoc_file(dir, ext);
    if (path.empty())
        GTEST_SKIP() << "pandoc (Debian package pandoc) is not installed";
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.format, format);
    const std::string md =
        spanscope::test::read_file(spanscope::test::data_dir() + "/fixtures/office/field-notes.md");
    const Agreement a = agreement(markdown_words(md), letter_words(doc.text), ext + " from pandoc");
    EXPECT_GE(a.of_reference, 0.99);
    EXPECT_GE(a.of_ours, 0.99);
    expect_anchors_ordered(doc);

    // Footnotes at their reference, numbered in order.
    EXPECT_NE(doc.text.find("twice a day.[1: Counted at the spring tide of March 2024 by the "
                            "survey team.]"),
              std::string::npos)
        << doc.text;
    EXPECT_NE(doc.text.find("fewer snails.[2: A second survey in April found the same "
                            "pattern.]"),
              std::string::npos);
    // Headings are paragraphs of their own; list items one per line with their labels; a
    // nested list's items under their item.
    EXPECT_NE(doc.text.find("\n\nMethods\n\n"), std::string::npos);
    EXPECT_NE(doc.text.find("1. Measure the water temperature at noon.\n2. Count the snails"),
              std::string::npos);
    EXPECT_NE(doc.text.find("3. Record the salinity"), std::string::npos);
    for (const char* item : {"a thermometer with a long probe", "a quadrat frame",
                             "calibrated each morning", "kept in a dry case"}) {
        const size_t at = doc.text.find(item);
        ASSERT_NE(at, std::string::npos) << item;
        EXPECT_EQ(doc.text[at - 1], ' ') << item; // after its label
        EXPECT_NE(doc.text.rfind('\n', at), std::string::npos);
        EXPECT_NE(doc.text.substr(doc.text.rfind('\n', at) + 1, at - doc.text.rfind('\n', at) - 1)
                      .find_first_not_of(" "),
                  std::string::npos)
            << "no label before " << item;
    }
    // Table rows one per line, cells separated by tabs.
    EXPECT_NE(doc.text.find("Pool\tSnails\tSalinity\tTemperature\nNorth\t41\t33\t14\nEast\t17"),
              std::string::npos);
    // A later paragraph has a later paragraph number.
    const auto line_of = [&](const char* s) {
        return doc.anchor_at(static_cast<int64_t>(doc.text.find(s))).line;
    };
    if (format != DocumentFormat::Epub) { // DOCX, ODT: paragraph numbers; the title is first
        EXPECT_EQ(line_of("Field Notes on Tidal Pools"), 1);
    }
    EXPECT_LT(line_of("Visitors often ask"), line_of("Count the snails"));
    EXPECT_LT(line_of("Count the snails"), line_of("The counts agree"));
    EXPECT_GT(line_of("Visitors often ask"), 0);
}

/// A real file from a Debian package against an independent reader's text of it: `reference`
/// is "pandoc" (`pandoc -t plain`, with tests/fixtures/office/reading-order.lua putting notes
/// at their references and table rows one per paragraph, as the loaders do) or "odt2txt"
/// (which reads the header rows of ODT tables that pandoc 2.17 drops; its "[-- Image: … --]"
/// placeholders are not text).
void check_real_file(const std::string& path, const std::string& package, DocumentFormat format,
                     const std::string& reference) {
    if (!fs::exists(path))
        GTEST_SKIP() << path << " absent (Debian package " << package << ")";
    if (!have_program(reference))
        GTEST_SKIP() << reference << " (Debian package " << reference << ") is not installed";
    const std::string filter = spanscope::test::data_dir() + "/fixtures/office/reading-order.lua";
    auto ref = reference == "pandoc" ? run_command("pandoc -t plain --wrap=none --lua-filter '" +
                                                   filter + "' '" + path + "' 2>/dev/null")
                                     : run_command("odt2txt --width=-1 '" + path + "' 2>/dev/null");
    ASSERT_TRUE(ref.has_value()) << reference << " could not read " << path;
    if (reference == "odt2txt")
        *ref = std::regex_replace(*ref, std::regex(R"(\[-- Image: [^\]]* --\])"), " ");
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.format, format);
    const Agreement a =
        agreement(letter_words(*ref), letter_words(doc.text), path + " against " + reference);
    EXPECT_GE(a.of_reference, 0.99);
    EXPECT_GE(a.of_ours, 0.99);
    expect_anchors_ordered(doc);
}

} // namespace

TEST(DocumentContainers, PandocDocxAgreesWithItsMarkdownSource) {
    check_pandoc_document("docx", DocumentFormat::Docx);
}

TEST(DocumentContainers, PandocOdtAgreesWithItsMarkdownSource) {
    check_pandoc_document("odt", DocumentFormat::Odt);
}

TEST(DocumentContainers, PandocEpubAgreesWithItsMarkdownSource) {
    check_pandoc_document("epub", DocumentFormat::Epub);
}

TEST(DocumentContainers, RealDocxFromLibreOffice) {
    check_real_file("/usr/share/forensics-samples/original-files/text1/a-text.docx",
                    "forensics-samples-files", DocumentFormat::Docx, "pandoc");
}

TEST(DocumentContainers, RealOdtFromLibreOffice) {
    check_real_file("/usr/share/forensics-samples/original-files/text2/d-text.odt",
                    "forensics-samples-files", DocumentFormat::Odt, "odt2txt");
}

TEST(DocumentContainers, RealOdtManualWithTables) {
    check_real_file("/usr/share/doc/fonts-sil-charis-compact/documentation/CharisSIL-features.odt",
                    "fonts-sil-charis-compact", DocumentFormat::Odt, "odt2txt");
}

TEST(DocumentContainers, RealEpubGuide) {
    check_real_file("/usr/share/doc/cxxtest/guide.epub", "cxxtest", DocumentFormat::Epub, "pandoc");
}

TEST(DocumentContainers, TruncatedAndDamagedContainersRefused) {
    TempDir dir;
    const std::string docx = pandoc_file(dir, "docx");
    if (docx.empty())
        GTEST_SKIP() << "pandoc (Debian package pandoc) is not installed";
    const std::string bytes = spanscope::test::read_file(docx);
    // Cut anywhere past the first local header: the central directory at the end is gone.
    for (const size_t keep : {bytes.size() / 4, bytes.size() / 2, bytes.size() - 10}) {
        const std::string cut = dir.file("cut-" + std::to_string(keep) + ".docx");
        ASSERT_TRUE(write_file(cut, bytes.substr(0, keep)));
        expect_document_refused(cut, "damaged or truncated ZIP container");
    }
    // The compressed data of word/document.xml damaged: its CRC or inflate fails.
    const size_t at = bytes.find("word/document.xml");
    ASSERT_NE(at, std::string::npos);
    std::string flipped = bytes;
    for (size_t i = at + 40; i < at + 200 && i < flipped.size(); ++i)
        flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
    ASSERT_TRUE(write_file(dir.file("flipped.docx"), flipped));
    const std::string msg = document_error(dir.file("flipped.docx"));
    EXPECT_NE(msg.find("damaged"), std::string::npos) << msg;
    // Not a ZIP at all, and a ZIP of something else.
    ASSERT_TRUE(write_file(dir.file("renamed.docx"), "This is a text file with the wrong name.\n"));
    expect_document_refused(dir.file("renamed.docx"), "not a ZIP container");
    ASSERT_FALSE(make_zip(dir.file("notes.zip"), {{"a.txt", "one"}, {"b.txt", "two"}}).empty());
    expect_document_refused(dir.file("notes.zip"), "not a DOCX, ODT or EPUB document");
    ASSERT_FALSE(make_zip(dir.file("empty.docx"), {{"word/other.xml", "<x/>"}}).empty());
    expect_document_refused(dir.file("empty.docx"), "without the parts of a DOCX document");
    // Damaged XML inside a sound container.
    ASSERT_FALSE(
        make_zip(dir.file("badxml.docx"), {{"word/document.xml", "<w:document><w:body>"}}).empty());
    expect_document_refused(dir.file("badxml.docx"),
                            "is a damaged DOCX document (word/document.xml:");
}

TEST(DocumentContainers, EncryptedDocumentsRefused) {
    TempDir dir;
    // ZIP entries encrypted with a password (libzip writes the traditional PKWARE cipher).
    if (!zip_encryption_method_supported(ZIP_EM_TRAD_PKWARE, 1)) {
        std::cout << "[ info ] this libzip cannot write encrypted entries: that case skipped\n";
    } else {
        ASSERT_FALSE(
            make_zip(dir.file("locked.docx"), {{"word/document.xml", kDocumentXml}}, true).empty());
        expect_document_refused(dir.file("locked.docx"), "encrypted with a password");
    }
    // An ODT with a password: its manifest declares encryption data for content.xml.
    const std::string manifest =
        R"(<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">
<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>
<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml" manifest:size="1200">
<manifest:encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="AAAA">
<manifest:algorithm manifest:algorithm-name="Blowfish CFB" manifest:initialisation-vector="AAAA"/>
<manifest:key-derivation manifest:key-derivation-name="PBKDF2" manifest:iteration-count="1024" manifest:salt="AAAA"/>
</manifest:encryption-data></manifest:file-entry></manifest:manifest>)";
    ASSERT_FALSE(
        make_zip(dir.file("locked.odt"), {{"mimetype", "application/vnd.oasis.opendocument.text"},
                                          {"META-INF/manifest.xml", manifest},
                                          {"content.xml", std::string(1200, '\x9c')}})
            .empty());
    expect_document_refused(dir.file("locked.odt"), "encrypted with a password");
    // A password-protected .docx is an OLE2 compound file holding an "EncryptedPackage"
    // stream (MS-OFFCRYPTO 2.3.4.4); its directory entry names it in UTF-16LE.
    std::string cfb = std::string("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8) + std::string(504, '\0');
    for (const char c : std::string("EncryptedPackage"))
        cfb += c, cfb += '\0';
    cfb += std::string(512, '\0');
    ASSERT_TRUE(write_file(dir.file("protected.docx"), cfb));
    expect_document_refused(dir.file("protected.docx"), "encrypted with a password");
    ASSERT_TRUE(write_file(dir.file("old.doc"), std::string("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 8) +
                                                    std::string(1024, '\0')));
    expect_document_refused(dir.file("old.doc"), "legacy binary Office file");
    // An EPUB whose chapter is encrypted (DRM): META-INF/encryption.xml lists it.
    const std::string container =
        R"(<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="book.opf" media-type="application/oebps-package+xml"/></rootfiles></container>)";
    const std::string opf =
        R"(<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest><item id="c1" href="ch1.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine></package>)";
    const std::string encryption =
        R"(<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><enc:CipherData><enc:CipherReference URI="ch1.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>)";
    ASSERT_FALSE(make_zip(dir.file("drm.epub"), {{"mimetype", "application/epub+zip"},
                                                 {"META-INF/container.xml", container},
                                                 {"META-INF/encryption.xml", encryption},
                                                 {"book.opf", opf},
                                                 {"ch1.xhtml", std::string(300, '\x9c')}})
                     .empty());
    expect_document_refused(dir.file("drm.epub"), "is encrypted (DRM: ch1.xhtml)");
}

TEST(DocumentContainers, EpubHrefsAreResolvedAgainstTheirPackage) {
    TempDir dir;
    // The package in OEBPS/, its chapter one folder up with a space in its name.
    const std::string container =
        R"(<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>)";
    const std::string opf =
        R"(<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0"><manifest><item id="c1" href="../Text/Chapter%201.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="./part%202.html#start" media-type="text/html"/><item id="img" href="cover.png" media-type="image/png"/></manifest><spine><itemref idref="img"/><itemref idref="c1"/><itemref idref="c2"/></spine></package>)";
    ASSERT_FALSE(
        make_zip(dir.file("book.epub"),
                 {{"mimetype", "application/epub+zip"},
                  {"META-INF/container.xml", container},
                  {"OEBPS/content.opf", opf},
                  {"Text/Chapter 1.xhtml",
                   "<html><body><h1>One</h1><ol start=\"3\" type=\"a\"><li>first</li><li></li>"
                   "<li value=\"9\">ninth</li></ol><p>Closing words.</p></body></html>"},
                  {"OEBPS/part 2.html", "<html><body><p>Second part.</p></body></html>"},
                  {"OEBPS/cover.png", "\x89PNG"}})
            .empty());
    const LoadedDocument doc = load_document(dir.file("book.epub"));
    EXPECT_EQ(doc.format, DocumentFormat::Epub);
    // HTML lists: the start, the type, an item's own value, and no label left over from an
    // empty item.
    EXPECT_EQ(doc.text, "One\n\nc. first\ni. ninth\n\nClosing words.\n\nSecond part.");
    expect_anchors_ordered(doc);
}
