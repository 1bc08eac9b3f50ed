// DOCX, ODT and EPUB: files pandoc writes from a Markdown source, against that source's words;
// real files from Debian packages, against pandoc's reading of them; and the containers a
// loader must refuse (truncated, damaged, encrypted, a ZIP bomb), each in one line.
#include "storage/document_loader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <zip.h>

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
using spanscope::test::expect_document_refused;
using spanscope::test::have_program;
using spanscope::test::lcs_length;
using spanscope::test::letter_words;
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

/// Anchors start at 0, increase with the text, and their paragraph numbers never decrease.
void expect_anchors_ordered(const LoadedDocument& doc) {
    ASSERT_FALSE(doc.offset_map.empty());
    EXPECT_EQ(doc.offset_map.front().text_offset, 0);
    for (size_t i = 1; i < doc.offset_map.size(); ++i) {
        EXPECT_LT(doc.offset_map[i - 1].text_offset, doc.offset_map[i].text_offset);
        EXPECT_LE(doc.offset_map[i - 1].line, doc.offset_map[i].line);
    }
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

/// A ZIP archive of (name, content) entries written by libzip; `encrypt` entries with the
/// traditional PKWARE cipher and password "secret".
std::string make_zip(const std::string& path,
                     const std::vector<std::pair<std::string, std::string>>& entries,
                     bool encrypt = false) {
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
    return spanscope::test::read_file(path);
}

using Entries = std::vector<std::pair<std::string, std::string>>;

/// The bytes `entries` hold uncompressed, added up: what the archive inflates to.
size_t inflated_size(const Entries& entries) {
    size_t total = 0;
    for (const auto& [name, content] : entries)
        total += content.size();
    return total;
}

/// `s` cut to at most `max` bytes at a UTF-8 character boundary, as a list label is bounded.
std::string utf8_prefix(const std::string& s, size_t max) {
    if (s.size() <= max)
        return s;
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
        --cut;
    return s.substr(0, cut);
}

const char* const kOdtNamespaces =
    "xmlns:office=\"urn:oasis:names:tc:opendocument:xmlns:office:1.0\" "
    "xmlns:text=\"urn:oasis:names:tc:opendocument:xmlns:text:1.0\" "
    "xmlns:style=\"urn:oasis:names:tc:opendocument:xmlns:style:1.0\"";

/// An ODT's content.xml: `styles` (office:automatic-styles' content) and `text` (office:text's).
std::string odt_content(const std::string& styles, const std::string& text) {
    return std::string("<?xml version=\"1.0\"?><office:document-content ") + kOdtNamespaces +
           "><office:automatic-styles>" + styles +
           "</office:automatic-styles><office:body><office:text>" + text +
           "</office:text></office:body></office:document-content>";
}

const char* const kDocumentXml =
    R"(<?xml version="1.0" encoding="UTF-8"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>
<w:p><w:r><w:t>Hello from a small document.</w:t></w:r></w:p></w:body></w:document>)";

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

TEST(DocumentContainers, ZipBombRefusedWithoutInflatingIt) {
    TempDir dir;
    // 64 MiB of one repeated paragraph deflates to ~64 KiB; documents may have 4 MiB here.
    std::string xml = "<?xml version=\"1.0\"?><w:document xmlns:w=\"http://schemas.openxmlformats."
                      "org/wordprocessingml/2006/main\"><w:body>";
    const std::string para = "<w:p><w:r><w:t>all work and no play</w:t></w:r></w:p>";
    while (xml.size() < (64u << 20))
        xml += para;
    xml += "</w:body></w:document>";
    ASSERT_FALSE(make_zip(dir.file("bomb.docx"), {{"word/document.xml", xml}}).empty());
    EXPECT_LT(fs::file_size(dir.file("bomb.docx")), 1u << 20);
    spanscope::LoadOptions small;
    small.max_bytes = 4u << 20;
    expect_document_refused(dir.file("bomb.docx"), "a ZIP bomb?", small);
    // Many small entries that together pass the bound are refused as well.
    std::vector<std::pair<std::string, std::string>> many;
    const std::string mib(1u << 20, 'x');
    for (int i = 0; i < 6; ++i)
        many.emplace_back("word/part" + std::to_string(i) + ".xml", mib);
    many.emplace_back("word/document.xml", kDocumentXml);
    ASSERT_FALSE(make_zip(dir.file("many.docx"), many).empty());
    expect_document_refused(dir.file("many.docx"), "a ZIP bomb?", small);
    // The same document under the bound loads.
    ASSERT_FALSE(make_zip(dir.file("small.docx"), {{"word/document.xml", kDocumentXml}}).empty());
    EXPECT_EQ(load_document(dir.file("small.docx"), small).text, "Hello from a small document.");
}

