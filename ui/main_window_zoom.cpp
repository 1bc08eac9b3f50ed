// The main window's SEKV views (docs/desktop-app.md): the shown document's spans (built on the
// engine thread), an answer's zoom trace (read on the store thread) drawn over the document for a
// token or the whole answer, and the inspector dock.
#include "ui/main_window.h"

#include "ui/chat_delegate.h"
#include "ui/document_view.h"
#include "ui/engine_worker.h"
#include "ui/store_worker.h"
#include "ui/zoom_inspector.h"

#include <QAction>
#include <QDockWidget>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QMenuBar>
#include <QScrollArea>
#include <QToolButton>

#include <algorithm>
#include <utility>

namespace spanscope::gui {

namespace {
QString quoted(QString token) {
    if (!token.trimmed().isEmpty())
        token = token.trimmed();
    token.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
    return QStringLiteral("“%1”").arg(token);
}
} // namespace

void MainWindow::build_zoom_ui() {
    inspector_ = new ZoomInspector;
    inspector_dock_ = new QDockWidget(tr("Inspector"), this);
    inspector_dock_->setObjectName(QStringLiteral("inspectorDock"));
    // Scrolled, so that the dock can be lower than the grid and the chart together.
    auto* scroll = new QScrollArea;
    scroll->setWidget(inspector_);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    inspector_dock_->setWidget(scroll);
    addDockWidget(Qt::BottomDockWidgetArea, inspector_dock_);
    inspector_dock_->hide();
    connect(inspector_, &ZoomInspector::step_selected, this, [this](int step) {
        if (live_shown_) { // a token of the answer being written: kept drawn until it ends
            live_pinned_ = step;
            draw_live_zoom();
        } else if (zoom_) {
            select_answer_token(zoom_->message_id(), step);
        }
    });

    auto* view = menuBar()->addMenu(tr("&View"));
    QAction* toggle = inspector_dock_->toggleViewAction();
    toggle->setText(tr("&Inspector"));
    toggle->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_I));
    connect(toggle, &QAction::triggered, this, [this] { inspector_shown_once_ = true; });
    view->addAction(toggle);
    whole_action_ = view->addAction(tr("&Whole Answer Heat Map"));
    whole_action_->setCheckable(true);
    whole_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_H));
    connect(whole_action_, &QAction::toggled, this, &MainWindow::set_whole_answer);
    view->addAction(tr("&Clear Zoom"), this, [this] {
        end_live_zoom(/*restore=*/true);
        zoom_step_ = -1;
        set_whole_answer(false);
        if (zoom_)
            chat_.select_token(zoom_->message_id(), -1);
        inspector_->set_selected_step(-1);
        apply_zoom(false);
    });
}

QString MainWindow::zoom_text() const {
    return zoom_bar_->isHidden() ? QString() : zoom_label_->text();
}

QString MainWindow::span_status_text() const {
    return span_status_->text();
}

void MainWindow::show_document(qint64 id) {
    const int r = documents_.row_of_id(id);
    if (r >= 0)
        document_list_->setCurrentIndex(documents_.index(r));
}

void MainWindow::on_document_text(qint64 id, const QString& name, const QString& text,
                                  const TextPositionsPtr& positions) {
    if (id != shown_document_)
        return;
    document_title_->setText(QStringLiteral("<b>%1</b>").arg(name.toHtmlEscaped()));
    document_view_->show_document(id, text, positions);
    if (cited_.document_id == id)
        draw_citation();
    else
        clear_citation(); // another document: the citation shown goes
    emit document_shown(id);
    request_spans();
}

void MainWindow::request_spans(bool again) {
    const qint64 id = shown_document_;
    if (id <= 0 || document_view_->document_id() != id)
        return;
    if (!settings_.memory.sekv()) {
        document_view_->clear_spans();
        span_status_->clear();
        apply_zoom(pending_scroll_);
        emit document_spans_shown(id);
        return;
    }
    if (!again && spans_.contains(id)) {
        on_document_spans(spans_serial_, spans_[id]);
        return;
    }
    spans_.remove(id);
    span_status_->setText(tr("building SEKV spans…"));
    const quint64 serial = ++spans_serial_;
    QMetaObject::invokeMethod(engine_, [e = engine_, serial, id, m = settings_.memory] {
        e->load_document_spans(serial, id, m);
    });
}

