// Paints a chat message: who wrote it, the text wrapped to the view's width, and (answers) a
// line of statistics in a smaller, muted font; questions and answers on different tints.
#pragma once

#include <QStyledItemDelegate>

namespace spanscope::gui {

class ChatDelegate : public QStyledItemDelegate {
    Q_OBJECT
public:
    using QStyledItemDelegate::QStyledItemDelegate;
    void paint(QPainter* painter, const QStyleOptionViewItem& option,
               const QModelIndex& index) const override;
    QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
};

} // namespace spanscope::gui
