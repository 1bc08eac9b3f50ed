// The main window (docs/desktop-app.md): the document list, the document view, the chat panel and
// a status bar with the model, the memory and the last answer's statistics. The engine and the
// store run on two worker threads (EngineWorker, StoreWorker); the window only sends them
// queued calls and shows what they report, so it never waits on them.
#pragma once

#include "ui/app_settings.h"
#include "ui/chat_model.h"
#include "ui/document_list_model.h"
#include "ui/gui_types.h"
#include "ui/zoom_data.h"

#include <QHash>
#include <QMainWindow>
#include <QThread>

class QDockWidget;
class QLabel;
class QListView;
class QMenu;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QToolButton;

namespace spanscope::gui {

class ChatDelegate;
class DocumentView;
class EngineWorker;
class StoreWorker;
class ZoomInspector;

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
    /// Use these settings (as Settings ▸ OK does): the model is loaded again when it changed
    /// (the status bar says which; an open project is read again for it and the banner says
    /// how many of its documents have no states for the new model: they are computed when a
    /// question needs them); a new memory policy applies to the next answer and to the spans
    /// shown.
    void apply_settings(const AppSettings& settings);

    // SEKV: spans, zoom and the inspector (main_window_zoom.cpp).
    DocumentView* document_view() const { return document_view_; }
    ZoomInspector* inspector() const { return inspector_; }
    QDockWidget* inspector_dock() const { return inspector_dock_; }
    qint64 shown_document() const { return shown_document_; }
    /// Show a document of the list in the document view.
    void show_document(qint64 id);
    /// Show the zoom of an answer (a message of the chat shown) in the inspector, without a
    /// token selected; zoom_loaded follows.
    void show_answer_zoom(qint64 message_id);
    /// Highlight the spans token `token` of that answer zoomed into, and scroll to the first
    /// (in the document it comes from); zoom_shown follows once they are drawn.
    void select_answer_token(qint64 message_id, int token);
    /// The whole answer's zoom as a heat map over the document (on), or the selected token's.
    void set_whole_answer(bool on);
    bool whole_answer() const { return whole_answer_; }
    AnswerZoomPtr current_zoom() const { return zoom_; }
    int selected_token() const { return zoom_step_; }
    /// The line above the document view that tells what the zoom shows ("" when hidden).
    QString zoom_text() const;
    /// The document view's line about its spans ("412 spans · 190 anchors", or why none).
    QString span_status_text() const;
    // Live zoom (main_window_live_zoom.cpp): while a sekv answer streams, the latest token's
    // spans are drawn over the document and its column added to the inspector's grid.
    /// The zoom steps streamed for the answer being written, or for the last one until the next
    /// starts (message id 0, no token texts); nullptr before any.
    AnswerZoomPtr streamed_zoom() const { return live_zoom_; }
    /// Whether the views show the streamed zoom now (from the answer's first step until it ends
    /// or the user selects another answer's zoom).
    bool live_zoom_shown() const { return live_shown_; }

