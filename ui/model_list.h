// Settings' list of models: the default one (model_locator.h), the other GGUF files installed
// in the models folders beside it, and every GGUF file the user added, each described from its
// metadata (engine/model/model_summary.h) — name, architecture, size, context length, key/value
// bytes per token — with Add… and Remove. The selected row is the model used; a file that cannot be
// used shows its reason in one line and cannot be selected. Files are described on worker threads
// (QtConcurrent's pool): a row reads "reading…" until its description arrives, so a slow disk or a
// huge file never holds up the dialog.
#pragma once

#include "engine/model/model_summary.h"

#include <QAbstractTableModel>
#include <QList>
#include <QWidget>

#include <functional>
#include <string>

class QPushButton;
class QTableView;

namespace spanscope::gui {

/// One row: a model file and what its metadata says.
struct ModelRow {
    /// The file; for the default row the file locate_model("") found (empty when none).
    QString path;
    bool is_default = false;
    /// Found in a models folder (spanscope/models of an XDG data directory, where the set-up
    /// installs models) beside the default one: listed whenever it is there, never removed,
    /// not among the added files.
    bool installed = false;
    /// False while the file is being described: summary holds nothing yet but its name.
    bool described = false;
    /// Which description request this row waits for (ModelList numbers them, from 1): a
    /// description is applied to the row that still has its id, never by position.
    quint64 id = 0;
    ModelSummary summary;
    bool usable() const { return described && summary.supported; }
};

/// The rows as a table. Columns: name, architecture, size (bytes), context (tokens), KV
/// bytes/token (f16, every attention layer: ModelSummary::kv_bytes_per_token), notes ("reading…"
/// until described, then the reason a file cannot be used, or the bytes per token past a
/// sliding window). Qt::DisplayRole is formatted for people; kValueRole holds the number
/// (qint64) for the numeric columns (0 while reading). Rows that cannot be used, or are being
/// read, are enabled but not selectable.
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
    /// The description for the row whose id is `id`: stored, the row marked described, its
    /// cells and flags announced (dataChanged over the row). Returns the row, or -1 when no row
    /// has that id any more (removed meanwhile): then nothing changes.
    int set_summary(quint64 id, const ModelSummary& summary);
    void remove(int r);
    const ModelRow& row(int r) const { return rows_[r]; }
    /// The row of a file (the default row for its own path too), or -1.
    int row_of_path(const QString& path) const;
    /// The row with this id, or -1.
    int row_of_id(quint64 id) const;

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
    /// What describes a file: describe_model_file unless a test says otherwise. Called on a
    /// worker thread, several at once; must not throw.
    using Describer = std::function<ModelSummary(const std::string& path)>;

    /// chosen: AppSettings::model_path (empty: the default model); files: AppSettings::
    /// model_files (chosen is listed too when it is not among them). Every row starts reading;
    /// its file is described in the background by `describe` (null: describe_model_file). The
    /// chosen row is selected once its description says it can be used.
    ModelList(const QString& chosen, const QStringList& files, QWidget* parent = nullptr,
              Describer describe = {});

    /// The model to use: empty for the default row, else the chosen row's file. While no
    /// usable row is chosen (the file chosen before cannot be used now), that file as long as
    /// it stays listed, else empty (the default).
    QString chosen_path() const;
    /// The added files, in the list's order (the default model and the installed ones are not
    /// among them).
    QStringList files() const;
    ModelListModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    /// Rows still waiting for their description.
    int reading() const;

signals:
    /// Row `row` has its description (emitted after the model has it).
    void described(int row);

public slots:
    /// Add `path` (what Add… does once its file dialog returns): appended unless it is listed
    /// already, made the current row, and described in the background; chosen when its
    /// description says it can be used, unless the user has chosen another row meanwhile. A
    /// file that cannot be used stays in the list with its reason, so that the user sees why,
    /// until removed. Returns its row.
    int add_file(const QString& path);
    /// Remove the current row's file from the list (not from disk); the default row and the
    /// installed ones cannot be removed. Removing the chosen file chooses the default model.
    void remove_current();

private:
    /// A row for `path`, reading, with a new id; its description requested.
    ModelRow new_row(const QString& path, bool is_default);
    /// Describe row `row`'s file on a worker thread; the result comes back to on_described.
    void describe_in_background(const ModelRow& row);
    void on_described(quint64 id, const ModelSummary& summary);
    /// Choose row r: at once when described and usable (select_row), once described when
    /// still reading.
    void choose(int r);
    /// Choose row r (selected in the view) when it can be used; else nothing changes.
    void select_row(int r);
    void on_selection_changed();
    void update_buttons();
    Describer describe_;
    quint64 next_id_ = 1;
    /// The row to choose once it is described (the one chosen before, or just added); 0: none.
    quint64 pending_choice_ = 0;
    int chosen_row_ = -1;
    ModelListModel* model_ = nullptr;
    QTableView* view_ = nullptr;
    QPushButton* add_ = nullptr;
    QPushButton* remove_ = nullptr;
    QString initial_;
};

} // namespace spanscope::gui
