// Document loaders: text in its encodings, gzip, HTML, PDF (against pdftotext), the offset map.
#include "storage/document_loader.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace fs = std::filesystem;
using spanscope::DocumentError;
using spanscope::DocumentFormat;
using spanscope::load_document;
using spanscope::LoadedDocument;
using spanscope::test::document_error;
using spanscope::test::expect_document_refused;
using spanscope::test::have_program;
using spanscope::test::lcs_length;
using spanscope::test::run_command;
using spanscope::test::TempDir;
using spanscope::test::write_file;

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;)
        out.push_back(w);
    return out;
}

void gzip_file(const std::string& path, const std::string& bytes) {
    gzFile gz = gzopen(path.c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
}

/// A minimal PDF: one page per content stream, US Letter, font /F1 = standard Helvetica;
/// the cross-reference table's byte offsets are computed as the objects are written.
std::string make_pdf(const std::vector<std::string>& contents, const std::string& encrypt = "") {
    const size_t n_pages = contents.size();
    const size_t font_obj = 3 + 2 * n_pages;
    std::vector<std::string> objs;
    std::string kids;
    for (size_t i = 0; i < n_pages; ++i)
        kids += std::to_string(3 + 2 * i) + " 0 R ";
    objs.push_back("<< /Type /Catalog /Pages 2 0 R >>");
    objs.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(n_pages) +
                   " >>");
    for (size_t i = 0; i < n_pages; ++i) {
        objs.push_back("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
                       "<< /F1 " +
                       std::to_string(font_obj) + " 0 R >> >> /Contents " +
                       std::to_string(4 + 2 * i) + " 0 R >>");
        objs.push_back("<< /Length " + std::to_string(contents[i].size()) + " >>\nstream\n" +
                       contents[i] + "\nendstream");
    }
    objs.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
    if (!encrypt.empty())
        objs.push_back(encrypt);

    std::string pdf = "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n";
    std::vector<size_t> offsets;
    for (size_t i = 0; i < objs.size(); ++i) {
        offsets.push_back(pdf.size());
        pdf += std::to_string(i + 1) + " 0 obj\n" + objs[i] + "\nendobj\n";
    }
    const size_t xref = pdf.size();
    pdf += "xref\n0 " + std::to_string(objs.size() + 1) + "\n0000000000 65535 f \n";
    for (size_t off : offsets) {
        char entry[21];
        std::snprintf(entry, sizeof entry, "%010zu 00000 n \n", off);
        pdf += entry;
    }
    const std::string encrypt_ref = encrypt.empty()
                                        ? ""
                                        : " /Encrypt " + std::to_string(objs.size()) +
                                              " 0 R /ID [<0123456789abcdef0123456789abcdef> "
                                              "<0123456789abcdef0123456789abcdef>]";
    pdf += "trailer\n<< /Size " + std::to_string(objs.size() + 1) + " /Root 1 0 R" + encrypt_ref +
           " >>\nstartxref\n" + std::to_string(xref) + "\n%%EOF\n";
    return pdf;
}

const std::string kRectangle = "0.5 g 72 72 300 300 re f";
const std::string kHello = "BT /F1 12 Tf 72 720 Td (Hello page one) Tj ET";

} // namespace

// --- plain text ------------------------------------------------------------------------------

TEST(DocumentLoader, Utf8TextWithBomAndLineAnchors) {
    TempDir dir;
    const std::string path = dir.file("a.txt");
    ASSERT_TRUE(write_file(path, "\xef\xbb\xbf"
                                 "first line\nsecond caf\xc3\xa9\nthird\n"));
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.text, "first line\nsecond caf\xc3\xa9\nthird\n");
    EXPECT_EQ(doc.format, DocumentFormat::Text);
    EXPECT_EQ(doc.source_encoding, "UTF-8");
    EXPECT_FALSE(doc.gzip);
    EXPECT_EQ(doc.pages, 0);
    // Identity map shifted by the dropped BOM, one anchor per line.
    ASSERT_EQ(doc.offset_map.size(), 3u);
    const auto& third = doc.anchor_at(static_cast<int64_t>(doc.text.find("third")));
    EXPECT_EQ(third.line, 3);
    EXPECT_EQ(third.text_offset, static_cast<int64_t>(doc.text.find("third")));
    EXPECT_EQ(third.source_offset, third.text_offset + 3);
    EXPECT_EQ(doc.anchor_at(0).line, 1);
    EXPECT_EQ(doc.anchor_at(12).line, 2); // inside "second"
}

