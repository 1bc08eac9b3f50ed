// The main window's live zoom (docs/desktop-app.md, "Live zoom"): while a sekv answer streams,
// the engine worker sends each generated token's zoom step (EngineWorker::answer_zoom); the
// window appends it to the streamed zoom, draws the latest token's spans over the shown document
// (those that carried most of its attention mass in a strong tint, the others it expanded in a
// light one, TokenSpans) and shows the steps so far in the inspector, a column per token. A
// column clicked in the grid keeps that token drawn until the answer ends. When it ends, the
// trace saved with the answer takes the views over as before (main_window_zoom.cpp).
#include "ui/main_window.h"

#include "ui/document_view.h"
#include "ui/zoom_inspector.h"

#include <QDockWidget>
#include <QLocale>

#include <algorithm>
#include <stdexcept>

namespace spanscope::gui {

namespace {
// The step of a streamed zoom the views draw: the one picked in the grid, else the latest.
int drawn_step(const AnswerZoom& zoom, int pinned) {
    const int last = zoom.steps() - 1;
    return pinned >= 0 && pinned <= last ? pinned : last;
}
} // namespace

void MainWindow::on_answer_zoom(quint64 serial, int token, const TokenZoomPtr& zoom) {
    if (serial != ask_serial_ || !answering_ || !zoom || !zoom->sources)
        return; // an answer ended here, or replaced by another
    if (!live_zoom_ || live_serial_ != serial) {
        StoredZoomTrace t;
        t.sources = *zoom->sources;
        for (const auto& s : t.sources)
            t.trace.n_spans = std::max(t.trace.n_spans, s.first_span + s.n_spans);
        live_zoom_ = std::make_shared<AnswerZoom>(0, std::move(t));
        live_serial_ = serial;
        live_shown_ = true;
        live_pinned_ = -1;
        open_inspector_once(); // with the first zoom, as for a saved one
    }
    if (token != live_zoom_->steps())
        return; // each step comes once, in order: a gap means this is not the answer's stream
    try {
        live_zoom_->append_step(zoom->step);
    } catch (const std::runtime_error&) {
        return; // a step shaped unlike the first: not drawn (the saved trace is refused too)
    }
    if (live_shown_)
        draw_live_zoom();
}

void MainWindow::draw_live_zoom() {
    if (!live_shown_ || !live_zoom_ || live_zoom_->steps() == 0)
        return;
    const int step = drawn_step(*live_zoom_, live_pinned_);
    inspector_->set_zoom(live_zoom_,
                         tr("Answering: a column is added as each token is generated; the "
                            "tokens' text and the full-policy reference follow when the answer "
                            "is saved."));
    inspector_->set_selected_step(step);
    update_zoom_bar(); // first: whoever watches the view sees the window's line for its step
    if (!zoom_fits_spans(*live_zoom_)) {
        document_view_->clear_zoom();
        return;
    }
    const TokenSpans ts = token_spans(live_zoom_->stored().trace.steps[static_cast<size_t>(step)]);
    std::map<std::pair<int, int>, DocumentView::LiveSpan> here;
    for (const auto& [span, n] : ts.counts) {
        SpanRef ref;
        if (live_zoom_->locate(span, &ref) && ref.document_id == shown_document_)
            here[{ref.unit, ref.index}] = {n, ts.carried.count(span) > 0};
    }
    document_view_->set_live_zoom(here, step, ts.measured,
                                  tr("token %1 of the answer being written").arg(step));
}

QString MainWindow::live_zoom_text() const {
    if (!live_zoom_ || live_zoom_->steps() == 0)
        return {};
    if (!zoom_fits_spans(*live_zoom_))
        return tr("This answer is made with other SEKV settings than the spans shown: its zoom "
                  "is not drawn.");
    const int step = drawn_step(*live_zoom_, live_pinned_);
    const TokenSpans ts = token_spans(live_zoom_->stored().trace.steps[static_cast<size_t>(step)]);
    int here = 0, carried_here = 0;
    for (const auto& [span, n] : ts.counts) {
        SpanRef ref;
        if (live_zoom_->locate(span, &ref) && ref.document_id == shown_document_) {
            ++here;
            carried_here += ts.carried.count(span) > 0;
        }
    }
    const QLocale l;
    const QString spans =
        count_text(static_cast<qint64>(ts.counts.size()), tr("span"), tr("spans"));
    if (!ts.measured)
        return tr("Answering: token %1 zoomed into %2, %3 of them in this document (its "
                  "attention mass was not measured: all are drawn alike).")
            .arg(QString::number(step), spans, l.toString(here));
    return tr("Answering: token %1 zoomed into %2, %3 of them in this document; dark: the %4 "
              "that carried half of the attention mass its expanded spans held (%5 here), light: "
              "the others.")
        .arg(QString::number(step), spans, l.toString(here),
             l.toString(static_cast<qint64>(ts.carried.size())), l.toString(carried_here));
}

void MainWindow::end_live_zoom(bool restore) {
    if (!live_shown_)
        return;
    live_shown_ = false;
    live_pinned_ = -1;
    if (!restore)
        return; // the saved trace replaces what is drawn once it is loaded (on_zoom_loaded)
    const int row = zoom_ ? chat_.row_of_message(zoom_->message_id()) : -1;
    const QString message =
        zoom_ || !zoom_problem_.isEmpty()
            ? zoom_problem_
            : tr("Select an answer given with the sekv memory policy: its zoom decisions are "
                 "shown here.");
    inspector_->set_zoom(zoom_, message, row >= 0 ? chat_.messages()[row].full_kv_bytes : 0);
    inspector_->set_selected_step(zoom_step_);
    apply_zoom(false);
}

} // namespace spanscope::gui
