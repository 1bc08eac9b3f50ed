// Settings' list of models: the default one (model_locator.h) and every GGUF file the user
// added, each described from its metadata (engine/model/model_summary.h) — name, architecture,
// size, context length, key/value bytes per token — with Add… and Remove. The selected row is
// the model used; a file that cannot be used shows its reason in one line and cannot be
// selected.
#pragma once

#include "engine/model/model_summary.h"

#include <QAbstractTableModel>
#include <QList>
#include <QWidget>

class QPushButton;
class QTableView;

namespace spanscope::gui {

/// One row: a model file and what its metadata says.
struct ModelRow {
    /// The file; for the default row the file locate_model("") found (empty when none).
    QString path;
    bool is_default = false;
    ModelSummary summary;
    bool usable() const { return summary.supported; }
};

/// The rows as a table. Columns: name, architecture, size (bytes), context (tokens), KV
/// bytes/token (f16, every attention layer: ModelSummary::kv_bytes_per_token), notes (the
/// reason a file cannot be used, or the bytes per token past a sliding window). Qt::DisplayRole
/// is formatted for people; kValueRole holds the number (qint64) for the numeric columns.
/// Rows that cannot be used are enabled but not selectable.
class ModelListModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Name, Architecture, Size, Context, KvBytes, Notes, ColumnCount };
    static constexpr int kValueRole = Qt::UserRole;

    using QAbstractTableModel::QAbstractTableModel;
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    Qt::ItemFlags flags(const QModelIndex& index) const override;

    void set_rows(const QList<ModelRow>& rows);
    /// Append a row; returns its index.
    int append(const ModelRow& row);
    void remove(int r);
    const ModelRow& row(int r) const { return rows_[r]; }
    /// The row of a file (the default row for its own path too), or -1.
    int row_of_path(const QString& path) const;

private:
    QList<ModelRow> rows_;
};

/// The list with its Add… and Remove buttons (objectNames "modelList", "modelAdd",
/// "modelRemove"; the view's model is a ModelListModel). The chosen row is the view's selected
/// row; selecting a row that cannot be used leaves the choice as it was. Remove acts on the
/// current row, so that a file that cannot be chosen can still be removed.
class ModelList : public QWidget {
    Q_OBJECT
public:
    /// chosen: AppSettings::model_path (empty: the default model); files: AppSettings::
    /// model_files (chosen is listed too when it is not among them). Each file is described
    /// here, on the calling thread (milliseconds each: metadata only).
    ModelList(const QString& chosen, const QStringList& files, QWidget* parent = nullptr);

    /// The model to use: empty for the default row, else the chosen row's file. While no
    /// usable row is chosen (the file chosen before cannot be used now), that file as long as
    /// it stays listed, else empty (the default).
    QString chosen_path() const;
    /// The added files, in the list's order (the default model is not among them).
    QStringList files() const;
    ModelListModel* model() const { return model_; }
    QTableView* view() const { return view_; }

public slots:
    /// Add `path` (what Add… does once its file dialog returns): described, appended unless it
    /// is listed already, made the current row and, when it can be used, chosen. A file that
    /// cannot be used stays in the list with its reason, so that the user sees why, until
    /// removed. Returns its row.
    int add_file(const QString& path);
    /// Remove the current row's file from the list (not from disk); the default row cannot be
    /// removed. Removing the chosen file chooses the default model.
    void remove_current();

private:
    /// Choose row r (selected in the view) when it can be used; else nothing changes.
    void select_row(int r);
    void on_selection_changed();
    void update_buttons();
    int chosen_row_ = -1;
    ModelListModel* model_ = nullptr;
    QTableView* view_ = nullptr;
    QPushButton* add_ = nullptr;
    QPushButton* remove_ = nullptr;
    QString initial_;
};

} // namespace spanscope::gui
