#include "storage/page_ocr.h"

#include "engine/kernels/cancel.h"
#include "engine/text/text_input.h" // DocumentError

#include <poppler-image.h>
#include <poppler-page-renderer.h>
#include <poppler-page.h>
#include <tesseract/baseapi.h>
#include <tesseract/ocrclass.h>

#include <algorithm>
#include <vector>

namespace spanscope {

namespace {

constexpr double kDpi = 300;             // Tesseract's documented best resolution for text
constexpr double kMaxSidePixels = 10000; // 33 inches at 300 dpi: a poster is read coarser

bool cancel_requested(void* flag, int /*words*/) {
    return flag && static_cast<const std::atomic<bool>*>(flag)->load();
}

} // namespace

struct PageOcr::Engine {
    tesseract::TessBaseAPI api;
};

PageOcr::PageOcr() : engine_(std::make_unique<Engine>()) {
    // Tesseract's own messages ("Error opening data file", "Empty page!!") go to its debug
    // file instead of stderr: what the user reads is the DocumentError and the warnings.
    engine_->api.SetVariable("debug_file", "/dev/null");
    const std::vector<std::string> names{"debug_file"}, values{"/dev/null"};
    // nullptr: the data path the library was built with, or $TESSDATA_PREFIX.
    if (engine_->api.Init(nullptr, "eng", tesseract::OEM_DEFAULT, nullptr, 0, &names, &values,
                          false) != 0) {
        reason_ = "Tesseract's English data is not installed (Debian package tesseract-ocr-eng)";
        return;
    }
    engine_->api.SetPageSegMode(tesseract::PSM_AUTO);
    available_ = true;
}

PageOcr::~PageOcr() {
    if (available_)
        engine_->api.End();
}

std::string PageOcr::read(const poppler::page& page, const std::string& path, int number,
                          const std::atomic<bool>* cancel) {
    const std::string where = path + ": page " + std::to_string(number);
    if (!available_)
        throw DocumentError(where + " cannot be read by OCR: " + reason_);
    if (cancel && cancel->load())
        throw Cancelled();
    const poppler::rectf box = page.page_rect();
    const double side = std::max(box.width(), box.height()); // points: 1/72 inch
    if (!(side > 0))
        throw DocumentError(where + " has no size and cannot be rendered for OCR");
    const double dpi = std::min(kDpi, kMaxSidePixels * 72.0 / side);
    poppler::page_renderer renderer;
    renderer.set_image_format(poppler::image::format_gray8);
    renderer.set_render_hint(poppler::page_renderer::antialiasing, true);
    renderer.set_render_hint(poppler::page_renderer::text_antialiasing, true);
    const poppler::image image = renderer.render_page(&page, dpi, dpi);
    if (!image.is_valid() || image.width() <= 0 || image.height() <= 0)
        throw DocumentError(where + " could not be rendered for OCR");

    auto& api = engine_->api;
    api.SetImage(reinterpret_cast<const unsigned char*>(image.const_data()), image.width(),
                 image.height(), 1, image.bytes_per_row());
    api.SetSourceResolution(static_cast<int>(dpi));
    tesseract::ETEXT_DESC monitor;
    monitor.cancel = cancel_requested;
    monitor.cancel_this = const_cast<std::atomic<bool>*>(cancel);
    const int rc = api.Recognize(&monitor);
    if (cancel && cancel->load()) {
        api.Clear();
        throw Cancelled();
    }
    if (rc != 0) {
        api.Clear();
        throw DocumentError(where + ": Tesseract could not recognise it");
    }
    const std::unique_ptr<char[]> text(api.GetUTF8Text());
    api.Clear();
    return text ? std::string(text.get()) : std::string();
}

} // namespace spanscope