TEST(DocumentLoader, MarkdownKeptAsSource) {
    TempDir dir;
    const std::string path = dir.file("notes.MD");
    const std::string md = "# Title\n\nSome *emphasis* and a [link](http://x).\n";
    ASSERT_TRUE(write_file(path, md));
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.text, md);
    EXPECT_EQ(doc.format, DocumentFormat::Markdown);
    EXPECT_STREQ(spanscope::format_name(doc.format), "markdown");
}

TEST(DocumentLoader, Latin1DetectedAndConverted) {
    TempDir dir;
    const std::string path = dir.file("latin1.txt");
    const std::string latin1 =
        "Le caf\xe9 \xe9tait plein. Une fille na\xefve lisait son r\xe9sum\xe9 pr\xe8s de la "
        "fen\xeatre.\nL'\xe9t\xe9 dernier, nous avons mang\xe9 des cr\xeapes \xe0 la "
        "cr\xe8me fra\xee"
        "che et bu du th\xe9 tr\xe8s chaud.\nO\xf9 est le ch\xe2teau ? "
        "\xc0 c\xf4t\xe9 de l'\xe9glise, apr\xe8s le pont, pr\xe8s de la rivi\xe8re.\n";
    const std::string utf8 =
        "Le café était plein. Une fille naïve lisait son résumé près de la fenêtre.\n"
        "L'été dernier, nous avons mangé des crêpes à la crème fraîche et bu du thé très "
        "chaud.\nOù est le château ? À côté de l'église, après le pont, près de la rivière.\n";
    ASSERT_TRUE(write_file(path, latin1));
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.text, utf8);
    EXPECT_NE(doc.source_encoding, "UTF-8");
    EXPECT_FALSE(doc.source_encoding.empty());
    std::cout << "[ info ] uchardet says " << doc.source_encoding << "\n";
    // Line 2 starts at different offsets in the Latin-1 source and in the UTF-8 text.
    const int64_t text_off = static_cast<int64_t>(utf8.find("L'été"));
    const auto& a = doc.anchor_at(text_off);
    EXPECT_EQ(a.line, 2);
    EXPECT_EQ(a.text_offset, text_off);
    EXPECT_EQ(a.source_offset, static_cast<int64_t>(latin1.find("L'\xe9t\xe9")));
}

TEST(DocumentLoader, Utf16LittleEndianWithBom) {
    TempDir dir;
    const std::string path = dir.file("wide.txt");
    const std::u16string text = u"Hello wide world\ncaf\u00e9 \u20ac 5\n";
    std::string bytes = "\xff\xfe";
    for (char16_t c : text) {
        bytes += static_cast<char>(c & 0xff);
        bytes += static_cast<char>(c >> 8);
    }
    ASSERT_TRUE(write_file(path, bytes));
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.text, "Hello wide world\ncaf\xc3\xa9 \xe2\x82\xac 5\n");
    EXPECT_EQ(doc.source_encoding, "UTF-16LE");
    const auto& a = doc.anchor_at(static_cast<int64_t>(doc.text.find("caf")));
    EXPECT_EQ(a.line, 2);
    EXPECT_EQ(a.source_offset, 2 + 2 * 17); // BOM + "Hello wide world\n" in UTF-16
}

