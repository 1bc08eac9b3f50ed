// The project's documents as a list model: one row per document (and per file being added),
// with its status; checked rows are the documents questions are asked about. Rows change by
// inserts, removals and dataChanged; only opening a project resets the model.
#pragma once

#include "gui_types.h"

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

    /// Replace every row (a project was opened); all checked.
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
    /// Ids of the checked documents that are in the project.
    QList<qint64> checked_ids() const;
    /// Rows that are documents of the project (not failed or cancelled files).
    int total_documents() const;

private:
    QList<DocumentRow> rows_;
    QList<bool> checked_;
};

} // namespace spanscope::gui
