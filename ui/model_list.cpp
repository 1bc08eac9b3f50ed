#include "ui/model_list.h"

#include "engine/model/model_locator.h"

#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLocale>
#include <QPalette>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <algorithm>

namespace spanscope::gui {

namespace {

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

} // namespace

int ModelListModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ModelListModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant ModelListModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rows_.size())
        return {};
    const ModelRow& r = rows_[index.row()];
    const ModelSummary& s = r.summary;
    const QLocale loc;
    const bool known = r.usable();
    const bool kv_known = r.described && s.kv_bytes_per_token > 0;
    if (role == kValueRole) {
        switch (index.column()) {
        case Size:
            return static_cast<qint64>(s.file_bytes);
        case Context:
            return static_cast<qint64>(s.context_length);
        case KvBytes:
            return static_cast<qint64>(s.kv_bytes_per_token);
        default:
            return {};
        }
    }
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case Name: {
            // The file's name tells two copies apart; general.name is in the tooltip.
            const QString name = r.path.isEmpty() ? q(s.name) : QFileInfo(r.path).fileName();
            return r.is_default  ? tr("%1 (default)").arg(name)
                   : r.installed ? tr("%1 (installed)").arg(name)
                                 : name;
        }
        case Architecture:
            return s.architecture.empty() ? tr("—") : q(s.architecture);
        case Size:
            return s.file_bytes > 0 ? loc.formattedDataSize(static_cast<qint64>(s.file_bytes))
                                    : tr("—");
        case Context:
            return s.context_length > 0 ? loc.toString(static_cast<qint64>(s.context_length))
                                        : tr("—");
        case KvBytes:
            // Shown for a file refused after its hyper-parameters were read, too.
            return kv_known
                       ? tr("%1 B").arg(loc.toString(static_cast<qint64>(s.kv_bytes_per_token)))
                       : tr("—");
        case Notes:
            if (!r.described)
                return tr("reading…");
            if (!known)
                return q(s.problem);
            if (s.n_sliding_layers > 0)
                return tr("%1 B/token past the %2-token window (%3 of %4 layers slide)")
                    .arg(loc.toString(static_cast<qint64>(s.kv_bytes_per_token_global)),
                         loc.toString(static_cast<qint64>(s.sliding_window)))
                    .arg(s.n_sliding_layers)
                    .arg(s.n_layer);
            if (s.n_recurrent_layers > 0)
                return tr("%1 of %2 layers recurrent (a fixed-size state)")
                    .arg(s.n_recurrent_layers)
                    .arg(s.n_layer);
            if (s.n_attention_layers > 0)
                return tr("every one of its %1 layers keeps every token: the cost per token "
                          "holds at any length")
                    .arg(s.n_layer);
            return {};
        default:
            return {};
        }
    }
    if (role == Qt::ToolTipRole) {
        const QString where = (r.path.isEmpty() ? tr("(no file)") : r.path) +
                              (s.name.empty() ? QString() : QStringLiteral(" — ") + q(s.name));
        if (!r.described)
            return tr("%1\nReading the file's header…").arg(where);
        if (!known)
            return tr("%1\nCannot be used: %2").arg(where, q(s.problem));
        return tr("%1\n%2 layers (%3 with keys and values), context %4 tokens.\nKV bytes per "
                  "token: an f16 key and value row per attention layer, sliding-window layers "
                  "included.")
            .arg(where)
            .arg(s.n_layer)
            .arg(s.n_attention_layers)
            .arg(loc.toString(static_cast<qint64>(s.context_length)));
    }
    if (role == Qt::ForegroundRole && r.described && !known && index.column() == Notes)
        return QPalette().brush(QPalette::Disabled, QPalette::Text);
    if (role == Qt::TextAlignmentRole &&
        (index.column() == Size || index.column() == Context || index.column() == KvBytes))
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

QVariant ModelListModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case Name:
        return tr("Name");
    case Architecture:
        return tr("Architecture");
    case Size:
        return tr("Size");
    case Context:
        return tr("Context");
    case KvBytes:
        return tr("KV bytes/token");
    case Notes:
        return tr("Notes");
    default:
        return {};
    }
}

Qt::ItemFlags ModelListModel::flags(const QModelIndex& index) const {
    if (!index.isValid() || index.row() >= rows_.size())
        return Qt::NoItemFlags;
    // A file that cannot be used stays readable but cannot be chosen.
    return rows_[index.row()].usable() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable
                                       : Qt::ItemIsEnabled;
}

void ModelListModel::set_rows(const QList<ModelRow>& rows) {
    beginResetModel();
    rows_ = rows;
    endResetModel();
}

int ModelListModel::append(const ModelRow& row) {
    const int r = static_cast<int>(rows_.size());
    beginInsertRows({}, r, r);
    rows_.append(row);
    endInsertRows();
    return r;
}

