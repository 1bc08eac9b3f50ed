// Paints a chat message: who wrote it, the text wrapped to the view's width, and (answers) a
// line of statistics in a smaller, muted font; questions and answers on different tints. An
// answer whose zoom trace is loaded has clickable tokens: token_at() finds the one under a
// point, and the selected one is drawn highlighted.
#pragma once

#include <QStyledItemDelegate>

class QAbstractItemView;

namespace spanscope::gui {

class ChatDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option,
               const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;

    /// The option a view paints `index` with (its rect, font and palette).
    static QStyleOptionViewItem option_for(const QAbstractItemView* view, const QModelIndex& index);
    /// The answer token under `pos` (view coordinates), -1 where there is none.
    int token_at(const QStyleOptionViewItem& option, const QModelIndex& index, QPoint pos) const;
    /// Where a token (its part on its first line) is drawn (view coordinates; empty when it is
    /// not shown).
    QRect token_rect(const QStyleOptionViewItem& option, const QModelIndex& index, int token) const;
};

} // namespace spanscope::gui