void MainWindow::on_document_spans(quint64 serial, const DocumentSpansPtr& spans) {
    if (!spans || spans->key != settings_.memory.spans_key())
        return; // built for settings changed since
    spans_[spans->document_id] = spans;
    if (spans->document_id != shown_document_ || serial != spans_serial_ ||
        document_view_->document_id() != shown_document_)
        return;
    if (!spans->error.isEmpty()) {
        document_view_->clear_spans();
        span_status_->setText(tr("no SEKV spans shown"));
        span_status_->setToolTip(
            tr("SEKV spans cannot be shown for this document: %1").arg(spans->error));
    } else {
        document_view_->set_spans(spans);
        const QLocale l;
        span_status_->setText(tr("%1 spans · %2 anchors")
                                  .arg(l.toString(document_view_->span_marks().size()))
                                  .arg(l.toString(document_view_->anchor_ranges().size())));
        span_status_->setToolTip(
            tr("SEKV holds each tinted span as a summary row, expanded when a query needs it; "
               "anchors (underlined) stay at full resolution. Hover a span for its details."));
    }
    apply_zoom(pending_scroll_);
    emit document_spans_shown(spans->document_id);
}

void MainWindow::show_answer_zoom(qint64 message_id) {
    if (zoom_ && zoom_->message_id() == message_id)
        return;
    pending_token_ = -1;
    load_zoom(message_id);
}

void MainWindow::load_zoom(qint64 message_id) {
    zoom_requested_ = message_id;
    if (const auto it = zooms_.constFind(message_id); it != zooms_.constEnd()) {
        on_zoom_loaded(message_id, *it, QString());
        return;
    }
    QMetaObject::invokeMethod(store_, [s = store_, message_id] { s->load_zoom_trace(message_id); });
}

void MainWindow::on_zoom_loaded(qint64 message_id, const AnswerZoomPtr& zoom,
                                const QString& problem) {
    if (message_id != zoom_requested_)
        return; // another answer was selected since
    if (zoom)
        zooms_.insert(message_id, zoom);
    if (zoom && zoom_ && zoom_->message_id() == message_id) {
        // Shown already (it was asked for twice): only a token waiting for it changes.
        if (pending_token_ >= 0)
            select_answer_token(message_id, std::exchange(pending_token_, -1));
        return;
    }
    zoom_ = zoom;
    zoom_problem_ = problem;
    zoom_step_ = zoom ? pending_token_ : -1;
    pending_token_ = -1;
    const int row = chat_.row_of_message(message_id);
    inspector_->set_zoom(zoom, problem, row >= 0 ? chat_.messages()[row].full_kv_bytes : 0);
    if (zoom) {
        chat_.set_tokens(message_id, zoom->text(), zoom->token_starts());
        open_inspector_once();
    }
    chat_.select_token(message_id, zoom_step_);
    inspector_->set_selected_step(zoom_step_);
    apply_zoom(zoom_step_ >= 0 || whole_answer_);
    emit zoom_loaded(message_id, zoom != nullptr);
}

void MainWindow::select_answer_token(qint64 message_id, int token) {
    end_live_zoom(/*restore=*/true); // the user's choice replaces the answer being written
    clear_citation();
    if (whole_answer_) {
        whole_answer_ = false;
        QSignalBlocker b1(whole_button_), b2(whole_action_);
        whole_button_->setChecked(false);
        whole_action_->setChecked(false);
    }
    if (!zoom_ || zoom_->message_id() != message_id) {
        pending_token_ = token;
        load_zoom(message_id);
        return;
    }
    zoom_step_ = token >= 0 && token < zoom_->steps() ? token : -1;
    chat_.select_token(message_id, zoom_step_);
    const int row = chat_.row_of_message(message_id);
    if (row >= 0)
        conversation_->scrollTo(chat_.index(row));
    inspector_->set_selected_step(zoom_step_);
    apply_zoom(true);
}