TEST(DocumentLoader, BinaryEmptyAndWhitespaceRefused) {
    TempDir dir;
    ASSERT_TRUE(
        write_file(dir.file("prog.bin"), std::string("\x7f"
                                                     "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0",
                                                     20)));
    expect_document_refused(dir.file("prog.bin"), "binary");
    ASSERT_TRUE(write_file(dir.file("empty.txt"), ""));
    expect_document_refused(dir.file("empty.txt"), "empty");
    ASSERT_TRUE(write_file(dir.file("blank.txt"), " \n\t\r\n  \n"));
    expect_document_refused(dir.file("blank.txt"), "empty");
    ASSERT_TRUE(write_file(dir.file("blank.html"),
                           "<html><body><p> &nbsp; </p><script>x()</script></body></html>"));
    expect_document_refused(dir.file("blank.html"), "no text");
    // UTF-8 with one stray Latin-1 byte is damaged UTF-8, not Windows-1252.
    std::string mixed;
    for (int i = 0; i < 20; ++i)
        mixed += "Le caf\xc3\xa9 \xc3\xa9tait plein, la fen\xc3\xaatre ouverte. ";
    ASSERT_TRUE(write_file(dir.file("mixed.txt"), mixed + "stray \xe9 byte\n"));
    expect_document_refused(dir.file("mixed.txt"),
                            "not valid UTF-8 (first invalid byte at offset " +
                                std::to_string(mixed.size() + 6) + ")");
    // Bytes uchardet cannot place.
    ASSERT_TRUE(write_file(dir.file("odd.txt"), "\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a"));
    expect_document_refused(dir.file("odd.txt"), "encoding could not be detected");
}

TEST(DocumentLoader, MissingDirectoryAndTooLargeRefused) {
    TempDir dir;
    expect_document_refused(dir.file("nope.txt"), "no such file");
    expect_document_refused(dir.path, "is a directory");
    expect_document_refused("/usr/share/doc/shared-mime-info/shared-mime-info-spec.html",
                            "is a directory");
    ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
    expect_document_refused(dir.file("fifo"),
                            "not a regular file"); // and does not wait for a writer
    ASSERT_TRUE(write_file(dir.file("big.txt"), std::string(2000, 'a')));
    spanscope::LoadOptions small;
    small.max_bytes = 1000;
    expect_document_refused(dir.file("big.txt"), "more than the 1000 bytes", small);
    gzip_file(dir.file("bomb.txt.gz"), std::string(5000, 'a'));
    expect_document_refused(dir.file("bomb.txt.gz"), "decompresses to more than", small);
}

// --- gzip ------------------------------------------------------------------------------------

TEST(DocumentLoader, GzipRoundTrip) {
    TempDir dir;
    const std::string text = "Compressed words.\nA second line of compressed words.\n";
    gzip_file(dir.file("x.txt.gz"), text);
    LoadedDocument doc = load_document(dir.file("x.txt.gz"));
    EXPECT_EQ(doc.text, text);
    EXPECT_TRUE(doc.gzip);
    EXPECT_EQ(doc.format, DocumentFormat::Text);

    gzip_file(dir.file("y.md.gz"), "# Heading\n");
    EXPECT_EQ(load_document(dir.file("y.md.gz")).format, DocumentFormat::Markdown);

    // Two members one after the other, as `cat a.gz b.gz` makes them.
    gzip_file(dir.file("b.gz"), "more\n");
    ASSERT_TRUE(write_file(dir.file("ab.txt.gz"),
                           read_file(dir.file("x.txt.gz")) + read_file(dir.file("b.gz"))));
    EXPECT_EQ(load_document(dir.file("ab.txt.gz")).text, text + "more\n");
}

TEST(DocumentLoader, CorruptGzipRefused) {
    TempDir dir;
    std::string long_text;
    for (int i = 0; i < 200; ++i)
        long_text += "line " + std::to_string(i) + " of a text that will be cut short\n";
    gzip_file(dir.file("full.txt.gz"), long_text);
    const std::string gz = read_file(dir.file("full.txt.gz"));
    ASSERT_TRUE(write_file(dir.file("cut.txt.gz"), gz.substr(0, gz.size() / 2)));
    expect_document_refused(dir.file("cut.txt.gz"), "truncated gzip");
    std::string flipped = gz;
    flipped[flipped.size() - 6] ^= 0x55; // in the CRC-32
    ASSERT_TRUE(write_file(dir.file("crc.txt.gz"), flipped));
    expect_document_refused(dir.file("crc.txt.gz"), "corrupt gzip");
}

