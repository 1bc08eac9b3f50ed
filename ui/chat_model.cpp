#include "ui/chat_model.h"

#include "ui/zoom_data.h"

namespace spanscope::gui {

int ChatModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ChatModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& m = rows_[index.row()];
    switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
        // A completion streams with its leading space and may end in its newline.
        return m.from_user ? m.text : m.text.trimmed();
    case FromUserRole:
        return m.from_user;
    case DetailsRole:
        return m.details;
    case StreamingRole:
        return m.streaming;
    case MessageIdRole:
        return m.id;
    case SekvRole:
        return m.sekv;
    case TokenStartsRole:
        return QVariant::fromValue(m.token_starts);
    case SelectedTokenRole:
        return m.selected_token;
    case NoteRole:
        return m.note;
    case CitationsRole:
        return QVariant::fromValue(shown_citations(m));
    case TokenCitationsRole:
        return shows_token_citations(m);
    case SelectedCitationRole:
        return m.selected_citation;
    }
    return {};
}

QHash<int, QByteArray> ChatModel::roleNames() const {
    auto names = QAbstractListModel::roleNames();
    names[FromUserRole] = "fromUser";
    names[DetailsRole] = "details";
    names[StreamingRole] = "streaming";
    names[MessageIdRole] = "messageId";
    names[SekvRole] = "sekv";
    names[TokenStartsRole] = "tokenStarts";
    names[SelectedTokenRole] = "selectedToken";
    names[NoteRole] = "note";
    names[CitationsRole] = "citations";
    names[SelectedCitationRole] = "selectedCitation";
    names[TokenCitationsRole] = "tokenCitations";
    return names;
}

void ChatModel::set_last_answer_saved(qint64 message_id, bool sekv, qint64 full_kv_bytes,
                                      const QString& model_id, const QString& model_shown) {
    if (rows_.isEmpty() || rows_.back().from_user || rows_.back().streaming)
        return;
    rows_.back().id = message_id;
    rows_.back().sekv = sekv;
    rows_.back().full_kv_bytes = full_kv_bytes;
    rows_.back().model_id = model_id;
    rows_.back().model_shown = model_shown;
    const auto i = index(static_cast<int>(rows_.size()) - 1);
    emit dataChanged(i, i, {MessageIdRole, SekvRole});
}

int ChatModel::row_of_message(qint64 message_id) const {
    if (message_id <= 0)
        return -1;
    for (int r = 0; r < rows_.size(); ++r)
        if (rows_[r].id == message_id)
            return r;
    return -1;
}

bool ChatModel::set_tokens(qint64 message_id, const QString& tokens_text,
                           const QList<int>& starts) {
    const int r = row_of_message(message_id);
    if (r < 0)
        return false;
    auto& m = rows_[r];
    m.token_starts = shown_token_starts(data(index(r)).toString(), tokens_text, starts);
    emit dataChanged(index(r), index(r), {TokenStartsRole});
    return !m.token_starts.isEmpty();
}

void ChatModel::select_token(qint64 message_id, int token) {
    const int target = row_of_message(message_id);
    for (int r = 0; r < rows_.size(); ++r) {
        const int want = r == target ? token : -1;
        if (rows_[r].selected_token != want) {
            const bool had_own = shows_token_citations(rows_[r]);
            rows_[r].selected_token = want;
            // The Sources block follows: the token's own sources, or the answer's again.
            if (had_own || shows_token_citations(rows_[r]))
                emit dataChanged(index(r), index(r),
                                 {SelectedTokenRole, CitationsRole, TokenCitationsRole});
            else
                emit dataChanged(index(r), index(r), {SelectedTokenRole});
        }
    }
}

void ChatModel::select_citation(qint64 message_id, int citation) {
    const int target = row_of_message(message_id);
    for (int r = 0; r < rows_.size(); ++r) {
        const int want = r == target && citation >= 0 && citation < shown_citations(rows_[r]).size()
                             ? citation
                             : -1;
        if (rows_[r].selected_citation != want) {
            rows_[r].selected_citation = want;
            emit dataChanged(index(r), index(r), {SelectedCitationRole});
        }
    }
}