void MainWindow::set_whole_answer(bool on) {
    {
        QSignalBlocker b1(whole_button_), b2(whole_action_);
        whole_button_->setChecked(on);
        whole_action_->setChecked(on);
    }
    if (on) {
        end_live_zoom(/*restore=*/true);
        clear_citation();
    }
    if (on == whole_answer_)
        return;
    whole_answer_ = on;
    apply_zoom(on);
}

void MainWindow::clear_zoom_state() {
    clear_citation();
    live_shown_ = false;
    live_pinned_ = -1;
    zoom_.reset();
    zoom_requested_ = 0;
    zoom_problem_.clear();
    zoom_step_ = pending_token_ = -1;
    pending_scroll_ = false;
    set_whole_answer(false);
    inspector_->set_zoom(nullptr, tr("Select an answer given with the sekv memory policy: its "
                                     "zoom decisions are shown here."));
    document_view_->clear_zoom();
    update_zoom_bar();
}

bool MainWindow::zoom_fits_spans(const AnswerZoom& zoom) const {
    const auto it = spans_.find(shown_document_);
    if (it == spans_.end() || !it.value())
        return true; // nothing drawn to disagree with
    const auto& units = it.value()->units;
    for (const auto& src : zoom.stored().sources)
        if (src.document_id == shown_document_ &&
            (src.unit >= static_cast<int>(units.size()) ||
             static_cast<int>(units[static_cast<size_t>(src.unit)].spans.size()) != src.n_spans))
            return false;
    return true;
}

void MainWindow::apply_zoom(bool scroll) {
    if (live_shown_) { // an answer being written shows its latest token
        draw_live_zoom();
        return;
    }
    const int step = whole_answer_ ? -1 : zoom_step_;
    if (!zoom_ || (step < 0 && !whole_answer_)) {
        document_view_->clear_zoom();
        pending_scroll_ = false;
        update_zoom_bar();
        return;
    }
    // Another model's answer numbers that model's spans, never the ones shown: not drawn, and
    // no other document is brought up for it.
    const int row = chat_.row_of_message(zoom_->message_id());
    const MessageRow* m = row >= 0 ? &chat_.messages()[row] : nullptr;
    if (m && !m->model_id.isEmpty() && !model_id_.isEmpty() && m->model_id != model_id_) {
        document_view_->clear_zoom();
        pending_scroll_ = false;
        zoom_label_->setText(tr("This answer was made with the model %1, not the one loaded: its "
                                "spans are not the ones shown, so its zoom is not drawn.")
                                 .arg(m->model_shown));
        zoom_bar_->setVisible(true);
        return;
    }
    const auto counts = zoom_->span_counts(step);
    if (scroll && !counts.empty()) {
        // The document of the first span zoomed into is the one to show.
        SpanRef first;
        if (zoom_->locate(counts.begin()->first, &first) && first.document_id != shown_document_ &&
            documents_.row_of_id(first.document_id) >= 0) {
            pending_scroll_ = true;
            document_view_->clear_zoom();
            update_zoom_bar();
            show_document(first.document_id);
            return;
        }
    }
    // The answer's sections must hold the spans shown: a trace made under other SEKV settings
    // (another budget, say) numbers another segmentation, and is not drawn onto this one.
    if (!zoom_fits_spans(*zoom_)) {
        document_view_->clear_zoom();
        zoom_label_->setText(tr("This answer was made with other SEKV settings: its spans are "
                                "not the ones shown, so its zoom is not drawn."));
        zoom_bar_->setVisible(true);
        return;
    }
    std::map<std::pair<int, int>, int> here;
    int most = 1;
    for (const auto& [span, n] : counts) {
        SpanRef ref;
        if (zoom_->locate(span, &ref) && ref.document_id == shown_document_)
            here[{ref.unit, ref.index}] = n;
        most = std::max(most, n);
    }
    QString what;
    if (whole_answer_)
        what = tr("over the whole answer: %1, each with %2 layer-head pairs")
                   .arg(count_text(zoom_->steps(), tr("token"), tr("tokens")),
                        QString::number(zoom_->rows()));
    else
        what = tr("for token %1 %2, out of %3 layer-head pairs")
                   .arg(QString::number(step), quoted(zoom_->token_texts().value(step)),
                        QString::number(zoom_->rows()));
    document_view_->set_zoom(here, whole_answer_ ? most : zoom_->rows(), what);
    const bool drawn = spans_.contains(shown_document_) && document_view_->has_spans();
    if (scroll || pending_scroll_) {
        if (drawn)
            document_view_->scroll_to_zoom();
        pending_scroll_ = !drawn && settings_.memory.sekv();
    }
    update_zoom_bar();
    if (drawn)
        emit zoom_shown(zoom_->message_id(), step);
}

