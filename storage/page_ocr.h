// Optical character recognition of PDF pages that have no text layer (scans): each page
// rendered by poppler and read by Tesseract.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace poppler {
class page;
}

namespace spanscope {

/// One Tesseract engine for English, started once for a document's pages.
class PageOcr {
public:
    /// Starts Tesseract with its English data (Debian's tesseract-ocr-eng; $TESSDATA_PREFIX
    /// when set). Never throws: without the library's data `available()` is false and
    /// `unavailable_reason()` says what to install.
    PageOcr();
    ~PageOcr();
    PageOcr(const PageOcr&) = delete;
    PageOcr& operator=(const PageOcr&) = delete;

    bool available() const { return available_; }
    const std::string& unavailable_reason() const { return reason_; }

    /// The text of `page`: rendered in 8-bit grey at 300 dots per inch (less for a page larger
    /// than 33 inches on a side: at most 10 000 pixels a side), recognised with Tesseract's
    /// automatic page segmentation; UTF-8, lines as Tesseract finds them, paragraphs set
    /// apart by blank lines. `cancel` (may be null) is polled while Tesseract recognises words.
    /// Throws Cancelled when `cancel` was set; DocumentError (message starts with `path`) when
    /// the page cannot be rendered or Tesseract fails on it.
    std::string read(const poppler::page& page, const std::string& path, int number,
                     const std::atomic<bool>* cancel);

private:
    struct Engine;
    std::unique_ptr<Engine> engine_;
    bool available_ = false;
    std::string reason_;
};

} // namespace spanscope