    // Sources (main_window_sources.cpp): the citations under an answer, shown in the document.
    /// Show citation `citation` (0-based, top source first) of an answer of the chat shown: its
    /// document in the document view, the passage highlighted and scrolled into view
    /// (citation_shown follows once it is drawn), until another citation or a token is chosen
    /// or the document changes. A document no longer in the project is said so in the status
    /// bar instead.
    void show_citation(qint64 message_id, int citation);

signals:
    void model_ready(bool ok);
    void project_ready(qint64 chunks_restored);
    void ingest_progressed(const spanscope::gui::IngestStatus& status);
    void ingest_done(int added, int failed, bool cancelled);
    void answer_done(const spanscope::gui::AnswerStats& stats);
    void answer_error(const QString& message);
    void document_shown(qint64 id);
    void chats_changed();
    /// The shown document's SEKV spans were drawn (or the reason there are none shown).
    void document_spans_shown(qint64 id);
    /// An answer's zoom trace was loaded (ok) or could not be (the inspector says why).
    void zoom_loaded(qint64 message_id, bool ok);
    /// The zoom of a token (-1: the whole answer) is drawn over the shown document.
    void zoom_shown(qint64 message_id, int token);
    /// A citation's passage is highlighted in the document view (show_citation).
    void citation_shown(qint64 message_id, int citation);

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
    // main_window_context.cpp: the documents in context, their order, how they are joined.
    void setup_document_context(QMenu* file);
    /// Move the selected document `delta` rows (−1 up, +1 down) in the list.
    void move_selected_document(int delta);
    void save_document_list();
    /// `rows` in the order of the document list now, with its checks (rows it does not have
    /// yet last, as they come).
    QList<DocumentRow> in_list_order(const QList<DocumentRow>& rows) const;
    /// The sections an answer used, by document name, one per line ("" when it used all).
    QString sections_text(const AnswerStats& s) const;
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
    // The model (main_window_model.cpp).
    /// The engine loaded a model (EngineWorker::model_loaded): the label with what a token
    /// costs it; after a switch, the status says so and forgets the other model's figures.
    /// model_id and model_file are kept: an answer that records another model is that model's.
    void on_model_loaded(const QString& description, qint64 kv_bytes_per_token,
                         qint64 kv_bytes_per_token_global, qint64 window, const QString& model_id,
                         const QString& model_file);
    /// "3 of 8 chunks stored for this model", "8 chunks stored for this model", from the
    /// document rows.
    QString stored_chunks_text() const;
    /// The status bar's cache line, from the document rows now (stored_chunks_text).
    void update_cache_label();
    /// After a switch: the banner of how many documents have no states for the model
    /// (switch_banner_model_), or none when all have.
    void show_switch_banner();
    /// A document's row changed: the switch banner, while shown, counts again (and goes once
    /// every document has states for the model).
    void update_switch_banner();
    void on_answer_finished(quint64 serial, const AnswerStats& s);
    void on_answer_failed(quint64 serial, const QString& message, qint64 chat_id);
    void update_policy_label();
    // SEKV views (main_window_zoom.cpp).
    /// The inspector dock and the View menu.
    void build_zoom_ui();
    void on_document_text(qint64 id, const QString& name, const QString& text,
                          const TextPositionsPtr& positions);
    /// Ask the engine for the shown document's spans (sekv), or clear them (full).
    void request_spans(bool again = false);
    void on_document_spans(quint64 serial, const DocumentSpansPtr& spans);
    void load_zoom(qint64 message_id);
    void on_zoom_loaded(qint64 message_id, const AnswerZoomPtr& zoom, const QString& problem);
    /// Draw the zoom over the shown document; scroll: to the first zoomed span, switching to
    /// its document when it is another.
    void apply_zoom(bool scroll);
    void update_zoom_bar();
    /// Forget the answer shown (another chat, another project).
    void clear_zoom_state();
    /// A click on the conversation: an answer token selects its zoom.
    void on_conversation_click(QPoint pos);
    /// Whether a trace's sections hold as many spans as the ones drawn for the shown document
    /// (a trace made under other SEKV settings numbers another segmentation).
    bool zoom_fits_spans(const AnswerZoom& zoom) const;
    // Sources (main_window_sources.cpp).
    /// Highlight the citation asked for (cited_) in the document view, which shows its document.
    void draw_citation();
    /// No citation shown any more: the view's highlight and the chat's mark go.
    void clear_citation();
    // Live zoom (main_window_live_zoom.cpp).
    /// A step of the answer being written: appended to the streamed zoom and drawn.
    void on_answer_zoom(quint64 serial, int token, const TokenZoomPtr& zoom);
    /// Draw the streamed zoom's latest step (or the one picked in the grid) over the shown
    /// document, and the streamed steps in the inspector.
    void draw_live_zoom();
    /// The zoom bar's line for the live zoom.
    QString live_zoom_text() const;
    /// The answer ended: stop drawing its steps; restore: show the selected answer's zoom again
    /// (no trace of this answer will be loaded to take the views over).
    void end_live_zoom(bool restore);

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
    QStringList answer_notes_; ///< the engine's notes on the answer asked last, in order
    QString wait_note_;        ///< what that answer waits for, in the status line; or empty
    /// The answer started (or failed): its wait note leaves the status line.
    void end_wait_note();
    bool answer_started_ = false; ///< the engine began the current answer (it is not queued)
    bool persist_ = true;
    /// Settings chose another model: said in the status bar once it loads, and when the open
    /// project is read again for it, how many of its documents it has no states for.
    bool model_switch_pending_ = false;
    QString switched_model_;        ///< the model_loaded description, until the project reopens
    QString model_id_, model_file_; ///< the loaded model's identity and file name
    QString switch_banner_model_;   ///< the model the switch banner names
    QString switch_banner_;         ///< the switch banner's text while it may be shown, else ""
    quint64 status_serial_ = 0;
    qint64 last_kv_bytes_ = 0;

    QLabel* banner_ = nullptr;
    QToolButton* banner_close_ = nullptr;
    QWidget* banner_box_ = nullptr;
    QListView* document_list_ = nullptr;
    QListView* chat_list_ = nullptr;
    QListView* conversation_ = nullptr;
    QLabel* document_title_ = nullptr;
    DocumentView* document_view_ = nullptr;
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
    QAction* move_up_action_ = nullptr;
    QAction* move_down_action_ = nullptr;
    QAction* send_action_ = nullptr;
    QAction* stop_action_ = nullptr;
    QAction* chat_actions_[4] = {};
    QLabel* policy_label_ = nullptr;

    // SEKV views.
    quint64 spans_serial_ = 0;
    QHash<qint64, DocumentSpansPtr> spans_; ///< per document, for settings_.memory
    QHash<qint64, AnswerZoomPtr> zooms_;    ///< traces loaded, per message
    AnswerZoomPtr zoom_;                    ///< the answer whose zoom is shown
    qint64 zoom_requested_ = 0;             ///< the message whose trace is wanted
    QString zoom_problem_;                  ///< why zoom_requested_ has no zoom shown
    int zoom_step_ = -1;                    ///< the token shown, -1: none
    int pending_token_ = -1;                ///< to select once the trace is loaded
    bool whole_answer_ = false;
    bool pending_scroll_ = false; ///< scroll to the zoom once the spans are drawn
    bool inspector_shown_once_ = false;
    /// Shows the inspector the first time a zoom comes (a quarter of the window high); later
    /// the user's choice (its toggle) stands.
    void open_inspector_once();
    QLabel* span_status_ = nullptr;
    QWidget* zoom_bar_ = nullptr;
    QLabel* zoom_label_ = nullptr;
    QToolButton* whole_button_ = nullptr;
    QDockWidget* inspector_dock_ = nullptr;
    ZoomInspector* inspector_ = nullptr;
    QAction* whole_action_ = nullptr;
    // Sources: the citation shown or to show once its document's text is there.
    struct CitedPassage {
        qint64 message_id = 0; ///< 0: none
        int citation = -1;
        qint64 document_id = 0;
        qint64 begin = 0, end = 0; ///< bytes of the document's text
    };
    CitedPassage cited_;
    // Live zoom.
    std::shared_ptr<AnswerZoom> live_zoom_; ///< the steps streamed for the answer live_serial_
    quint64 live_serial_ = 0;
    bool live_shown_ = false; ///< the views draw live_zoom_
    int live_pinned_ = -1;    ///< a step picked in the grid while streaming; -1: the latest
};

} // namespace spanscope::gui