TEST(DocumentLoader, RealDebianGzipMatchesZcat) {
    if (!have_program("zcat"))
        GTEST_SKIP() << "zcat not installed";
    int checked = 0;
    for (const char* path :
         {"/usr/share/doc/bash/NEWS.gz", "/usr/share/doc/shared-mime-info/NEWS.gz"}) {
        if (!fs::exists(path)) {
            std::cout << "[ skip ] " << path << " absent\n";
            continue;
        }
        const auto expected = run_command(std::string("zcat ") + path);
        ASSERT_TRUE(expected.has_value());
        const LoadedDocument doc = load_document(path);
        EXPECT_TRUE(doc.gzip);
        EXPECT_EQ(doc.source_encoding, "UTF-8") << path;
        EXPECT_EQ(doc.text, *expected) << path;
        ++checked;
    }
    if (checked == 0)
        GTEST_SKIP() << "neither NEWS.gz is installed (packages bash, shared-mime-info)";
}

// --- HTML ------------------------------------------------------------------------------------

TEST(DocumentLoader, HtmlInline) {
    TempDir dir;
    const std::string path = dir.file("page.html");
    ASSERT_TRUE(write_file(path, "<!DOCTYPE html>\n<html><head><title>Not text</title>\n"
                                 "<style>p { color: red; }</style></head>\n"
                                 "<body><script>var hidden = 1;</script>\n"
                                 "<h1>Caf&eacute; &amp; bar</h1>\n"
                                 "<p>First   paragraph\n  spans two lines.</p>\n"
                                 "<p>Second &lt;tag&gt; &#8212; <b>bold</b>, <i>it</i>.</p>\n"
                                 "<pre>\n  indented\n    more</pre>\n"
                                 "<ul><li>one</li><li>two</li></ul>\n"
                                 "<table><tr><td>a</td><td>b</td></tr></table>\n"
                                 "<noscript>enable js</noscript><template>tpl</template>\n"
                                 "Line<br>break</body></html>\n"));
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.format, DocumentFormat::Html);
    EXPECT_EQ(doc.text, "Caf\xc3\xa9 & bar\n\n"
                        "First paragraph spans two lines.\n\n"
                        "Second <tag> \xe2\x80\x94 bold, it.\n\n"
                        "  indented\n    more\n\n"
                        "\u2022 one\n\u2022 two\n\n"
                        "a\tb\n\n"
                        "Line\nbreak");
    // The anchors give the source line of each line of text.
    EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(doc.text.find("Caf"))).line, 5);
    EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(doc.text.find("First"))).line, 6);
    EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(doc.text.find("spans"))).line, 7);
    EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(doc.text.find("Second"))).line, 8);
    EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(doc.text.find("    more"))).line, 11);
    const auto& a = doc.anchor_at(static_cast<int64_t>(doc.text.find("First")));
    EXPECT_EQ(read_file(path).substr(static_cast<size_t>(a.source_offset), 12), "<p>First   p");
}

TEST(DocumentLoader, HtmlCharsetFromMetaAndUndeclaredLatin1) {
    TempDir dir;
    ASSERT_TRUE(write_file(dir.file("m.html"), "<html><head><meta charset=\"iso-8859-1\"></head>"
                                               "<body><p>caf\xe9 na\xefve</p></body></html>"));
    LoadedDocument doc = load_document(dir.file("m.html"));
    EXPECT_EQ(doc.text, "caf\xc3\xa9 na\xc3\xafve");
    // Windows-1252 quotes without a declaration: uchardet, not libxml2's ISO-8859-1 fallback.
    ASSERT_TRUE(write_file(dir.file("w.htm"),
                           "<html><body><p>\x93Quoted\x94 text \x96 with the caf\xe9 "
                           "and na\xefve r\xe9sum\xe9 of the \xe9t\xe9.</p></body></html>"));
    doc = load_document(dir.file("w.htm"));
    EXPECT_NE(doc.text.find("\xe2\x80\x9cQuoted\xe2\x80\x9d"), std::string::npos)
        << doc.source_encoding << ": " << doc.text;
}

