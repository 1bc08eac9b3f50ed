// The messages of one chat as a list model. An answer streams into the last row: each piece
// is a dataChanged of that row, never a reset; switching chats resets.
#pragma once

#include "gui_types.h"

#include <QAbstractListModel>

namespace spanscope::gui {

class ChatModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { FromUserRole = Qt::UserRole + 1, DetailsRole, StreamingRole };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QHash<int, QByteArray> roleNames() const override;

    qint64 chat_id() const { return chat_id_; }
    void set_chat_id(qint64 id) { chat_id_ = id; }
    /// Show another chat (0: a new, empty one).
    void set_messages(qint64 chat_id, const QList<MessageRow>& rows);
    /// Append a question and an empty answer that streams; `details` says what happens first.
    void begin_exchange(const QString& question, const QString& details);
    /// Add a piece to the streaming answer (the last row).
    void append_piece(const QString& piece);
    /// End the streaming answer: its final text (empty: keep what streamed) and details.
    void finish_answer(const QString& text, const QString& details);
    bool streaming() const;
    const QList<MessageRow>& messages() const { return rows_; }

private:
    qint64 chat_id_ = 0;
    QList<MessageRow> rows_;
};

/// The chats of the project. set_chats() updates rows in place, inserting and removing only
/// what changed, so the selection survives.
class ChatListModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { IdRole = Qt::UserRole + 1 };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QHash<int, QByteArray> roleNames() const override;

    void set_chats(const QList<ChatRow>& chats);
    void clear();
    int row_of_id(qint64 id) const;
    const ChatRow& chat(int r) const { return rows_[r]; }

private:
    QList<ChatRow> rows_;
};

} // namespace spanscope::gui