void ModelListModel::remove(int r) {
    if (r < 0 || r >= rows_.size())
        return;
    beginRemoveRows({}, r, r);
    rows_.removeAt(r);
    endRemoveRows();
}

int ModelListModel::set_summary(quint64 id, const ModelSummary& summary) {
    const int r = row_of_id(id);
    if (r < 0)
        return -1;
    rows_[r].summary = summary;
    rows_[r].described = true;
    emit dataChanged(index(r, 0), index(r, ColumnCount - 1));
    return r;
}

int ModelListModel::row_of_id(quint64 id) const {
    for (int r = 0; r < rows_.size(); ++r)
        if (rows_[r].id == id)
            return r;
    return -1;
}

int ModelListModel::row_of_path(const QString& path) const {
    if (path.isEmpty())
        return -1;
    const QFileInfo wanted(path);
    for (int r = 0; r < rows_.size(); ++r)
        if (rows_[r].path == path ||
            (!rows_[r].path.isEmpty() && QFileInfo(rows_[r].path) == wanted))
            return r;
    return -1;
}

ModelList::ModelList(const QString& chosen, const QStringList& files, QWidget* parent,
                     Describer describe)
    : QWidget(parent), describe_(describe ? std::move(describe) : Describer(describe_model_file)),
      initial_(chosen) {
    model_ = new ModelListModel(this);
    QList<ModelRow> rows;
    if (const ModelLocation where = locate_model(""); where.path.empty()) {
        ModelRow none; // nothing to read: described at once
        none.is_default = true;
        none.described = true;
        none.id = next_id_++;
        none.summary.name = kDefaultModelName;
        none.summary.problem = "not installed (bash scripts/setup.sh model installs it)";
        rows << none;
    } else {
        rows << new_row(q(where.path), true);
    }
    auto listed_already = [&rows](const QFileInfo& f) {
        return std::any_of(rows.begin(), rows.end(), [&f](const ModelRow& r) {
            return !r.path.isEmpty() && QFileInfo(r.path) == f;
        });
    };
    // The model files installed beside the default one (the set-up puts SmolLM2 there): listed
    // whenever they are there.
    for (const auto& dir : xdg_data_dirs()) {
        const QDir models(q(dir + "/spanscope/models"));
        for (const QFileInfo& f :
             models.entryInfoList({QStringLiteral("*.gguf")}, QDir::Files, QDir::Name))
            if (!listed_already(f)) {
                rows << new_row(f.absoluteFilePath(), false);
                rows.back().installed = true;
            }
    }
    QStringList listed = files;
    if (!chosen.isEmpty() && !listed.contains(chosen))
        listed << chosen;
    for (const QString& f : listed)
        if (!f.isEmpty() && !listed_already(QFileInfo(f)))
            rows << new_row(f, false);
    model_->set_rows(rows);

    view_ = new QTableView;
    view_->setObjectName(QStringLiteral("modelList"));
    view_->setModel(model_);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::SingleSelection);
    view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    view_->verticalHeader()->hide();
    view_->setWordWrap(false);
    // Every column but the notes fits its contents; the notes take the rest (the whole reason
    // is in the tooltip), and the list asks for room for all of them at the dialog's opening.
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view_->horizontalHeader()->setSectionResizeMode(ModelListModel::Notes, QHeaderView::Stretch);
    view_->setMinimumWidth(880);
    view_->setMinimumHeight(view_->verticalHeader()->defaultSectionSize() * 5);

    add_ = new QPushButton(tr("Add…"));
    add_->setObjectName(QStringLiteral("modelAdd"));
    add_->setToolTip(tr("Add a model file (GGUF) to the list"));
    remove_ = new QPushButton(tr("Remove"));
    remove_->setObjectName(QStringLiteral("modelRemove"));
    remove_->setToolTip(tr("Remove the selected file from the list (the file stays on disk; "
                           "the default model and the installed ones cannot be removed)"));
    connect(add_, &QPushButton::clicked, this, [this] {
        const QString dir = model_->row(0).path.isEmpty()
                                ? QString()
                                : QFileInfo(model_->row(0).path).absolutePath();
        const QString f = QFileDialog::getOpenFileName(this, tr("Add a model file"), dir,
                                                       tr("GGUF models (*.gguf)"));
        if (!f.isEmpty())
            add_file(f);
    });
    connect(remove_, &QPushButton::clicked, this, &ModelList::remove_current);
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &ModelList::on_selection_changed);
    connect(view_->selectionModel(), &QItemSelectionModel::currentChanged, this,
            &ModelList::update_buttons);

    auto* buttons = new QVBoxLayout;
    buttons->addWidget(add_);
    buttons->addWidget(remove_);
    buttons->addStretch(1);
    auto* layout = new QHBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(view_, 1);
    layout->addLayout(buttons);

    if (const int r = chosen.isEmpty() ? 0 : model_->row_of_path(chosen); r >= 0) {
        choose(r);
        view_->selectionModel()->setCurrentIndex(model_->index(r, 0),
                                                 QItemSelectionModel::NoUpdate);
    }
    update_buttons();
    for (const ModelRow& row : rows)
        if (!row.described)
            describe_in_background(row);
}

