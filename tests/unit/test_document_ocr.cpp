// Scanned PDFs: pages of a real PDF from a Debian package turned into images (pdftoppm) and
// wrapped as an image-only PDF (img2pdf) are read back by OCR with the words pdftotext finds
// in the original; a PDF mixing both keeps its text layer; OCR stops when cancelled, and says
// what to install when Tesseract's data is missing.
#include "engine/kernels/cancel.h"
#include "storage/document_loader.h"
#include "storage/page_ocr.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using spanscope::DocumentError;
using spanscope::load_document;
using spanscope::LoadedDocument;
using spanscope::LoadOptions;
using spanscope::test::document_error;
using spanscope::test::expect_document_refused;
using spanscope::test::have_program;
using spanscope::test::lcs_length;
using spanscope::test::letter_words;
using spanscope::test::run_command;
using spanscope::test::TempDir;

namespace {

const std::string kSource = "/usr/share/doc/bash/bash.pdf"; // Debian package bash-doc

/// Why the machine cannot make the scans, or "" when it can.
std::string missing_tools() {
    if (!fs::exists(kSource))
        return kSource + " absent (Debian package bash-doc)";
    for (const char* tool : {"pdftoppm", "pdftotext", "pdfunite", "pdfseparate"})
        if (!have_program(tool))
            return std::string(tool) + " (Debian package poppler-utils) is not installed";
    if (!have_program("img2pdf"))
        return "img2pdf (Debian package img2pdf) is not installed";
    if (spanscope::PageOcr ocr; !ocr.available())
        return ocr.unavailable_reason();
    return "";
}

/// Pages first..last of the source as an image-only PDF: rendered in grey at 300 dpi, each
/// image one page.
std::string scan(const TempDir& dir, int first, int last, const std::string& name) {
    const std::string prefix = dir.file(name + "-page");
    if (!run_command("pdftoppm -r 300 -gray -png -f " + std::to_string(first) + " -l " +
                     std::to_string(last) + " '" + kSource + "' '" + prefix + "'"))
        return "";
    const std::string out = dir.file(name + ".pdf");
    if (!run_command("img2pdf '" + prefix + "'-*.png -o '" + out + "' 2>/dev/null"))
        return "";
    return out;
}

} // namespace