void MainWindow::update_zoom_bar() {
    if (live_shown_ && live_zoom_ && live_zoom_->steps() > 0) {
        zoom_label_->setText(live_zoom_text());
        zoom_bar_->show();
        return;
    }
    if (!zoom_) {
        zoom_label_->setText(zoom_problem_);
        whole_button_->setEnabled(false);
        zoom_bar_->setVisible(!zoom_problem_.isEmpty());
        return;
    }
    whole_button_->setEnabled(true);
    const int step = whole_answer_ ? -1 : zoom_step_;
    const auto counts = zoom_->span_counts(step);
    int here = 0;
    for (const auto& [span, n] : counts) {
        SpanRef ref;
        here += zoom_->locate(span, &ref) && ref.document_id == shown_document_;
    }
    const QLocale l;
    QString text;
    if (step < 0 && !whole_answer_)
        text = tr("Click a word of the answer to see the spans it zoomed into, or show the "
                  "whole answer.");
    else if (whole_answer_)
        text = tr("Whole answer: %1 zoomed into over %2, %3 of them in this document; darker: "
                  "more often.")
                   .arg(count_text(static_cast<qint64>(counts.size()), tr("span"), tr("spans")),
                        count_text(zoom_->steps(), tr("token"), tr("tokens")), l.toString(here));
    else
        text = tr("Token %1 %2 zoomed into %3, %4 of them in this document; darker: more of "
                  "the %5 layer-head pairs.")
                   .arg(QString::number(step), quoted(zoom_->token_texts().value(step)),
                        count_text(static_cast<qint64>(counts.size()), tr("span"), tr("spans")),
                        l.toString(here), QString::number(zoom_->rows()));
    if (!settings_.memory.sekv() && (step >= 0 || whole_answer_))
        text += tr(" (Spans are shown under the sekv policy: choose it in Settings.)");
    zoom_label_->setText(text);
    zoom_bar_->show();
}

void MainWindow::on_conversation_click(QPoint pos) {
    const QModelIndex i = conversation_->indexAt(pos);
    const qint64 id = i.data(ChatModel::MessageIdRole).toLongLong();
    if (!i.isValid() || i.data(ChatModel::FromUserRole).toBool() || id <= 0)
        return;
    const auto option = ChatDelegate::option_for(conversation_, i);
    const int citation = chat_delegate_->citation_at(option, i, pos);
    if (citation >= 0) {
        show_citation(id, citation);
        return;
    }
    const int token = chat_delegate_->token_at(option, i, pos);
    if (token >= 0)
        select_answer_token(id, token);
}

void MainWindow::open_inspector_once() {
    if (inspector_shown_once_)
        return;
    inspector_shown_once_ = true;
    inspector_dock_->show();
    // A quarter of the window's height: the question, the answer and the document stay in view.
    resizeDocks({inspector_dock_}, {std::max(160, height() / 4)}, Qt::Vertical);
}

} // namespace spanscope::gui
