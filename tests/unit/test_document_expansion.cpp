// What a DOCX, ODT or EPUB makes of a file crafted to make much from little: a ZIP bomb (one
// deflated part, many parts, headers that lie about the sizes) is refused without inflating it;
// a note referenced many times, a run of spaces, a list label and a chapter the spine names many
// times give text bounded by what the archive inflates to; XML entities are neither fetched nor
// expanded, and a part of millions of tags is refused. The containers' other tests:
// test_document_containers.cpp.
#include "container_test_support.h"
#include "storage/document_loader.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using spanscope::load_document;
using spanscope::LoadedDocument;
using spanscope::test::document_error;
using spanscope::test::Entries;
using spanscope::test::expect_anchors_ordered;
using spanscope::test::expect_document_refused;
using spanscope::test::kDocumentXml;
using spanscope::test::make_zip;
using spanscope::test::TempDir;
using spanscope::test::write_file;

namespace {

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

} // namespace

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
