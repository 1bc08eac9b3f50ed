// The store side of the desktop application: a second connection to the open project, on its
// own worker thread, for what the views read and edit while the engine works (document text,
// chats and their messages, export). SQLite in WAL mode lets it read while the engine writes.
#pragma once

#include "ui/gui_types.h"
#include "ui/zoom_data.h"

#include <QObject>

#include <memory>

namespace spanscope {
class Project;
}

namespace spanscope::gui {

class StoreWorker : public QObject {
    Q_OBJECT
public:
    StoreWorker();
    ~StoreWorker() override;

public slots:
    /// Open an existing project (the engine worker created it). Emits error on failure.
    void open_project(const QString& path);
    void close_project();
    /// Emits document_text: the extracted text, with a "[page N]" line where each PDF page
    /// starts, and where each byte of the extracted text is in it.
    void load_document_text(qint64 id);
    /// Emits zoom_trace_loaded: the zoom trace kept with an answer, or why there is none (no
    /// trace: another policy; a damaged one), in words.
    void load_zoom_trace(qint64 message_id);
    void list_chats();
    void load_chat(qint64 chat_id);
    void rename_chat(qint64 chat_id, const QString& title);
    void delete_chat(qint64 chat_id);
    /// Write the chat as Markdown to `path` (atomically: a temporary file, then a rename).
    void export_chat(qint64 chat_id, const QString& path);
    /// Keep the document list as the user left it (document_list.h): every document in list
    /// order, and those left out of the context. Emits error when it cannot be written.
    void save_document_list(const QList<qint64>& order, const QList<qint64>& excluded);

signals:
    void document_text(qint64 id, const QString& name, const QString& text,
                       const spanscope::gui::TextPositionsPtr& positions);
    /// zoom: nullptr when there is none; problem says why.
    void zoom_trace_loaded(qint64 message_id, const spanscope::gui::AnswerZoomPtr& zoom,
                           const QString& problem);
    void chats_listed(const QList<spanscope::gui::ChatRow>& chats);
    void chat_loaded(qint64 chat_id, const QList<spanscope::gui::MessageRow>& messages);
    void chat_exported(qint64 chat_id, const QString& path);
    void error(const QString& message);

private:
    std::unique_ptr<Project> project_;
};

/// One line of statistics for an assistant message from its stored statistics (JSON), or why
/// it has no answer ("stopped before the first token", the error).
QString message_details(const std::string& stats_json);
/// The memory policy recorded in an assistant message's statistics ("" when none), and (sekv)
/// what full would hold for the SEKV layers.
QString message_policy(const std::string& stats_json, qint64* full_kv_bytes = nullptr);

} // namespace spanscope::gui
