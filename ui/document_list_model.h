// The project's documents as a list model: one row per document (and per file being added),
// with its status; checked rows are the documents questions are asked about, in the order of
// the list (LinearKV puts them in context in that order; rows are dragged to reorder them).
// Rows change by inserts, removals, moves and dataChanged; only opening a project resets it.
#pragma once

#include "ui/gui_types.h"

#include <QAbstractListModel>

namespace spanscope::gui {

class DocumentListModel : public QAbstractListModel {
    Q_OBJECT
public:
    enum Role { IdRole = Qt::UserRole + 1, KeyRole, StatusRole, StatusTextRole, ProgressRole };

    using QAbstractListModel::QAbstractListModel;

    int rowCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    bool setData(const QModelIndex& index, const QVariant& value, int role) override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;
    QHash<int, QByteArray> roleNames() const override;
    /// Moves within the list (a QListView in InternalMove mode drags rows with moveRow; should
    /// that fail, its fallback drop through dropMimeData inserts nothing, as this model has no
    /// insertRows, and the list stays as it was).
    bool moveRows(const QModelIndex& source_parent, int source_row, int count,
                  const QModelIndex& destination_parent, int destination_child) override;
    Qt::DropActions supportedDropActions() const override { return Qt::MoveAction; }

    /// Replace every row (a project was opened), checked as their in_context says.
    void reset_rows(const QList<DocumentRow>& rows);
    /// Update the row with the same id (or, before it has one, the same key), else append it.
    /// A row that received the id of another row (the same content added from another file)
    /// is merged into that one.
    void upsert(const DocumentRow& row);
    void remove_id(qint64 id);
    void remove_row(int row);
    const DocumentRow& row(int r) const { return rows_[r]; }
    /// Row of the document, or -1.
    int row_of_id(qint64 id) const;
    /// Ids of the checked documents that are in the project, in list order.
    QList<qint64> checked_ids() const;
    /// Ids of every document in the project, in list order, and those not checked.
    QList<qint64> ordered_ids() const;
    QList<qint64> unchecked_ids() const;

    /// Rows that are documents of the project (not failed or cancelled files).
    int total_documents() const;

signals:
    /// The user reordered the list or checked or unchecked a document.
    void context_changed();

private:
    QList<DocumentRow> rows_;
    QList<bool> checked_;
};

} // namespace spanscope::gui
