// The window's side of its two workers (main_window.h): their signals connected to the views,
// the status bar and the banners. The window itself is built in main_window.cpp.
#include "ui/chat_delegate.h"
#include "ui/document_view.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/store_worker.h"
#include "ui/zoom_inspector.h"
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QListView>
#include <QMenuBar>
#include <QMimeData>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <unistd.h>

namespace spanscope::gui {

void MainWindow::connect_workers() {
    auto* e = engine_;
    connect(e, &EngineWorker::model_loaded, this, &MainWindow::on_model_loaded);
    connect(e, &EngineWorker::model_failed, this, [this](const QString& msg) {
        model_switch_pending_ = false;
        switched_model_.clear();
        model_id_.clear();
        model_file_.clear();
        model_label_->setText(tr("No model"));
        model_label_->setToolTip(QString());
        show_banner(msg, true);
        emit model_ready(false);
    });
    connect(e, &EngineWorker::project_opened, this, &MainWindow::on_project_opened);
    connect(e, &EngineWorker::project_failed, this, [this](const QString& msg) {
        project_requested_ = !project_path_.isEmpty();
        show_banner(msg, true);
        emit project_ready(-1);
    });
    connect(e, &EngineWorker::project_closed, this, [this] {
        project_path_.clear();
        cache_label_->clear();
        documents_.reset_rows({});
        chats_.clear();
        chat_.set_messages(0, {});
        document_view_->clear_document();
        document_title_->setText(tr("<b>No document</b>"));
        shown_document_ = 0;
        spans_.clear();
        zooms_.clear();
        clear_zoom_state();
        span_status_->clear();
        update_title();
        update_actions();
    });
    connect(e, &EngineWorker::document_updated, this, [this](const DocumentRow& row) {
        documents_.upsert(row);
        update_switch_banner();
        if (row.status == DocumentRow::Status::Failed)
            show_banner(row.error, true);
        if (row.id > 0 && row.id == shown_document_ && row.status == DocumentRow::Status::Ready &&
            spans_.contains(row.id) && !spans_[row.id]->error.isEmpty())
            request_spans(/*again=*/true); // its chunks are all stored now
        if (row.id > 0 && shown_document_ == 0 && row.status == DocumentRow::Status::Ready) {
            const int r = documents_.row_of_id(row.id);
            document_list_->setCurrentIndex(documents_.index(r));
        }
    });
    connect(e, &EngineWorker::document_removed, this, [this](qint64 id) {
        documents_.remove_id(id);
        spans_.remove(id);
        if (id == cited_.document_id)
            clear_citation();
        if (id == shown_document_) {
            shown_document_ = 0;
            document_view_->clear_document();
            document_title_->setText(tr("<b>No document</b>"));
            span_status_->clear();
        }
    });
    connect(e, &EngineWorker::ingest_started, this, [this](quint64, int files) {
        ingest_bar_->setRange(0, 0);
        ingest_bar_->setFormat(tr("reading %n file(s)…", nullptr, files));
        ingest_bar_->show();
        cancel_ingest_->show();
    });
    connect(e, &EngineWorker::ingest_progress, this, &MainWindow::on_ingest_progress);
    connect(e, &EngineWorker::ingest_finished, this,
            [this](quint64, int added, int failed, bool cancelled) {
                if (--ingests_running_ <= 0) {
                    ingests_running_ = 0;
                    ingest_bar_->hide();
                    cancel_ingest_->hide();
                }
                if (cancelled)
                    show_status(
                        tr("Adding documents was cancelled; the chunks already prefilled are "
                           "kept."),
                        8000);
                update_cache_label();
                update_actions();
                emit ingest_done(added, failed, cancelled);
            });
    connect(e, &EngineWorker::answer_started, this,
            [this](quint64 serial, qint64 chat_id, const QString& history_note) {
                if (serial != ask_serial_)
                    return;
                answer_started_ = true;
                chat_.set_chat_id(chat_id);
                if (!history_note.isEmpty()) // said once, where the history starts afresh
                    chat_.note_before_question(history_note);
                QMetaObject::invokeMethod(store_, &StoreWorker::list_chats);
            });
    connect(e, &EngineWorker::answer_piece, this, [this](quint64 serial, const QString& piece) {
        if (serial != ask_serial_)
            return;
        end_wait_note(); // the answer started: nothing is computed first any more
        chat_.append_piece(piece);
    });
    connect(e, &EngineWorker::answer_zoom, this, &MainWindow::on_answer_zoom);
    connect(e, &EngineWorker::answer_finished, this, &MainWindow::on_answer_finished);
    connect(e, &EngineWorker::answer_failed, this, &MainWindow::on_answer_failed);
    connect(e, &EngineWorker::document_spans, this, &MainWindow::on_document_spans);
    // An answer's notes (sections left out, a setting not used) are shown together.
    connect(e, &EngineWorker::note, this, [this](const QString& t) {
        if (!answering_) {
            show_banner(t, false);
            return;
        }
        if (!answer_notes_.contains(t))
            answer_notes_ << t;
        show_banner(answer_notes_.join(QLatin1Char('\n')), false);
    });
    // The wait for computed sections: in the status line (the banner keeps what it says), until
    // the answer starts.
    connect(e, &EngineWorker::wait_note, this, [this](const QString& t) {
        if (!answering_)
            return;
        wait_note_ = t;
        show_status(t, 3600 * 1000);
    });
    connect(e, &EngineWorker::error, this, [this](const QString& t) { show_banner(t, true); });
    // Another program (spanscope-cli, another window) may add documents to the open project:
    // the engine looks every two seconds while it is idle (a cheap check when nothing changed).
    auto* look = new QTimer(this);
    look->setInterval(2000);
    connect(look, &QTimer::timeout, this, [this] {
        if (!project_path_.isEmpty() && !ingesting() && !answering_)
            QMetaObject::invokeMethod(engine_, &EngineWorker::refresh_documents);
    });
    look->start();

    auto* s = store_;
    connect(s, &StoreWorker::error, this, [this](const QString& t) { show_banner(t, true); });
    connect(s, &StoreWorker::document_text, this, &MainWindow::on_document_text);
    connect(s, &StoreWorker::zoom_trace_loaded, this, &MainWindow::on_zoom_loaded);
    connect(s, &StoreWorker::chats_listed, this, [this](const QList<ChatRow>& rows) {
        chats_.set_chats(rows);
        const int r = chats_.row_of_id(chat_.chat_id());
        if (r >= 0 && chat_list_->currentIndex().row() != r) {
            QSignalBlocker block(chat_list_->selectionModel());
            chat_list_->setCurrentIndex(chats_.index(r));
        }
        update_actions();
        emit chats_changed();
    });
    connect(s, &StoreWorker::chat_loaded, this, [this](qint64 id, const QList<MessageRow>& rows) {
        if (!answering_ && id == chat_.chat_id()) // a reply for the chat still selected
            chat_.set_messages(id, rows);
    });
    connect(s, &StoreWorker::chat_exported, this, [this](qint64, const QString& path) {
        show_status(tr("Chat exported to %1").arg(path), 8000);
    });
}

} // namespace spanscope::gui
