// The store side of the desktop application: a second connection to the open project, on its
// own worker thread, for what the views read and edit while the engine works (document text,
// chats and their messages, export). SQLite in WAL mode lets it read while the engine writes.
#pragma once

#include "gui_types.h"

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
    /// starts.
    void load_document_text(qint64 id);
    void list_chats();
    void load_chat(qint64 chat_id);
    void rename_chat(qint64 chat_id, const QString& title);
    void delete_chat(qint64 chat_id);
    /// Write the chat as Markdown to `path` (atomically: a temporary file, then a rename).
    void export_chat(qint64 chat_id, const QString& path);

signals:
    void document_text(qint64 id, const QString& name, const QString& text);
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

} // namespace spanscope::gui