TEST(DocumentLoader, HtmlNoteReferencedManyTimesIsReadOnce) {
    TempDir dir;
    // A 3 KB note referenced 2 000 times: read at each reference it would make 6 MB of text from
    // an 80 KB page (and gigabytes from a larger one).
    std::string note;
    while (note.size() < 3000)
        note += "note text ";
    note.pop_back();
    std::string page = "<html><body><p>See";
    for (int i = 1; i <= 2000; ++i)
        page += "<a epub:type=\"noteref\" href=\"#n\">" + std::to_string(i) + "</a>";
    page += "</p><aside epub:type=\"footnote\" id=\"n\"><p>" + note + "</p></aside></body></html>";
    ASSERT_TRUE(write_file(dir.file("notes.html"), page));
    const LoadedDocument doc = load_document(dir.file("notes.html"));
    // The note's text at its first reference, the later references their label alone.
    EXPECT_TRUE(doc.text.starts_with("See[1: " + note + "][2][3]")) << doc.text.substr(0, 100);
    EXPECT_TRUE(doc.text.ends_with("[2000]"));
    EXPECT_LT(doc.text.size(), page.size());
}

TEST(DocumentLoader, RealHtmlFile) {
    const std::string path = "/usr/share/doc/shared-mime-info/shared-mime-info-spec.html/x34.html";
    if (!fs::exists(path))
        GTEST_SKIP() << path << " absent (package shared-mime-info)";
    const LoadedDocument doc = load_document(path);
    EXPECT_EQ(doc.format, DocumentFormat::Html);
    for (const char* phrase : {"In discussions about the previous systems used by GNOME, KDE and "
                               "ROX",
                               "2. Unified system", "<?xml version=\"1.0\"", "<mime-type type="})
        EXPECT_NE(doc.text.find(phrase), std::string::npos) << phrase;
    // The examples contain XML as text; HTML markup must not leak.
    for (const char* tag : {"<DIV", "<div", "<P>", "<p>", "<A ", "<a ", "<TABLE", "<TD", "<PRE",
                            "<HTML", "<BODY", "</A>", "</P>", "HREF=", "CLASS=", "&lt;", "&#"})
        EXPECT_EQ(doc.text.find(tag), std::string::npos) << tag;
    EXPECT_EQ(doc.text.find("Unified system</"), std::string::npos);
    // DocBook starts each <PRE> with &#13;: it is the newline after the tag, not content.
    EXPECT_NE(doc.text.find("named diff.xml:\n\n<?xml version"), std::string::npos);
    // Anchors increase with the text and point at lines that exist.
    const std::string source = read_file(path);
    const auto lines = std::count(source.begin(), source.end(), '\n');
    for (size_t i = 1; i < doc.offset_map.size(); ++i) {
        EXPECT_LT(doc.offset_map[i - 1].text_offset, doc.offset_map[i].text_offset);
        EXPECT_LE(doc.offset_map[i - 1].line, doc.offset_map[i].line);
        EXPECT_LE(doc.offset_map[i].line, lines + 1);
    }
}

// --- PDF -------------------------------------------------------------------------------------

