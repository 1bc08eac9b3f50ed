// The main window's documents in context: which are checked, in what order (dragged in the list
// or moved with Alt+Up / Alt+Down), kept in the project so that a reopened project asks about the
// same context (LinearKV puts the documents in context in list order, docs/linearkv.md).
#include "ui/main_window.h"

#include "ui/store_worker.h"

#include <QAction>
#include <QListView>
#include <QMenu>

namespace spanscope::gui {

void MainWindow::setup_document_context(QMenu* file) {
    document_list_->setDragEnabled(true);
    document_list_->setAcceptDrops(true);
    document_list_->setDropIndicatorShown(true);
    document_list_->setDragDropMode(QAbstractItemView::InternalMove);
    document_list_->setDefaultDropAction(Qt::MoveAction);
    document_list_->setToolTip(tr("Checked documents are put in context in this order: drag a "
                                  "document, or press Alt+Up / Alt+Down, to move it"));
    move_up_action_ =
        file->addAction(tr("Move Document &Up"), this, [this] { move_selected_document(-1); });
    move_up_action_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Up));
    move_up_action_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    move_down_action_ =
        file->addAction(tr("Move Document &Down"), this, [this] { move_selected_document(1); });
    move_down_action_->setShortcut(QKeySequence(Qt::ALT | Qt::Key_Down));
    move_down_action_->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    document_list_->addActions({move_up_action_, move_down_action_});
    connect(&documents_, &DocumentListModel::context_changed, this,
            &MainWindow::save_document_list);
}

void MainWindow::move_selected_document(int delta) {
    const QModelIndex current = document_list_->currentIndex();
    if (!current.isValid())
        return;
    const int from = current.row();
    const int to = from + delta;
    if (to < 0 || to >= documents_.rowCount())
        return;
    // moveRow's destination is the row the moved one goes before.
    if (documents_.moveRow({}, from, {}, delta > 0 ? to + 1 : to))
        document_list_->setCurrentIndex(documents_.index(to));
}

void MainWindow::save_document_list() {
    if (project_path_.isEmpty())
        return;
    QMetaObject::invokeMethod(store_, [s = store_, order = documents_.ordered_ids(),
                                       excluded = documents_.unchecked_ids()] {
        s->save_document_list(order, excluded);
    });
}

QList<DocumentRow> MainWindow::in_list_order(const QList<DocumentRow>& rows) const {
    const QList<qint64> order = documents_.ordered_ids();
    const QList<qint64> unchecked = documents_.unchecked_ids();
    QList<DocumentRow> sorted;
    for (const qint64 id : order)
        for (const auto& r : rows)
            if (r.id == id) {
                sorted << r;
                sorted.back().in_context = !unchecked.contains(id);
            }
    for (const auto& r : rows)
        if (!order.contains(r.id))
            sorted << r;
    return sorted;
}

QString MainWindow::sections_text(const AnswerStats& s) const {
    if (s.sections_left_out == 0)
        return {};
    QString text = tr("The documents exceed the context: %1 of %2 sections used, ranked by %3")
                       .arg(s.sections_used.size())
                       .arg(s.sections_used.size() + s.sections_left_out)
                       .arg(s.ranking.isEmpty() ? tr("their order") : s.ranking);
    for (const auto& sec : s.sections_used) {
        const int row = documents_.row_of_id(sec.document_id);
        const QString name =
            row >= 0 ? documents_.row(row).name : tr("document %1").arg(sec.document_id);
        text += QStringLiteral("\n") + tr("%1, section %2 (%3)")
                                           .arg(name)
                                           .arg(sec.unit + 1)
                                           .arg(count_text(sec.tokens, tr("token"), tr("tokens")));
    }
    return text;
}

} // namespace spanscope::gui
