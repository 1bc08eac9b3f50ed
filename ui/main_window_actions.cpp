// The main window's reactions: user actions (projects, documents, chats, send and stop) and
// the reports of the worker threads.
#include "ui/main_window.h"

#include "storage/project.h"
#include "ui/chat_export.h"
#include "ui/document_view.h"
#include "ui/engine_worker.h"
#include "ui/settings_dialog.h"
#include "ui/store_worker.h"

#include <QApplication>
#include <QClipboard>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QStatusBar>

namespace spanscope::gui {

void MainWindow::open_project(const QString& path, bool create) {
    const QString abs = QFileInfo(path).absoluteFilePath();
    // What runs for the project now open stops first (committed chunks stay).
    stop_answer();
    cancel_ingest();
    project_requested_ = true;
    QMetaObject::invokeMethod(engine_,
                              [e = engine_, abs, create] { e->open_project(abs, create); });
}

void MainWindow::close_project() {
    stop_answer();
    cancel_ingest();
    project_requested_ = false;
    QMetaObject::invokeMethod(store_, &StoreWorker::close_project);
    QMetaObject::invokeMethod(engine_, &EngineWorker::close_project);
}

void MainWindow::add_documents(const QStringList& paths) {
    if (paths.isEmpty())
        return;
    if (project_path_.isEmpty() && !project_requested_) {
        // No project yet: the default one (created when needed), as `spanscope FILE…` does.
        QDir().mkpath(default_project_dir());
        open_project(default_project_dir() + "/default.spanscope", true);
    }
    const quint64 serial = ++ingest_serial_;
    ++ingests_running_;
    QMetaObject::invokeMethod(engine_,
                              [e = engine_, serial, paths] { e->add_documents(serial, paths); });
}

void MainWindow::ask(const QString& question) {
    if (question.trimmed().isEmpty()) {
        const QString refused = tr("The question is empty.");
        show_banner(refused, true);
        emit answer_error(refused);
        return;
    }
    input_->setPlainText(question);
    on_send();
}

void MainWindow::on_send() {
    const QString question = input_->toPlainText().trimmed();
    if (question.isEmpty() || answering_)
        return;
    const QList<qint64> ids = documents_.checked_ids();
    QString refused;
    if (project_path_.isEmpty())
        refused = tr("Open or create a project (Ctrl+O, Ctrl+N) and add documents first.");
    else if (documents_.total_documents() == 0)
        refused = tr("This project has no documents yet: add some (drop files on the window, or "
                     "File ▸ Add Documents).");
    else if (ids.isEmpty())
        refused = tr("No document is checked: check one in the list.");
    if (!refused.isEmpty()) {
        show_banner(refused, true);
        emit answer_error(refused);
        return;
    }
    input_->clear();
    answering_ = true;
    answer_notes_.clear();
    answer_started_ = false;
    const quint64 serial = ++ask_serial_;
    chat_.begin_exchange(question, ingesting() ? tr("waiting for the documents being added…")
                                               : tr("reading…"));
    update_actions();
    QMetaObject::invokeMethod(
        engine_, [e = engine_, serial, chat = chat_.chat_id(), question, ids,
                  g = settings_.generation, m = settings_.memory,
                  r = settings_.reuse] { e->ask(serial, chat, question, ids, g, m, r); });
}

void MainWindow::stop_answer() {
    if (!answering_)
        return;
    engine_->request_stop(ask_serial_);
    if (!answer_started_) {
        // Still queued behind an ingest: it ends here; the engine drops it when it comes to it.
        answering_ = false;
        chat_.finish_answer(QString(), tr("stopped before the answer began"));
        update_actions();
        AnswerStats st;
        st.chat_id = chat_.chat_id();
        st.stop_reason = QStringLiteral("stopped");
        emit answer_done(st);
    }
}

void MainWindow::check_only(const QStringList& paths) {
    QStringList abs;
    for (const auto& p : paths)
        abs << QFileInfo(p).absoluteFilePath();
    for (int r = 0; r < documents_.rowCount(); ++r)
        if (documents_.row(r).id > 0)
            documents_.setData(documents_.index(r),
                               abs.contains(documents_.row(r).path) ? Qt::Checked : Qt::Unchecked,
                               Qt::CheckStateRole);
}

void MainWindow::cancel_ingest() {
    if (ingesting())
        engine_->request_cancel_ingest(ingest_serial_);
}

void MainWindow::new_chat() {
    if (answering_)
        return;
    clear_zoom_state();
    chat_.set_messages(0, {});
    chat_list_->clearSelection();
    chat_list_->setCurrentIndex({});
    input_->setFocus();
    update_actions();
}

void MainWindow::set_cache_limit(qint64 bytes) {
    settings_.cache_limit_bytes = bytes;
    settings_.save();
    QMetaObject::invokeMethod(engine_, [e = engine_, bytes] { e->set_cache_limit(bytes); });
}

void MainWindow::on_project_opened(const QString& path, const QList<DocumentRow>& rows,
                                   qint64 restored, qint64 cache_limit) {
    const bool same = path == project_path_;
    project_path_ = path;
    if (same) {
        // Reopened for another model: the list as the user has it now wins over what the
        // engine read a moment ago (a drag may have come in between).
        documents_.reset_rows(in_list_order(rows));
        save_document_list();
    } else {
        documents_.reset_rows(rows);
    }
    spans_.clear(); // states depend on the model, which may have changed
    ++spans_serial_;
    if (!same) {
        chat_.set_messages(0, {});
        chats_.clear();
        shown_document_ = 0;
        document_view_->clear_document();
        document_title_->setText(tr("<b>No document</b>"));
        zooms_.clear();
        clear_zoom_state();
        span_status_->clear();
    } else if (shown_document_ > 0) {
        request_spans(/*again=*/true);
    }
    QMetaObject::invokeMethod(store_, [s = store_, path] {
        s->open_project(path);
        s->list_chats();
    });
    if (persist_)
        settings_.remember_project(path);
    else if (!settings_.recent_projects.contains(path))
        settings_.recent_projects.prepend(path);
    rebuild_recent_menu();
    if (cache_limit != settings_.cache_limit_bytes && !same)
        settings_.cache_limit_bytes = cache_limit;
    const bool switched = same && !switched_model_.isEmpty();
    if (switched) {
        // Read again for the model Settings switched to: nothing was restored, the line says
        // what is stored for this model.
        update_cache_label();
    } else {
        qint64 chunks = 0;
        for (const auto& r : rows)
            chunks += r.chunks;
        cache_label_->setText(rows.isEmpty()
                                  ? tr("no documents yet")
                                  : tr("%1 %2 restored from the cache%3")
                                        .arg(restored)
                                        .arg(restored == 1 ? tr("chunk") : tr("chunks"))
                                        .arg(restored < chunks
                                                 ? tr(" (%1 to compute)").arg(chunks - restored)
                                                 : QString()));
    }
    if (!rows.isEmpty() && shown_document_ == 0)
        document_list_->setCurrentIndex(documents_.index(0));
    if (switched) {
        switch_banner_model_ = switched_model_;
        show_switch_banner();
    }
    switched_model_.clear();
    update_title();
    update_actions();
    emit project_ready(restored);
}

void MainWindow::on_ingest_progress(const IngestStatus& s) {
    const QString file =
        s.files > 1 ? tr(" (file %1 of %2)").arg(s.file + 1).arg(s.files) : QString();
    if (s.ocr_page_count > 0) { // a scanned PDF, before its chunks
        ingest_bar_->setRange(0, s.ocr_page_count);
        ingest_bar_->setValue(s.ocr_page - 1);
        ingest_bar_->setFormat(tr("%1%2: reading page %3 of %4 by OCR")
                                   .arg(s.name, file)
                                   .arg(s.ocr_page)
                                   .arg(s.ocr_page_count));
        ingest_bar_->show();
        emit ingest_progressed(s);
        return;
    }
    ingest_bar_->setRange(0, static_cast<int>(qMax<qint64>(1, s.chunks)));
    ingest_bar_->setValue(static_cast<int>(s.chunk));
    ingest_bar_->setFormat(tr("%1%2: %3/%4 chunks · %5 tokens/s · %6 s left")
                               .arg(s.name, file)
                               .arg(s.chunk)
                               .arg(s.chunks)
                               .arg(qRound(s.tokens_per_s))
                               .arg(qRound(s.seconds_left)));
    ingest_bar_->show();
    emit ingest_progressed(s);
}

void MainWindow::hide_progress_unless_ingesting() {
    // An answer that had to prefill a document showed its progress too.
    if (!ingesting()) {
        ingest_bar_->hide();
        cancel_ingest_->hide();
    }
}

void MainWindow::on_answer_finished(quint64 serial, const AnswerStats& s) {
    if (serial != ask_serial_ || !answering_) // stale, or ended here while it was queued
        return;
    answering_ = false;
    // A saved sekv answer's trace takes the views over once loaded; else they show again what
    // they did before it streamed.
    end_live_zoom(/*restore=*/!(s.message_id > 0 && s.policy == QLatin1String("sekv")));
    hide_progress_unless_ingesting();
    chat_.set_chat_id(s.chat_id);
    QString details = s.stop_reason == "stopped" && s.generated_tokens == 0 && s.ttft_ms == 0
                          ? tr("stopped before the answer began")
                          : stats_text(s) + stop_reason_text(s.stop_reason, s.generated_tokens);
    chat_.finish_answer(s.text, details, s.citations, s.token_citations);
    if (s.message_id > 0) {
        chat_.set_last_answer_saved(s.message_id, s.policy == QLatin1String("sekv"),
                                    s.full_kv_bytes, model_id_, model_file_);
        if (s.policy == QLatin1String("sekv")) {
            show_answer_zoom(s.message_id);
            // Answering built the SEKV states of its documents: the shown one's spans may be
            // there now.
            if (shown_document_ > 0 &&
                (!spans_.contains(shown_document_) || !spans_[shown_document_]->error.isEmpty()))
                request_spans(/*again=*/true);
        }
    }
    if (s.ttft_ms > 0) {
        stats_label_->setText(tr("Last answer: %1").arg(stats_text(s)));
        const QString sections = sections_text(s);
        stats_label_->setToolTip(stats_label_->text() + (sections.isEmpty()
                                                             ? QString()
                                                             : QStringLiteral("\n") + sections));
    }
    last_kv_bytes_ = s.kv_bytes;
    update_memory_label();
    update_cache_label(); // the answer may have stored states its documents lacked
    // The answer's notes, together: those sent while it was made and those it records (shown
    // again only when it records one not sent: a banner closed or replaced since stays so).
    bool added = false;
    for (const auto& n : s.notes)
        if (!answer_notes_.contains(n)) {
            answer_notes_ << n;
            added = true;
        }
    if (added)
        show_banner(answer_notes_.join(QLatin1Char('\n')), false);
    end_wait_note();
    QMetaObject::invokeMethod(store_, &StoreWorker::list_chats);
    update_actions();
    emit answer_done(s);
}

void MainWindow::end_wait_note() {
    if (!wait_note_.isEmpty() && message_label_->text() == wait_note_)
        message_label_->clear();
    wait_note_.clear();
}

void MainWindow::on_answer_failed(quint64 serial, const QString& message, qint64 chat_id) {
    if (serial != ask_serial_ || !answering_)
        return;
    answering_ = false;
    end_wait_note();
    end_live_zoom(/*restore=*/true);
    hide_progress_unless_ingesting();
    if (chat_id > 0)
        chat_.set_chat_id(chat_id);
    chat_.finish_answer(QString(), tr("no answer: %1").arg(message));
    update_cache_label(); // states computed before it failed are kept
    show_banner(message, true);
    QMetaObject::invokeMethod(store_, &StoreWorker::list_chats);
    update_actions();
    emit answer_error(message);
}

void MainWindow::on_document_selected() {
    const QModelIndex i = document_list_->currentIndex();
    if (!i.isValid())
        return;
    const qint64 id = documents_.row(i.row()).id;
    if (id <= 0 || id == shown_document_)
        return;
    shown_document_ = id;
    QMetaObject::invokeMethod(store_, [s = store_, id] { s->load_document_text(id); });
}

void MainWindow::on_chat_selected() {
    const QModelIndex i = chat_list_->currentIndex();
    if (!i.isValid() || answering_)
        return;
    const qint64 id = chats_.chat(i.row()).id;
    if (id == chat_.chat_id())
        return;
    clear_zoom_state();
    QMetaObject::invokeMethod(store_, [s = store_, id] { s->load_chat(id); });
    chat_.set_chat_id(id);
    update_actions();
}

void MainWindow::choose_and_add_documents() {
    const QStringList files = QFileDialog::getOpenFileNames(
        this, tr("Add documents"), QDir::homePath(),
        tr("Documents (*.txt *.md *.markdown *.html *.htm *.xhtml *.pdf *.docx *.odt *.epub *.gz);;"
           "All files (*)"));
    add_documents(files);
}

void MainWindow::choose_and_open_project(bool create) {
    QDir().mkpath(default_project_dir());
    const QString filter = tr("Spanscope projects (*.spanscope)");
    QString path =
        create
            ? QFileDialog::getSaveFileName(this, tr("New project"),
                                           default_project_dir() + "/untitled.spanscope", filter)
            : QFileDialog::getOpenFileName(this, tr("Open project"), default_project_dir(), filter);
    if (path.isEmpty())
        return;
    if (create && !path.endsWith(QStringLiteral(".spanscope")))
        path += QStringLiteral(".spanscope");
    open_project(path, create);
}

void MainWindow::rebuild_recent_menu() {
    recent_menu_->clear();
    for (const auto& p : settings_.recent_projects)
        recent_menu_->addAction(QFileInfo(p).completeBaseName() + "  —  " + p, this, [this, p] {
            if (!QFileInfo::exists(p)) {
                show_banner(
                    tr("%1 no longer exists; it was removed from the recent projects.").arg(p),
                    true);
                settings_.recent_projects.removeAll(p);
                if (persist_)
                    settings_.save();
                rebuild_recent_menu();
                return;
            }
            open_project(p, false);
        });
    recent_menu_->setEnabled(!settings_.recent_projects.isEmpty());
}

void MainWindow::remove_selected_document() {
    const QModelIndex i = document_list_->currentIndex();
    if (!i.isValid())
        return;
    // Copies: the dialog runs an event loop in which rows can come and go.
    const qint64 id = documents_.row(i.row()).id;
    const QString name = documents_.row(i.row()).name;
    if (id <= 0) { // a file that failed or was cancelled: only the row goes
        documents_.remove_row(i.row());
        return;
    }
    if (QMessageBox::question(this, tr("Remove document"),
                              tr("Remove %1 and its cached chunks from the project? Chats keep "
                                 "their messages.")
                                  .arg(name)) != QMessageBox::Yes)
        return;
    QMetaObject::invokeMethod(engine_, [e = engine_, id] { e->remove_document(id); });
}

void MainWindow::rename_current_chat() {
    const qint64 id = chat_.chat_id();
    const int r = chats_.row_of_id(id);
    if (id <= 0 || r < 0)
        return;
    bool ok = false;
    const QString title = QInputDialog::getText(this, tr("Rename chat"), tr("Title:"),
                                                QLineEdit::Normal, chats_.chat(r).title, &ok)
                              .trimmed();
    if (ok && !title.isEmpty())
        QMetaObject::invokeMethod(store_, [s = store_, id, title] { s->rename_chat(id, title); });
}

void MainWindow::delete_current_chat() {
    const qint64 id = chat_.chat_id();
    if (id <= 0 || answering_)
        return;
    if (QMessageBox::question(this, tr("Delete chat"), tr("Delete this chat and its messages?")) !=
        QMessageBox::Yes)
        return;
    QMetaObject::invokeMethod(store_, [s = store_, id] { s->delete_chat(id); });
    new_chat();
}

void MainWindow::copy_chat() {
    const int r = chats_.row_of_id(chat_.chat_id());
    QApplication::clipboard()->setText(
        chat_markdown(r >= 0 ? chats_.chat(r).title : tr("Chat"), chat_.messages()));
    show_status(tr("Chat copied as Markdown"), 4000);
}

void MainWindow::export_chat() {
    const qint64 id = chat_.chat_id();
    const int r = chats_.row_of_id(id);
    if (id <= 0 || r < 0)
        return;
    QString name = chats_.chat(r).title;
    name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9 _-]")), QStringLiteral("_"));
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Export chat"), QDir::homePath() + "/" + name.left(60) + ".md",
        tr("Markdown (*.md)"));
    if (!path.isEmpty())
        QMetaObject::invokeMethod(store_, [s = store_, id, path] { s->export_chat(id, path); });
}