/// Our text against `pdftotext FILE -` (default mode), page by page: pdftotext ends every page
/// with a form feed; our pages start at the page anchors.
void compare_with_pdftotext(const std::string& path) {
    if (!fs::exists(path))
        GTEST_SKIP() << path << " absent";
    if (!have_program("pdftotext"))
        GTEST_SKIP() << "pdftotext (poppler-utils) not installed";
    const auto ref = run_command("pdftotext '" + path + "' - 2>/dev/null");
    ASSERT_TRUE(ref.has_value());
    std::vector<std::string> ref_pages;
    for (size_t start = 0, ff; (ff = ref->find('\f', start)) != std::string::npos; start = ff + 1)
        ref_pages.push_back(ref->substr(start, ff - start));

    const LoadedDocument doc = load_document(path);
    ASSERT_EQ(doc.format, DocumentFormat::Pdf);
    ASSERT_EQ(static_cast<size_t>(doc.pages), ref_pages.size());
    std::map<int, std::string> ours;
    for (size_t i = 0; i < doc.offset_map.size(); ++i) {
        const auto& a = doc.offset_map[i];
        const size_t end = i + 1 < doc.offset_map.size()
                               ? static_cast<size_t>(doc.offset_map[i + 1].text_offset)
                               : doc.text.size();
        ours[a.page] += doc.text.substr(static_cast<size_t>(a.text_offset),
                                        end - static_cast<size_t>(a.text_offset));
    }
    size_t common = 0, total = 0, ours_total = 0;
    for (size_t p = 0; p < ref_pages.size(); ++p) {
        const auto r = words(ref_pages[p]);
        const auto o = words(ours[static_cast<int>(p + 1)]);
        common += lcs_length(r, o);
        total += r.size();
        ours_total += o.size();
        if (r.empty()) {
            EXPECT_NE(std::find(doc.pages_without_text.begin(), doc.pages_without_text.end(),
                                static_cast<int>(p + 1)),
                      doc.pages_without_text.end());
        }
    }
    ASSERT_GT(total, 0u);
    const double agreement = static_cast<double>(common) / static_cast<double>(total);
    std::cout << "[ info ] " << path << ": " << doc.pages << " pages, " << total
              << " pdftotext words, " << ours_total << " ours, " << common
              << " in common in order: agreement " << 100.0 * agreement << " %\n";
    // pdftotext and poppler-cpp share poppler's text extraction: with the same reading order
    // they agree word for word. The physical-layout and raw orders measure 98.5-98.9 % here.
    EXPECT_GE(agreement, 0.995);
    EXPECT_LE(ours_total, total + total / 50);

    // The anchor at a line unique in the document names the page pdftotext finds it on.
    int checked = 0;
    for (size_t p = 0; p < ref_pages.size(); ++p) {
        std::istringstream lines(ref_pages[p]);
        for (std::string line; std::getline(lines, line);) {
            if (line.size() < 25 || ref->find(line) != ref->rfind(line))
                continue;
            const size_t at = doc.text.find(line);
            if (at == std::string::npos || doc.text.find(line, at + 1) != std::string::npos)
                continue;
            EXPECT_EQ(doc.anchor_at(static_cast<int64_t>(at)).page, static_cast<int>(p + 1))
                << line;
            ++checked;
            break; // one line per page
        }
    }
    std::cout << "[ info ] page anchors checked on " << checked << " pages\n";
    EXPECT_GE(checked * 2, static_cast<int>(ref_pages.size()));
}

TEST(DocumentLoader, PdfSharedMimeInfoSpecMatchesPdftotext) {
    compare_with_pdftotext("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf");
}

TEST(DocumentLoader, PdfBashManualMatchesPdftotext) {
    compare_with_pdftotext("/usr/share/doc/bash/bash.pdf");
}

TEST(DocumentLoader, PdfWithoutTextLayerRefused) {
    TempDir dir;
    ASSERT_TRUE(write_file(dir.file("scan.pdf"), make_pdf({kRectangle})));
    expect_document_refused(dir.file("scan.pdf"), "no text layer");
    expect_document_refused(dir.file("scan.pdf"), "OCR");
}

