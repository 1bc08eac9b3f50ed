// The messages of one chat as a list model. An answer streams into the last row: each piece
// is a dataChanged of that row, never a reset; switching chats resets.
#pragma once

#include "ui/gui_types.h"

#include <QAbstractListModel>

namespace spanscope::gui {

class ChatModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role {
        FromUserRole = Qt::UserRole + 1,
        DetailsRole,
        StreamingRole,
        MessageIdRole,        ///< the message's id in the project (0: not yet saved)
        SekvRole,             ///< an answer with a zoom trace (sekv policy)
        TokenStartsRole,      ///< QList<int>: MessageRow::token_starts
        SelectedTokenRole,    ///< int: the token whose zoom is shown, -1: none
        NoteRole,             ///< bool: a note line, no message (MessageRow::note)
        CitationsRole,        ///< QList<Citation>: an answer's sources, top first
        SelectedCitationRole, ///< int: the citation shown in the document view, -1: none
        TokenCitationsRole,   ///< bool: CitationsRole holds the selected token's own sources
    };

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
    /// Put a note line (MessageRow::note) before the question of the exchange that streams;
    /// nothing when none streams.
    void note_before_question(const QString& note);
    /// Add a piece to the streaming answer (the last row).
    void append_piece(const QString& piece);
    /// End the streaming answer: its final text (empty: keep what streamed), details and
    /// sources (top first).
    void finish_answer(const QString& text, const QString& details,
                       const QList<Citation>& citations = {},
                       const QList<QList<Citation>>& token_citations = {});
    bool streaming() const;
    const QList<MessageRow>& messages() const { return rows_; }
    /// The answer just finished was saved as `message_id` (sekv: with a zoom trace; what full
    /// would hold for its SEKV layers), made by the model `model_id` (model_identity_hex),
    /// shown to the user as `model_shown` (its file name).
    void set_last_answer_saved(qint64 message_id, bool sekv, qint64 full_kv_bytes = 0,
                               const QString& model_id = {}, const QString& model_shown = {});
    /// Row of a message, or -1.
    int row_of_message(qint64 message_id) const;
    /// The tokens of an answer (their text and starts, AnswerZoom), matched to its shown text;
    /// false when they do not spell it (it keeps no tokens).
    bool set_tokens(qint64 message_id, const QString& tokens_text, const QList<int>& starts);
    /// Show `token` of that answer as selected (-1: none), and no other.
    void select_token(qint64 message_id, int token);
    /// Show citation `citation` of that answer as selected (-1 or message 0: none), and no
    /// other.
    void select_citation(qint64 message_id, int citation);

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