void MainWindow::show_settings() {
    SettingsDialog dialog(settings_, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    apply_settings(dialog.result_settings());
}

void MainWindow::apply_settings(const AppSettings& settings) {
    const AppSettings old = settings_;
    settings_ = settings;
    if (persist_)
        settings_.save();
    if (settings_.model_path != old.model_path)
        settings_.model_override.clear(); // chosen in Settings: that one from now on
    if (settings_.effective_model() != old.effective_model() || settings_.threads != old.threads ||
        settings_.backend != old.backend) {
        model_label_->setText(tr("loading the model…"));
        model_switch_pending_ = settings_.effective_model() != old.effective_model();
        switched_model_.clear();
        QMetaObject::invokeMethod(engine_, [e = engine_, p = settings_.effective_model(),
                                            t = settings_.threads, b = settings_.backend,
                                            a = settings_.model_failure_advice(),
                                            path = project_path_] {
            e->load_model(p, t, b, a);
            if (!path.isEmpty())
                e->open_project(path, false); // documents' status under the new model
        });
    }
    if (settings_.cache_limit_bytes != old.cache_limit_bytes)
        set_cache_limit(settings_.cache_limit_bytes);
    if (settings_.memory != old.memory) {
        update_policy_label();
        if (settings_.memory.spans_key() != old.memory.spans_key()) {
            spans_.clear();
            request_spans(/*again=*/true);
        }
    }
}

} // namespace spanscope::gui