TEST(DocumentContainers, ALyingSizeInTheHeadersDoesNotGetPastTheBound) {
    TempDir dir;
    // 8 MiB of paragraphs whose headers are rewritten to declare 1000 bytes: the declared
    // sizes pass, what inflates does not (or the data's length check fails first).
    std::string xml = "<?xml version=\"1.0\"?><w:document xmlns:w=\"http://schemas.openxmlformats."
                      "org/wordprocessingml/2006/main\"><w:body>";
    while (xml.size() < (8u << 20))
        xml += "<w:p><w:r><w:t>all work and no play</w:t></w:r></w:p>";
    xml += "</w:body></w:document>";
    std::string zip = make_zip(dir.file("honest.docx"), {{"word/document.xml", xml}});
    ASSERT_FALSE(zip.empty());
    const auto put32 = [&](size_t at, uint32_t v) {
        for (int b = 0; b < 4; ++b)
            zip[at + static_cast<size_t>(b)] = static_cast<char>((v >> (8 * b)) & 0xff);
    };
    ASSERT_EQ(zip.rfind(std::string("PK\x03\x04", 4), 0), 0u);
    put32(22, 1000); // local file header: uncompressed size
    const size_t central = zip.find(std::string("PK\x01\x02", 4));
    ASSERT_NE(central, std::string::npos);
    put32(central + 24, 1000); // central directory header: uncompressed size
    ASSERT_TRUE(write_file(dir.file("lying.docx"), zip));
    spanscope::LoadOptions small;
    small.max_bytes = 1u << 20;
    const std::string msg = document_error(dir.file("lying.docx"), small);
    std::cout << "[ info ] " << msg << "\n";
    ASSERT_FALSE(msg.empty());
    EXPECT_EQ(msg.find('\n'), std::string::npos);
    EXPECT_TRUE(msg.find("a ZIP bomb?") != std::string::npos ||
                msg.find("damaged") != std::string::npos)
        << msg;
}

TEST(DocumentContainers, ANoteReferencedManyTimesIsReadOnce) {
    TempDir dir;
    // A 2 KB footnote referenced 40 000 times, an endnote with the same id referenced between
    // them: the references compress to a few kilobytes, so a loader that read the note at each
    // one would make 80 MB of text from a 5 KB file.
    const std::string w =
        "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"";
    const int references = 40000;
    const std::string footnote_ref = "<w:r><w:footnoteReference w:id=\"1\"/></w:r>";
    const std::string endnote_ref = "<w:r><w:endnoteReference w:id=\"1\"/></w:r>";
    std::string xml =
        "<?xml version=\"1.0\"?><w:document " + w + "><w:body><w:p><w:r><w:t>See" + "</w:t></w:r>";
    for (int i = 0; i < references; ++i)
        xml += i == 2 ? endnote_ref + footnote_ref : footnote_ref;
    xml += "</w:p></w:body></w:document>";
    std::string note;
    while (note.size() < 2000)
        note += "note text ";
    note.pop_back();
    const std::string notes = "<?xml version=\"1.0\"?><w:footnotes " + w +
                              "><w:footnote w:id=\"1\"><w:p><w:r><w:t>" + note +
                              "</w:t></w:r></w:p></w:footnote></w:footnotes>";
    const std::string endnotes = "<?xml version=\"1.0\"?><w:endnotes " + w +
                                 "><w:endnote w:id=\"1\"><w:p><w:r><w:t>end</w:t></w:r></w:p>"
                                 "</w:endnote></w:endnotes>";
    ASSERT_FALSE(make_zip(dir.file("notes.docx"), {{"word/document.xml", xml},
                                                   {"word/footnotes.xml", notes},
                                                   {"word/endnotes.xml", endnotes}})
                     .empty());
    EXPECT_LT(fs::file_size(dir.file("notes.docx")), 64u << 10);
    const LoadedDocument doc = load_document(dir.file("notes.docx"));
    // The footnote's text at its first reference, each later reference the same number alone;
    // the endnote (another note, though its id is the same) the next number.
    std::string expected = "See[1: " + note + "]";
    for (int i = 1; i < references; ++i)
        expected += i == 2 ? "[2: end][1]" : "[1]";
    EXPECT_EQ(doc.text, expected) << doc.text.substr(0, 100);
}

