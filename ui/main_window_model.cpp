// The window's side of the model it answers with (main_window.h): the model label with the
// key/value bytes a token costs it, the status bar's line of what is stored for it, and after
// a switch in Settings what no longer holds (the last answer's figures) and the banner of the
// documents without states for it, kept true while answers compute them.
#include "ui/main_window.h"

#include <QLabel>
#include <QLocale>

namespace spanscope::gui {

void MainWindow::on_model_loaded(const QString& description, qint64 kv_bytes_per_token,
                                 qint64 kv_bytes_per_token_global, qint64 window,
                                 const QString& model_id, const QString& model_file) {
    model_id_ = model_id;
    model_file_ = model_file;
    const QLocale l;
    model_label_->setText(
        kv_bytes_per_token > 0
            ? tr("Model: %1 · KV %2 B/token").arg(description, l.toString(kv_bytes_per_token))
            : tr("Model: %1").arg(description));
    QString tip = tr("The model answers use: %1.").arg(description);
    if (kv_bytes_per_token > 0) {
        tip += tr("\nA token of context costs it %1 B of keys and values (f16, every attention "
                  "layer)")
                   .arg(l.toString(kv_bytes_per_token));
        if (window > 0 && kv_bytes_per_token_global < kv_bytes_per_token)
            tip += tr("; past its %1-token window, %2 B (its global layers)")
                       .arg(l.toString(window), l.toString(kv_bytes_per_token_global));
        tip += QLatin1Char('.');
        // The CPU engine's row store (engine/memory/row_store.h); the CUDA one keeps its own.
        if (settings_.backend == QLatin1String("cpu"))
            tip += tr(" The CPU engine keeps its rows in f32 with a position each, about twice "
                      "this.");
    }
    model_label_->setToolTip(tip);
    if (model_switch_pending_) {
        model_switch_pending_ = false;
        switched_model_ = description;
        // A banner about the model switched from (or a failed load) no longer holds, nor do the
        // last answer's figures: the other model gave it.
        banner_box_->hide();
        switch_banner_.clear();
        last_kv_bytes_ = 0;
        update_memory_label();
        stats_label_->clear();
        stats_label_->setToolTip(QString());
        show_status(tr("Switched to the model %1").arg(description), 10000);
    }
    emit model_ready(true);
}

QString MainWindow::stored_chunks_text() const {
    qint64 stored = 0, chunks = 0;
    int documents = 0;
    bool all_cut = true; // every document cut into chunks for this model's tokenizer
    for (int r = 0; r < documents_.rowCount(); ++r) {
        const DocumentRow& row = documents_.row(r);
        if (row.id <= 0)
            continue;
        ++documents;
        stored += row.chunks_stored;
        chunks += qMax(row.chunks, row.chunks_stored);
        all_cut = all_cut && row.chunks > 0;
    }
    if (documents == 0)
        return tr("no documents yet");
    // A document not yet cut for this model's tokenizer counts no chunks: "of" would then say
    // less than there is.
    if (stored < chunks && all_cut)
        return tr("%1 of %2 chunks stored for this model").arg(stored).arg(chunks);
    return tr("%1 %2 stored for this model")
        .arg(stored)
        .arg(stored == 1 ? tr("chunk") : tr("chunks"));
}

void MainWindow::update_cache_label() {
    if (!project_path_.isEmpty())
        cache_label_->setText(stored_chunks_text());
}

void MainWindow::show_switch_banner() {
    // The states of another model's fingerprint are never used: the documents without states
    // for this one are computed when a question needs them (each row says so too).
    int without = 0, documents = 0;
    for (int r = 0; r < documents_.rowCount(); ++r) {
        const DocumentRow& row = documents_.row(r);
        if (row.id <= 0)
            continue;
        ++documents;
        // A document an answer read in part (the sections it chose) has states for this model.
        without += row.status == DocumentRow::Status::Unprefilled ? 1 : 0;
    }
    if (without == 0) {
        if (!switch_banner_.isEmpty() && banner_text() == switch_banner_)
            banner_box_->hide(); // every document has its states now
        switch_banner_.clear();
        return;
    }
    switch_banner_ = tr("Switched to %1: %n of the project's %2 document(s) without stored "
                        "states for this model (read with another model): read with it when a "
                        "question needs them.",
                        nullptr, without)
                         .arg(switch_banner_model_)
                         .arg(documents);
    show_banner(switch_banner_, false);
}

void MainWindow::update_switch_banner() {
    // Only while the banner still says it (not dismissed, nor replaced by another message).
    if (switch_banner_.isEmpty() || banner_text() != switch_banner_) {
        switch_banner_.clear();
        return;
    }
    show_switch_banner();
}

} // namespace spanscope::gui
