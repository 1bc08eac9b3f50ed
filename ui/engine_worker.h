// The engine side of the desktop application: model, project, chunk-state cache and sessions,
// living on a worker thread (moveToThread). Slots are invoked with queued calls from the GUI
// thread and report through signals; nothing here is touched by the GUI thread except the
// thread-safe request_stop() and request_cancel_ingest() (atomics the engine checks before
// every layer of a forward pass and before every generated token).
#pragma once

#include "ui/gui_types.h"
#include "ui/zoom_data.h"

#include <QObject>

#include <atomic>
#include <map>
#include <memory>

namespace spanscope {
class Model;
class Project;
class Session;
class StateCache;
struct SessionOptions;
} // namespace spanscope

namespace spanscope::gui {

class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    /// Thread-safe. Stop the answer `serial` (and any earlier one): generation ends before the
    /// next token, a prefill within one layer; an answer still queued stops as it starts.
    void request_stop(quint64 serial);
    /// Thread-safe. Cancel the ingest `serial` (and earlier ones) within one layer's time;
    /// committed chunks stay, files not yet read are not added.
    void request_cancel_ingest(quint64 serial);

public slots:
    /// Lower this thread's priority (nice 5; the engine's pool threads, created from here,
    /// inherit it) so that the GUI thread is scheduled first. Call once on the worker thread.
    void init_thread();
    /// Load the model (empty path: the default location) on `backend` ("cpu" or "cuda",
    /// backend.h). Emits model_loaded or model_failed (with the reason a backend cannot run,
    /// then `advice`, what the user can do: AppSettings::model_failure_advice). Until another
    /// model loads, a question is answered with that failure.
    void load_model(const QString& path, int threads,
                    const QString& backend = QStringLiteral("cpu"),
                    const QString& advice = QString());
    /// Open (create: or create) a project. Emits project_opened or project_failed.
    void open_project(const QString& path, bool create);
    void close_project();
    /// Read, store and prefill files one after another; one that fails is reported
    /// (document_updated with status Failed) and the others go on.
    void add_documents(quint64 serial, const QStringList& paths);
    void remove_document(qint64 id);
    /// Answer from the given documents (empty: the chat's, else all) in chat_id (0: new chat),
    /// with the memory policy `m` (sekv: the zoom trace is kept with the answer); documents
    /// after the first joined as `r` says (in the order of document_ids).
    void ask(quint64 serial, qint64 chat_id, const QString& question,
             const QList<qint64>& document_ids, const spanscope::gui::GenerationSettings& g,
             const spanscope::gui::MemorySettings& m, const spanscope::gui::ReuseSettings& r);
    /// The document's SEKV spans for `m` (built and stored where missing; its chunk states must
    /// be stored). Emits document_spans, with the reason in words when there are none.
    void load_document_spans(quint64 serial, qint64 id, const spanscope::gui::MemorySettings& m);
    void set_cache_limit(qint64 bytes);
    /// Documents another program (spanscope-cli, another window) added to the open project or
    /// removed from it, and states it stored for them, since this worker last looked: a
    /// document_updated or document_removed for each. Cheap when nothing changed (SQLite's
    /// data_version of this connection); also run at the end of every ingest. A failed read
    /// keeps the list as shown and emits error with the reason once (again only when the reason
    /// changes or after a read that worked); a write lock held by another program
    /// (SQLITE_BUSY or SQLITE_LOCKED) passes silently until the next look.
    void refresh_documents();

signals:
    /// The model loaded: "FILE (base model)" or "FILE (instruction-tuned, FORMAT)", and the key/
    /// value bytes a token of context costs it (f16, every attention layer; past a sliding
    /// window of `window` tokens, kv_bytes_per_token_global: ModelSummary's figures), and the
    /// file's identity (model_identity_hex) and name, which each answer records.
    void model_loaded(const QString& description, qint64 kv_bytes_per_token,
                      qint64 kv_bytes_per_token_global, qint64 window, const QString& model_id,
                      const QString& model_file);
    void model_failed(const QString& message);
    /// chunks_restored: chunks of the documents with a stored state for this model.
    void project_opened(const QString& path, const QList<spanscope::gui::DocumentRow>& documents,
                        qint64 chunks_restored, qint64 cache_limit_bytes);
    void project_failed(const QString& message);
    void project_closed();
    void document_updated(const spanscope::gui::DocumentRow& row);
    void document_removed(qint64 id);
    void ingest_started(quint64 serial, int files);
    void ingest_progress(const spanscope::gui::IngestStatus& status);
    void ingest_finished(quint64 serial, int added, int failed, bool cancelled);
    /// The question is saved in chat_id; history_note: the note line for the chat view when
    /// the chat's history starts afresh with it (its last answer came from another model:
    /// history_note_text), else "".
    void answer_started(quint64 serial, qint64 chat_id, const QString& history_note);
    void answer_piece(quint64 serial, const QString& piece);
    /// Under sekv, once per generated token as the answer streams (ProjectAskHooks::on_zoom):
    /// its index among the answer's tokens (0, 1, … in order, each once) and its zoom step with
    /// the answer's sources (one shared object for every token). For a token with text it comes
    /// just before that token's answer_piece; all come before answer_finished.
    void answer_zoom(quint64 serial, int token, const spanscope::gui::TokenZoomPtr& zoom);
    void answer_finished(quint64 serial, const spanscope::gui::AnswerStats& stats);
    void answer_failed(quint64 serial, const QString& message, qint64 chat_id);
    void document_spans(quint64 serial, const spanscope::gui::DocumentSpansPtr& spans);
    /// Something the user should know (sections left out, a setting ignored).
    void note(const QString& text);
    /// What an answer waits for before its first token (sections computed first); over once
    /// the answer starts.
    void wait_note(const QString& text);
    void error(const QString& message);

private:
    DocumentRow row_for(qint64 id);
    /// The session options for `m` on the model loaded, from the answering service
    /// (answering/policy_settings.h policy_setup; parameter files passed over are emitted as
    /// notes). Throws RouterParamsError or std::invalid_argument when its router cannot be had,
    /// std::logic_error without a model.
    /// The session options of `m` for an answer joined by `selector` ("none": no selector).
    SessionOptions session_options(const MemorySettings& m, const std::string& selector = "none");
    void open_cache();

    /// What the window was told of each document (its status and chunks stored), by id; and
    /// the project's data_version when refresh_documents last read it.
    std::map<qint64, std::pair<int, qint64>> listed_;
    qint64 data_version_ = -1;
    /// The error refresh_documents last emitted ("" after a read that worked).
    QString refresh_error_;
    void remember_row(const DocumentRow& row);
    qint64 data_version();

    std::unique_ptr<Model> model_;
    QString model_problem_; ///< why the last load failed, with the advice; empty once loaded
    std::unique_ptr<Project> project_;
    std::unique_ptr<StateCache> cache_;
    std::unique_ptr<Session> scratch_;
    int threads_ = 0;
    std::atomic<bool> stop_{false}, cancel_ingest_{false};
    std::atomic<quint64> stop_serial_{0}, cancel_serial_{0};
};

} // namespace spanscope::gui