TEST(DocumentContainers, AnOdtRunOfSpacesIsBounded) {
    TempDir dir;
    // 20 000 text:s of 1000 spaces each (23 bytes of markup apiece, compressed to less): read as
    // asked they made 20 MB of spaces from a file of a few kilobytes. A text:s stands for at most
    // 16 spaces; a shorter run (an indent of 12) is kept as written.
    const int runs = 20000;
    std::string body = "<text:p>Before<text:s text:c=\"12\"/>indented";
    for (int i = 0; i < runs; ++i)
        body += "<text:s text:c=\"1000\"/>";
    body += "after.</text:p>";
    const Entries entries = {{"mimetype", "application/vnd.oasis.opendocument.text"},
                             {"content.xml", odt_content("", body)}};
    ASSERT_FALSE(make_zip(dir.file("spaces.odt"), entries).empty());
    EXPECT_LT(fs::file_size(dir.file("spaces.odt")), 16u << 10);
    const LoadedDocument doc = load_document(dir.file("spaces.odt"));
    ASSERT_LE(doc.text.size(), inflated_size(entries));
    EXPECT_EQ(doc.text, "Before" + std::string(12, ' ') + "indented" +
                            std::string(static_cast<size_t>(runs) * 16, ' ') + "after.");
}

TEST(DocumentContainers, ADocxListLabelIsBounded) {
    TempDir dir;
    // A w:lvlText of 4 000 characters on 5 000 list items: repeated on each, it made 20 MB of
    // labels from a file of a few kilobytes. A label keeps at most 32 bytes, cut between characters
    // (the 32nd byte of item 1's label falls inside an "é").
    const std::string w =
        "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"";
    std::string pad;
    for (int i = 0; i < 2000; ++i)
        pad += "é";
    const int items = 5000;
    const std::string numbering =
        "<?xml version=\"1.0\"?><w:numbering " + w +
        "><w:abstractNum w:abstractNumId=\"0\"><w:lvl w:ilvl=\"0\"><w:start w:val=\"1\"/>"
        "<w:numFmt w:val=\"decimal\"/><w:lvlText w:val=\"§%1" +
        pad +
        "\"/></w:lvl></w:abstractNum><w:num w:numId=\"1\"><w:abstractNumId w:val=\"0\"/>"
        "</w:num></w:numbering>";
    std::string xml = "<?xml version=\"1.0\"?><w:document " + w + "><w:body>";
    for (int i = 0; i < items; ++i)
        xml += "<w:p><w:pPr><w:numPr><w:ilvl w:val=\"0\"/><w:numId w:val=\"1\"/></w:numPr></w:pPr>"
               "<w:r><w:t>item</w:t></w:r></w:p>";
    xml += "</w:body></w:document>";
    const Entries entries = {{"word/document.xml", xml}, {"word/numbering.xml", numbering}};
    ASSERT_FALSE(make_zip(dir.file("labels.docx"), entries).empty());
    EXPECT_LT(fs::file_size(dir.file("labels.docx")), 16u << 10);
    const LoadedDocument doc = load_document(dir.file("labels.docx"));
    ASSERT_LE(doc.text.size(), inflated_size(entries));
    std::string expected;
    for (int i = 1; i <= items; ++i) {
        std::string label = "§";
        label += std::to_string(i);
        label += pad;
        expected += (i > 1 ? "\n" : "");
        expected += utf8_prefix(label, 32) + " item";
    }
    EXPECT_EQ(doc.text.substr(0, 200), expected.substr(0, 200));
    EXPECT_EQ(doc.text, expected);
}

TEST(DocumentContainers, AnOdtListLabelIsBounded) {
    TempDir dir;
    // A list style's num-suffix of 4 000 characters on 5 000 items: repeated on each, it made
    // 20 MB of labels from a file of a few kilobytes. A label keeps at most 32 bytes, cut between
    // characters; its prefix and number stay.
    std::string pad;
    for (int i = 0; i < 2000; ++i)
        pad += "é";
    const int items = 5000;
    const std::string styles = "<text:list-style style:name=\"L1\"><text:list-level-style-number "
                               "text:level=\"1\" style:num-format=\"1\" style:num-prefix=\"Art. "
                               "\" style:num-suffix=\":" +
                               pad + "\"/></text:list-style>";
    std::string list = "<text:list text:style-name=\"L1\">";
    for (int i = 0; i < items; ++i)
        list += "<text:list-item><text:p>item</text:p></text:list-item>";
    list += "</text:list>";
    const Entries entries = {{"mimetype", "application/vnd.oasis.opendocument.text"},
                             {"content.xml", odt_content(styles, list)}};
    ASSERT_FALSE(make_zip(dir.file("labels.odt"), entries).empty());
    EXPECT_LT(fs::file_size(dir.file("labels.odt")), 16u << 10);
    const LoadedDocument doc = load_document(dir.file("labels.odt"));
    ASSERT_LE(doc.text.size(), inflated_size(entries));
    std::string expected;
    for (int i = 1; i <= items; ++i) {
        std::string label = "Art. ";
        label += std::to_string(i);
        label += ":";
        label += pad;
        expected += (i > 1 ? "\n" : "");
        expected += utf8_prefix(label, 32) + " item";
    }
    EXPECT_EQ(doc.text.substr(0, 200), expected.substr(0, 200));
    EXPECT_EQ(doc.text, expected);
}