TEST(DocumentLoader, PdfPageWithoutTextListed) {
    TempDir dir;
    // No .pdf in the name: the content decides.
    ASSERT_TRUE(write_file(dir.file("two-pages"), make_pdf({kHello, kRectangle})));
    const LoadedDocument doc = load_document(dir.file("two-pages"));
    EXPECT_EQ(doc.format, DocumentFormat::Pdf);
    EXPECT_EQ(doc.text, "Hello page one");
    EXPECT_EQ(doc.pages, 2);
    EXPECT_EQ(doc.pages_without_text, std::vector<int32_t>{2});
    ASSERT_EQ(doc.warnings.size(), 1u);
    EXPECT_EQ(doc.warnings[0], "page 2 has no text layer (OCR found no text on it)");
    EXPECT_TRUE(doc.ocr_pages.empty());
    EXPECT_EQ(doc.anchor_at(6).page, 1);

    // Pages that follow an empty one keep their own number; gzip works for PDF too.
    gzip_file(dir.file("three.pdf.gz"), make_pdf({kRectangle, kHello, kHello}));
    const LoadedDocument three = load_document(dir.file("three.pdf.gz"));
    EXPECT_TRUE(three.gzip);
    EXPECT_EQ(three.text, "Hello page one\n\nHello page one");
    EXPECT_EQ(three.pages_without_text, std::vector<int32_t>{1});
    EXPECT_EQ(three.anchor_at(0).page, 2);
    EXPECT_EQ(three.anchor_at(16).page, 3);
}

TEST(DocumentLoader, PasswordProtectedPdfRefused) {
    TempDir dir;
    // The standard security handler with /U bytes that the empty user password does not
    // match: opening needs a password.
    const std::string hex32(64, 'a');
    ASSERT_TRUE(write_file(dir.file("locked.pdf"),
                           make_pdf({kHello}, "<< /Filter /Standard /V 1 /R 2 /O <" + hex32 +
                                                  "> /U <" + hex32 + "> /P -44 >>")));
    expect_document_refused(dir.file("locked.pdf"), "encrypted PDF that needs a password");
}

TEST(DocumentLoader, CorruptPdfRefusedQuietly) {
    TempDir dir;
    std::string garbage = "%PDF-1.7\n";
    uint32_t x = 12345;
    for (int i = 0; i < 4000; ++i) {
        x = x * 1664525u + 1013904223u;
        garbage += static_cast<char>(x >> 24);
    }
    ASSERT_TRUE(write_file(dir.file("bad.pdf"), garbage));
    // A real PDF cut in half.
    const std::string pdf = make_pdf({kHello});
    ASSERT_TRUE(write_file(dir.file("cut.pdf"), pdf.substr(0, pdf.size() / 3)));
    testing::internal::CaptureStderr();
    const std::string bad = document_error(dir.file("bad.pdf"));
    const std::string cut = document_error(dir.file("cut.pdf"));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(bad.rfind(dir.file("bad.pdf") + ": ", 0), 0u) << bad;
    EXPECT_NE(bad.find("PDF"), std::string::npos) << bad;
    EXPECT_EQ(cut.rfind(dir.file("cut.pdf") + ": ", 0), 0u) << cut;
    EXPECT_EQ(err, "") << "poppler wrote to stderr";
    // A .pdf name on something else is not a PDF.
    ASSERT_TRUE(write_file(dir.file("text.pdf"), "just some text\n"));
    expect_document_refused(dir.file("text.pdf"), "not a readable PDF");
}

// --- offset map ------------------------------------------------------------------------------

TEST(DocumentLoader, AnchorAtBinarySearch) {
    LoadedDocument doc;
    for (int i = 0; i < 100; ++i)
        doc.offset_map.push_back({i * 10, i * 20 + 3, 0, i + 1});
    for (int64_t off = 0; off < 1000; ++off) {
        const auto& a = doc.anchor_at(off);
        ASSERT_EQ(a.text_offset, off / 10 * 10) << off;
        ASSERT_EQ(a.line, off / 10 + 1) << off;
    }
    EXPECT_EQ(doc.anchor_at(5000).line, 100); // past the end: the last anchor
    EXPECT_EQ(doc.anchor_at(-1).line, 1);     // before the start: the first
    LoadedDocument one;
    one.offset_map.push_back({});
    EXPECT_EQ(&one.anchor_at(42), &one.offset_map[0]);
}