ModelRow ModelList::new_row(const QString& path, bool is_default) {
    ModelRow row;
    row.path = path;
    row.is_default = is_default;
    row.id = next_id_++;
    row.summary.path = path.toStdString();
    row.summary.name = QFileInfo(path).fileName().toStdString();
    return row;
}

void ModelList::describe_in_background(const ModelRow& row) {
    // The watcher belongs to this widget: closed before the file is read, the dialog drops the
    // result (the worker holds its own copies and finishes on its own).
    auto* watcher = new QFutureWatcher<ModelSummary>(this);
    const quint64 id = row.id;
    connect(watcher, &QFutureWatcher<ModelSummary>::finished, this, [this, watcher, id] {
        watcher->deleteLater();
        on_described(id, watcher->result());
    });
    watcher->setFuture(QtConcurrent::run([describe = describe_, path = row.path.toStdString()] {
        try {
            return describe(path);
        } catch (const std::exception& e) { // describe_model_file throws only bad_alloc
            ModelSummary s;
            s.path = path;
            s.problem = e.what();
            return s;
        }
    }));
}

void ModelList::on_described(quint64 id, const ModelSummary& summary) {
    const int r = model_->set_summary(id, summary);
    if (r < 0)
        return; // the row was removed meanwhile
    if (id == pending_choice_) {
        pending_choice_ = 0;
        select_row(r);
    }
    update_buttons();
    emit described(r);
}

int ModelList::reading() const {
    int n = 0;
    for (int r = 0; r < model_->rowCount(); ++r)
        n += model_->row(r).described ? 0 : 1;
    return n;
}

void ModelList::choose(int r) {
    if (r < 0 || r >= model_->rowCount())
        return;
    if (!model_->row(r).described)
        pending_choice_ = model_->row(r).id; // chosen once described, if it can be used
    else
        select_row(r);
}

QString ModelList::chosen_path() const {
    if (chosen_row_ < 0) // the file chosen before cannot be used now: kept while listed
        return model_->row_of_path(initial_) >= 0 ? initial_ : QString();
    const ModelRow& r = model_->row(chosen_row_);
    // The file chosen before, named as it was (the default model by its path, say).
    if (!initial_.isEmpty() && model_->row_of_path(initial_) == chosen_row_)
        return initial_;
    return r.is_default ? QString() : r.path;
}

QStringList ModelList::files() const {
    QStringList out;
    for (int r = 0; r < model_->rowCount(); ++r)
        if (!model_->row(r).is_default && !model_->row(r).installed)
            out << model_->row(r).path;
    return out;
}

int ModelList::add_file(const QString& path) {
    int r = model_->row_of_path(path);
    const bool added = r < 0;
    if (added)
        r = model_->append(new_row(path, false));
    choose(r);
    if (added)
        describe_in_background(model_->row(r));
    // Remove applies to the current row, usable or not; the choice is select_row's.
    view_->selectionModel()->setCurrentIndex(model_->index(r, 0), QItemSelectionModel::NoUpdate);
    view_->scrollTo(model_->index(r, 0));
    return r;
}

void ModelList::remove_current() {
    const int r = view_->currentIndex().row();
    if (r < 0 || model_->row(r).is_default || model_->row(r).installed)
        return;
    const bool was_chosen = r == chosen_row_;
    if (chosen_row_ > r)
        --chosen_row_;
    else if (was_chosen)
        chosen_row_ = -1;
    if (model_->row(r).id == pending_choice_)
        pending_choice_ = 0;
    model_->remove(r); // a description on its way for it finds no row and is dropped
    if (was_chosen)
        choose(0);
    if (chosen_row_ >= 0)
        view_->selectionModel()->setCurrentIndex(model_->index(chosen_row_, 0),
                                                 QItemSelectionModel::NoUpdate);
    update_buttons();
}

void ModelList::select_row(int r) {
    if (r < 0 || r >= model_->rowCount() || !model_->row(r).usable())
        return;
    chosen_row_ = r;
    view_->selectionModel()->select(model_->index(r, 0), QItemSelectionModel::ClearAndSelect |
                                                             QItemSelectionModel::Rows);
}

void ModelList::on_selection_changed() {
    const QModelIndexList sel = view_->selectionModel()->selectedRows();
    if (!sel.isEmpty() && model_->row(sel.front().row()).usable()) {
        chosen_row_ = sel.front().row();
        pending_choice_ = 0;     // the user's choice wins over a row still being read
    } else if (chosen_row_ >= 0) // a click on a row that cannot be chosen: the choice stays
        select_row(chosen_row_);
}

void ModelList::update_buttons() {
    const int r = view_->currentIndex().row();
    remove_->setEnabled(r >= 0 && !model_->row(r).is_default && !model_->row(r).installed);
}

} // namespace spanscope::gui