TEST(DocumentContainers, AnEpubChapterNamedManyTimesInTheSpineIsReadOnce) {
    TempDir dir;
    // A 4 KB chapter named 2 000 times by the spine (and once more by a second manifest item
    // with the same href): read at each place it made 8 MB of text from a file of a few kilobytes.
    // Each document is read at its first place in the spine.
    const std::string container =
        R"(<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>)";
    std::string spine = "<itemref idref=\"c1\"/><itemref idref=\"c2\"/><itemref idref=\"again\"/>";
    for (int i = 0; i < 2000; ++i)
        spine += "<itemref idref=\"c1\"/><itemref idref=\"c2\"/>";
    const std::string opf =
        R"(<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0"><manifest><item id="c1" href="one.xhtml" media-type="application/xhtml+xml"/><item id="c2" href="two.xhtml" media-type="application/xhtml+xml"/><item id="again" href="./one.xhtml" media-type="application/xhtml+xml"/></manifest><spine>)" +
        spine + "</spine></package>";
    std::string one;
    while (one.size() < 4000)
        one += "chapter one text ";
    one.pop_back();
    const std::string two = "Chapter two.";
    const Entries entries = {{"mimetype", "application/epub+zip"},
                             {"META-INF/container.xml", container},
                             {"content.opf", opf},
                             {"one.xhtml", "<html><body><p>" + one + "</p></body></html>"},
                             {"two.xhtml", "<html><body><p>" + two + "</p></body></html>"}};
    ASSERT_FALSE(make_zip(dir.file("spine.epub"), entries).empty());
    EXPECT_LT(fs::file_size(dir.file("spine.epub")), 16u << 10);
    const LoadedDocument doc = load_document(dir.file("spine.epub"));
    ASSERT_LE(doc.text.size(), inflated_size(entries));
    EXPECT_EQ(doc.text, one + "\n\n" + two);
    expect_anchors_ordered(doc);
}

TEST(DocumentContainers, EntitiesAreNeitherFetchedNorExpandedAndHugeTreesRefused) {
    TempDir dir;
    // An external entity (a file of this machine) is not read, an internal one not expanded.
    const std::string head =
        "<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
        "<w:body><w:p><w:r><w:t>Before ";
    const std::string tail = " after.</w:t></w:r></w:p></w:body></w:document>";
    const std::string external = "<?xml version=\"1.0\"?>\n<!DOCTYPE w:document [\n"
                                 "<!ENTITY secret SYSTEM \"file:///etc/passwd\">\n"
                                 "<!ENTITY a \"laughlaughlaugh\">\n]>\n" +
                                 head + "&secret; &a;" + tail;
    ASSERT_FALSE(make_zip(dir.file("entities.docx"), {{"word/document.xml", external}}).empty());
    const LoadedDocument doc = load_document(dir.file("entities.docx"));
    EXPECT_EQ(doc.text.find("root:"), std::string::npos) << doc.text;
    EXPECT_EQ(doc.text.find("laugh"), std::string::npos) << doc.text;
    EXPECT_NE(doc.text.find("Before"), std::string::npos);
    EXPECT_LT(doc.text.size(), 100u) << doc.text;
    // Nested internal entities ("billion laughs"): libxml2 refuses the part, in one line.
    const std::string laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE w:document [\n"
                               "<!ENTITY a \"laughlaughlaughlaughlaughlaughlaughlaugh\">\n"
                               "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">\n"
                               "<!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">\n"
                               "<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\">\n]>\n" +
                               head + "&d;" + tail;
    ASSERT_FALSE(make_zip(dir.file("laughs.docx"), {{"word/document.xml", laughs}}).empty());
    const std::string msg = document_error(dir.file("laughs.docx"));
    if (msg.empty()) {
        EXPECT_EQ(load_document(dir.file("laughs.docx")).text.find("laugh"), std::string::npos);
    } else {
        EXPECT_EQ(msg.rfind(dir.file("laughs.docx") + ": is a damaged DOCX document", 0), 0u)
            << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    // A part of 4 000 001 tags is refused before a tree is built.
    std::string many = "<?xml version=\"1.0\"?><w:document xmlns:w=\"http://schemas."
                       "openxmlformats.org/wordprocessingml/2006/main\"><w:body>";
    for (int i = 0; i < 4000000; ++i)
        many += "<w:r/>";
    many += "</w:body></w:document>";
    ASSERT_FALSE(make_zip(dir.file("tags.docx"), {{"word/document.xml", many}}).empty());
    expect_document_refused(dir.file("tags.docx"), "more than 4 000 000 XML tags");
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
