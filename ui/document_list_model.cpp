#include "ui/document_list_model.h"

#include <QBrush>
#include <QColor>
#include <QLocale>

namespace spanscope::gui {

int DocumentListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant DocumentListModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const auto& r = rows_[index.row()];
    switch (role) {
    case Qt::DisplayRole:
        return QStringLiteral("%1\n%2").arg(r.name, status_text(r));
    case Qt::ToolTipRole: {
        QString tip = r.path;
        if (r.tokens > 0)
            tip += QStringLiteral("\n%1 tokens in %2 chunks")
                       .arg(QLocale().toString(r.tokens))
                       .arg(r.chunks);
        for (const auto& w : r.warnings)
            tip += "\n" + w;
        if (!r.error.isEmpty())
            tip += "\n" + r.error;
        return tip;
    }
    case Qt::ForegroundRole:
        if (r.status == DocumentRow::Status::Failed)
            return QBrush(QColor(0xb0, 0x20, 0x20));
        return {};
    case Qt::CheckStateRole:
        return r.id > 0 ? QVariant(checked_[index.row()] ? Qt::Checked : Qt::Unchecked)
                        : QVariant();
    case IdRole:
        return r.id;
    case KeyRole:
        return r.key;
    case StatusRole:
        return static_cast<int>(r.status);
    case StatusTextRole:
        return status_text(r);
    case ProgressRole:
        return r.chunks > 0 ? static_cast<double>(r.chunks_stored) / r.chunks : 0.0;
    }
    return {};
}

bool DocumentListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
    if (role != Qt::CheckStateRole || !checkIndex(index, CheckIndexOption::IndexIsValid) ||
        rows_[index.row()].id <= 0)
        return false;
    const bool checked = value.toInt() == Qt::Checked;
    if (checked_[index.row()] == checked)
        return true;
    checked_[index.row()] = checked;
    emit dataChanged(index, index, {Qt::CheckStateRole});
    emit context_changed();
    return true;
}

Qt::ItemFlags DocumentListModel::flags(const QModelIndex& index) const {
    if (!index.isValid())
        return Qt::ItemIsDropEnabled; // between rows: where a dragged row goes
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemNeverHasChildren;
    if (rows_[index.row()].id > 0)
        f |= Qt::ItemIsUserCheckable | Qt::ItemIsDragEnabled;
    return f;
}

QHash<int, QByteArray> DocumentListModel::roleNames() const {
    auto names = QAbstractListModel::roleNames();
    names[IdRole] = "documentId";
    names[KeyRole] = "key";
    names[StatusRole] = "status";
    names[StatusTextRole] = "statusText";
    names[ProgressRole] = "progress";
    return names;
}

void DocumentListModel::reset_rows(const QList<DocumentRow>& rows) {
    beginResetModel();
    rows_ = rows;
    checked_.clear();
    for (const auto& r : rows)
        checked_ << r.in_context;
    endResetModel();
}

int DocumentListModel::row_of_id(qint64 id) const {
    for (int i = 0; i < rows_.size(); ++i)
        if (id > 0 && rows_[i].id == id)
            return i;
    return -1;
}

void DocumentListModel::upsert(const DocumentRow& row) {
    const int by_id = row_of_id(row.id);
    // The row of the same file: one still being read (no id yet) first, so that a file added
    // again while its document is listed merges that row into the document's; a failed or
    // cancelled row keeps its reason.
    auto reading = [](const DocumentRow& r) {
        return r.id == 0 && (r.status == DocumentRow::Status::Queued ||
                             r.status == DocumentRow::Status::Extracting ||
                             r.status == DocumentRow::Status::Prefilling);
    };
    int by_key = -1;
    for (int i = 0; i < rows_.size() && by_key < 0; ++i)
        if (rows_[i].key == row.key && reading(rows_[i]))
            by_key = i;
    for (int i = 0; i < rows_.size() && by_key < 0; ++i)
        if (rows_[i].key == row.key && (rows_[i].id == 0 || rows_[i].id == row.id))
            by_key = i;
    if (by_id >= 0 && by_key >= 0 && by_id != by_key) {
        // The file's content was already in the project as another row: keep that one.
        remove_row(by_key);
        upsert(row);
        return;
    }
    const int at = by_id >= 0 ? by_id : by_key;
    if (at < 0) {
        const int n = static_cast<int>(rows_.size());
        beginInsertRows({}, n, n);
        rows_.append(row);
        checked_.append(true);
        endInsertRows();
        return;
    }
    DocumentRow merged = row;
    if (rows_[at].id > 0 && merged.key != rows_[at].key && by_id >= 0)
        merged.key = rows_[at].key;
    rows_[at] = merged;
    emit dataChanged(index(at), index(at));
}

void DocumentListModel::remove_id(qint64 id) {
    const int r = row_of_id(id);
    if (r >= 0)
        remove_row(r);
}

void DocumentListModel::remove_row(int r) {
    if (r < 0 || r >= rows_.size())
        return;
    beginRemoveRows({}, r, r);
    rows_.removeAt(r);
    checked_.removeAt(r);
    endRemoveRows();
}

QList<qint64> DocumentListModel::checked_ids() const {
    QList<qint64> ids;
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].id > 0 && checked_[i])
            ids << rows_[i].id;
    return ids;
}

QList<qint64> DocumentListModel::ordered_ids() const {
    QList<qint64> ids;
    for (const auto& r : rows_)
        if (r.id > 0)
            ids << r.id;
    return ids;
}

QList<qint64> DocumentListModel::unchecked_ids() const {
    QList<qint64> ids;
    for (int i = 0; i < rows_.size(); ++i)
        if (rows_[i].id > 0 && !checked_[i])
            ids << rows_[i].id;
    return ids;
}

bool DocumentListModel::moveRows(const QModelIndex& source_parent, int source_row, int count,
                                 const QModelIndex& destination_parent, int destination_child) {
    const int n = static_cast<int>(rows_.size());
    if (source_parent.isValid() || destination_parent.isValid() || count < 1 || source_row < 0 ||
        source_row + count > n || destination_child < 0 || destination_child > n ||
        (destination_child >= source_row && destination_child <= source_row + count))
        return false; // outside the list, or onto itself
    if (!beginMoveRows({}, source_row, source_row + count - 1, {}, destination_child))
        return false;
    const auto rows = rows_.mid(source_row, count);
    const auto checked = checked_.mid(source_row, count);
    rows_.remove(source_row, count);
    checked_.remove(source_row, count);
    const int at = destination_child > source_row ? destination_child - count : destination_child;
    for (int i = 0; i < count; ++i) {
        rows_.insert(at + i, rows[i]);
        checked_.insert(at + i, checked[i]);
    }
    endMoveRows();
    emit context_changed();
    return true;
}

int DocumentListModel::total_documents() const {
    int n = 0;
    for (const auto& r : rows_)
        n += r.id > 0 ? 1 : 0;
    return n;
}

} // namespace spanscope::gui