void ChatModel::set_messages(qint64 chat_id, const QList<MessageRow>& rows) {
    beginResetModel();
    chat_id_ = chat_id;
    rows_ = rows;
    endResetModel();
}

void ChatModel::begin_exchange(const QString& question, const QString& details) {
    const int n = static_cast<int>(rows_.size());
    beginInsertRows({}, n, n + 1);
    MessageRow q;
    q.from_user = true;
    q.text = question;
    MessageRow a;
    a.streaming = true;
    a.details = details;
    rows_ << q << a;
    endInsertRows();
}

void ChatModel::note_before_question(const QString& note) {
    if (!streaming() || rows_.size() < 2 || !rows_[rows_.size() - 2].from_user)
        return;
    const int at = static_cast<int>(rows_.size()) - 2;
    beginInsertRows({}, at, at);
    MessageRow n;
    n.note = true;
    n.text = note;
    rows_.insert(at, n);
    endInsertRows();
}

bool ChatModel::streaming() const {
    return !rows_.isEmpty() && rows_.back().streaming;
}

void ChatModel::append_piece(const QString& piece) {
    if (!streaming())
        return;
    auto& a = rows_.back();
    a.text += piece;
    a.details = QStringLiteral("answering…");
    const auto i = index(static_cast<int>(rows_.size()) - 1);
    emit dataChanged(i, i, {Qt::DisplayRole, Qt::EditRole, DetailsRole});
}

void ChatModel::finish_answer(const QString& text, const QString& details,
                              const QList<Citation>& citations,
                              const QList<QList<Citation>>& token_citations) {
    if (!streaming())
        return;
    auto& a = rows_.back();
    if (!text.isEmpty())
        a.text = text;
    a.details = details;
    a.citations = citations;
    a.token_citations = token_citations;
    a.selected_citation = -1;
    a.streaming = false;
    const auto i = index(static_cast<int>(rows_.size()) - 1);
    emit dataChanged(i, i);
}

int ChatListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ChatListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& c = rows_[index.row()];
    switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
        return c.title;
    case Qt::ToolTipRole:
        return QStringLiteral("%1 (%2 messages)").arg(c.title).arg(c.messages);
    case IdRole:
        return c.id;
    }
    return {};
}

QHash<int, QByteArray> ChatListModel::roleNames() const {
    auto names = QAbstractListModel::roleNames();
    names[IdRole] = "chatId";
    return names;
}

int ChatListModel::row_of_id(qint64 id) const {
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].id == id)
            return i;
    return -1;
}

void ChatListModel::set_chats(const QList<ChatRow>& chats) {
    // Remove the rows that are gone (from the end, so indexes stay valid).
    for (int i = static_cast<int>(rows_.size()) - 1; i >= 0; --i) {
        bool kept = false;
        for (const auto& c : chats)
            kept = kept || c.id == rows_[i].id;
        if (!kept) {
            beginRemoveRows({}, i, i);
            rows_.removeAt(i);
            endRemoveRows();
        }
    }
    // Update or insert in the order given.
    for (int i = 0; i < chats.size(); ++i) {
        const int at = row_of_id(chats[i].id);
        if (at == i) {
            if (rows_[i].title != chats[i].title || rows_[i].messages != chats[i].messages) {
                rows_[i] = chats[i];
                emit dataChanged(index(i), index(i));
            }
        } else if (at < 0) {
            beginInsertRows({}, i, i);
            rows_.insert(i, chats[i]);
            endInsertRows();
        } else {
            beginMoveRows({}, at, at, {}, i);
            rows_.move(at, i);
            endMoveRows();
            rows_[i] = chats[i];
            emit dataChanged(index(i), index(i));
        }
    }
}

void ChatListModel::clear() {
    if (rows_.isEmpty())
        return;
    beginRemoveRows({}, 0, static_cast<int>(rows_.size()) - 1);
    rows_.clear();
    endRemoveRows();
}

} // namespace spanscope::gui