TEST(DocumentOcr, ScannedPagesReadBackWithTheWordsOfTheTextLayer) {
    if (const auto why = missing_tools(); !why.empty())
        GTEST_SKIP() << why;
    TempDir dir;
    const std::string scanned = scan(dir, 1, 3, "scan");
    ASSERT_FALSE(scanned.empty());
    // The scan has no text layer at all: without OCR it is refused, as before.
    LoadOptions no_ocr;
    no_ocr.ocr = false;
    EXPECT_THROW(load_document(scanned, no_ocr), DocumentError);

    std::vector<std::pair<int, int>> progress;
    LoadOptions options;
    options.on_ocr_page = [&](int page, int pages) { progress.emplace_back(page, pages); };
    const LoadedDocument doc = load_document(scanned, options);
    EXPECT_EQ(doc.pages, 3);
    EXPECT_EQ(doc.ocr_pages, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_TRUE(doc.pages_without_text.empty());
    EXPECT_EQ(progress, (std::vector<std::pair<int, int>>{{1, 3}, {2, 3}, {3, 3}}));
    ASSERT_EQ(doc.warnings.size(), 1u);
    EXPECT_NE(doc.warnings[0].find("pages 1\u20133 have no text layer; read by OCR"),
              std::string::npos)
        << doc.warnings[0];

    size_t common = 0, total = 0;
    for (int page = 1; page <= 3; ++page) {
        const auto ref = run_command("pdftotext -f " + std::to_string(page) + " -l " +
                                     std::to_string(page) + " '" + kSource + "' - 2>/dev/null");
        ASSERT_TRUE(ref.has_value());
        // Our text of that page: from its anchor to the next.
        std::string ours;
        for (size_t i = 0; i < doc.offset_map.size(); ++i)
            if (doc.offset_map[i].page == page) {
                const auto begin = static_cast<size_t>(doc.offset_map[i].text_offset);
                const size_t end = i + 1 < doc.offset_map.size()
                                       ? static_cast<size_t>(doc.offset_map[i + 1].text_offset)
                                       : doc.text.size();
                ours += doc.text.substr(begin, end - begin);
            }
        const auto r = letter_words(*ref), o = letter_words(ours);
        common += lcs_length(r, o);
        total += r.size();
    }
    ASSERT_GT(total, 200u);
    const double found = double(common) / double(total);
    std::cout << "[ info ] OCR of pages 1-3 of " << kSource << " at 300 dpi: " << total
              << " words in pdftotext's text of the original, " << common
              << " of them read back in order: " << 100 * found << " %\n";
    EXPECT_GE(found, 0.95);
}

TEST(DocumentOcr, AMixedPdfKeepsItsTextLayerWhereItHasOne) {
    if (const auto why = missing_tools(); !why.empty())
        GTEST_SKIP() << why;
    TempDir dir;
    const std::string scanned = scan(dir, 2, 2, "scan");
    ASSERT_FALSE(scanned.empty());
    const std::string first = dir.file("first.pdf"), mixed = dir.file("mixed.pdf");
    ASSERT_TRUE(run_command("pdfseparate -f 1 -l 1 '" + kSource + "' '" + first + "'"));
    ASSERT_TRUE(run_command("pdfunite '" + first + "' '" + scanned + "' '" + mixed + "'"));

    const LoadedDocument layer_only = load_document(first);
    const LoadedDocument doc = load_document(mixed);
    EXPECT_EQ(doc.pages, 2);
    EXPECT_EQ(doc.ocr_pages, std::vector<int32_t>{2});
    // Page 1 is its text layer, byte for byte; page 2 follows it.
    EXPECT_EQ(doc.text.substr(0, layer_only.text.size()), layer_only.text);
    ASSERT_GE(doc.offset_map.size(), 2u);
    EXPECT_EQ(doc.offset_map[1].page, 2);
    EXPECT_EQ(static_cast<size_t>(doc.offset_map[1].text_offset), layer_only.text.size() + 2);
    EXPECT_GT(doc.text.size(), layer_only.text.size() + 500);
}

TEST(DocumentOcr, CancelStopsOcrAndMissingDataSaysWhatToInstall) {
    if (const auto why = missing_tools(); !why.empty())
        GTEST_SKIP() << why;
    TempDir dir;
    const std::string scanned = scan(dir, 1, 2, "scan");
    ASSERT_FALSE(scanned.empty());
    // A Cancel pressed while the first page is announced: nothing more is read.
    std::atomic<bool> cancel{false};
    int announced = 0;
    LoadOptions options;
    options.cancel = &cancel;
    options.on_ocr_page = [&](int, int) {
        ++announced;
        cancel = true;
    };
    EXPECT_THROW(load_document(scanned, options), spanscope::Cancelled);
    EXPECT_EQ(announced, 1);

    // A Cancel pressed while Tesseract reads the first page stops inside that page: in less
    // than half the time the page takes uncancelled (measured first, on this machine).
    using Clock = std::chrono::steady_clock;
    Clock::time_point page_start;
    double page_s = 0;
    {
        LoadOptions one;
        one.on_ocr_page = [&](int page, int) {
            if (page == 1)
                page_start = Clock::now();
            else if (page == 2)
                page_s = std::chrono::duration<double>(Clock::now() - page_start).count();
        };
        load_document(scanned, one);
    }
    ASSERT_GT(page_s, 0.0);
    std::atomic<bool> stop{false}, started{false};
    LoadOptions mid;
    mid.cancel = &stop;
    mid.on_ocr_page = [&](int, int) { started = true; };
    Clock::time_point stopped_at;
    std::thread canceller([&] {
        while (!started)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        std::this_thread::sleep_for(std::chrono::duration<double>(page_s / 4));
        stopped_at = Clock::now();
        stop = true;
    });
    EXPECT_THROW(load_document(scanned, mid), spanscope::Cancelled);
    const double delay = std::chrono::duration<double>(Clock::now() - stopped_at).count();
    canceller.join();
    std::cout << "[ info ] a page takes " << page_s << " s; Cancel a quarter into it stopped "
              << delay << " s later\n";
    EXPECT_LT(delay, page_s / 2);

    // Without Tesseract's data: one line naming the package.
    const char* before = std::getenv("TESSDATA_PREFIX");
    const std::string saved = before ? before : "";
    setenv("TESSDATA_PREFIX", dir.path.c_str(), 1);
    std::string message;
    try {
        load_document(scanned);
    } catch (const DocumentError& e) {
        message = e.what();
    }
    if (before)
        setenv("TESSDATA_PREFIX", saved.c_str(), 1);
    else
        unsetenv("TESSDATA_PREFIX");
    EXPECT_NE(message.find("tesseract-ocr-eng"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}
