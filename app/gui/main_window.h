// The main window (DESIGN.md §5): the document list, the document view, the chat panel and
// a status bar with the model, the memory and the last answer's statistics. The engine and the
// store run on two worker threads (EngineWorker, StoreWorker); the window only sends them
// queued calls and shows what they report, so it never waits on them.
#pragma once

#include "app_settings.h"
#include "chat_model.h"
#include "document_list_model.h"
#include "gui_types.h"

#include <QMainWindow>
#include <QThread>

class QLabel;
class QListView;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QToolButton;

namespace spanscope::gui {

class ChatDelegate;
class EngineWorker;
class StoreWorker;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    /// persist_settings: false keeps QSettings untouched (recent projects, settings changed
    /// here), as --screenshots does.
    explicit MainWindow(AppSettings settings, bool persist_settings = true,
                        QWidget* parent = nullptr);
    ~MainWindow() override;

    /// Open (or, with create, create) a project; project_ready or an error follows.
    void open_project(const QString& path, bool create);
    void close_project();
    /// Read, store and prefill these files in the background.
    void add_documents(const QStringList& paths);
    /// Ask a question about the checked documents in the current chat.
    void ask(const QString& question);
    /// Check exactly the documents whose source path is among `paths` (absolute or not).
    void check_only(const QStringList& paths);
    void stop_answer();
    void cancel_ingest();
    void new_chat();
    /// Limit of the open project's chunk-state cache (bytes), kept in the project (and shown
    /// in Settings).
    void set_cache_limit(qint64 bytes);

    QString project_path() const { return project_path_; }
    bool answering() const { return answering_; }
    bool ingesting() const { return ingests_running_ > 0; }
    DocumentListModel* document_model() { return &documents_; }
    ChatModel* chat_model() { return &chat_; }
    ChatListModel* chat_list_model() { return &chats_; }
    /// The message shown in the banner at the top ("" when hidden).
    QString banner_text() const;
    /// The status bar's cache line ("12 chunks restored from the cache").
    QString cache_text() const;
    const AppSettings& settings() const { return settings_; }

signals:
    void model_ready(bool ok);
    void project_ready(qint64 chunks_restored);
    void ingest_progressed(const spanscope::gui::IngestStatus& status);
    void ingest_done(int added, int failed, bool cancelled);
    void answer_done(const spanscope::gui::AnswerStats& stats);
    void answer_error(const QString& message);
    void document_shown(qint64 id);
    void chats_changed();

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
    void closeEvent(QCloseEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void build_ui();
    void build_menus();
    void connect_workers();
    void show_banner(const QString& text, bool error);
    /// A message in the status bar for `ms` milliseconds.
    void show_status(const QString& text, int ms);
    void update_actions();
    void update_title();
    void rebuild_recent_menu();
    void show_settings();
    void choose_and_add_documents();
    void choose_and_open_project(bool create);
    void remove_selected_document();
    void rename_current_chat();
    void delete_current_chat();
    void copy_chat();
    void export_chat();
    void on_send();
    void on_document_selected();
    void on_chat_selected();
    // Worker reports.
    void on_project_opened(const QString& path, const QList<DocumentRow>& rows, qint64 restored,
                           qint64 cache_limit);
    void on_ingest_progress(const IngestStatus& s);
    void hide_progress_unless_ingesting();
    /// "memory in use 560 MiB · KV cache 78 MiB": resident memory now, the last answer's KV.
    void update_memory_label();
    void on_answer_finished(quint64 serial, const AnswerStats& s);
    void on_answer_failed(quint64 serial, const QString& message, qint64 chat_id);

    AppSettings settings_;
    QThread engine_thread_, store_thread_;
    EngineWorker* engine_ = nullptr;
    StoreWorker* store_ = nullptr;
    DocumentListModel documents_;
    ChatModel chat_;
    ChatListModel chats_;
    ChatDelegate* chat_delegate_ = nullptr;

    QString project_path_;
    bool project_requested_ = false; ///< open_project() was called: documents go there
    qint64 shown_document_ = 0;
    quint64 ask_serial_ = 0, ingest_serial_ = 0;
    int ingests_running_ = 0;
    bool answering_ = false;
    bool answer_started_ = false; ///< the engine began the current answer (it is not queued)
    bool persist_ = true;
    quint64 status_serial_ = 0;
    qint64 last_kv_bytes_ = 0;

    QLabel* banner_ = nullptr;
    QToolButton* banner_close_ = nullptr;
    QWidget* banner_box_ = nullptr;
    QListView* document_list_ = nullptr;
    QListView* chat_list_ = nullptr;
    QListView* conversation_ = nullptr;
    QLabel* document_title_ = nullptr;
    QPlainTextEdit* document_view_ = nullptr;
    QPlainTextEdit* input_ = nullptr;
    QPushButton* send_ = nullptr;
    QPushButton* stop_ = nullptr;
    QLabel* model_label_ = nullptr;
    QLabel* memory_label_ = nullptr;
    QLabel* cache_label_ = nullptr;
    QLabel* stats_label_ = nullptr;
    QLabel* message_label_ = nullptr;
    QProgressBar* ingest_bar_ = nullptr;
    QPushButton* cancel_ingest_ = nullptr;
    QMenu* recent_menu_ = nullptr;
    QAction* close_action_ = nullptr;
    QAction* add_action_ = nullptr;
    QAction* remove_action_ = nullptr;
    QAction* send_action_ = nullptr;
    QAction* stop_action_ = nullptr;
    QAction* chat_actions_[4] = {};
};

} // namespace spanscope::gui
