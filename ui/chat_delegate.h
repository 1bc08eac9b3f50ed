// Paints a chat message: who wrote it, the text wrapped to the view's width, (answers) their
// sources under a "Sources" title, one numbered citation a line, and a line of statistics in a
// smaller, muted font; questions and answers on different tints. An answer whose zoom trace is
// loaded has clickable tokens: token_at() finds the one under a point, and the selected one is
// drawn highlighted; citations are clickable the same way (citation_at), their full text in a
// tooltip.
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
    /// The citation (0-based, top source first) under `pos` (view coordinates), -1 where there
    /// is none.
    int citation_at(const QStyleOptionViewItem& option, const QModelIndex& index, QPoint pos) const;
    /// Where a citation's line is drawn, as wide as its text (view coordinates; empty when the
    /// answer has no such citation).
    QRect citation_rect(const QStyleOptionViewItem& option, const QModelIndex& index,
                        int citation) const;
    /// The line drawn for a citation: "[1] PLACE (42%): EXCERPT", cut with "…" to the width.
    QString citation_line(const QStyleOptionViewItem& option, const QModelIndex& index,
                          int citation) const;
    /// A citation's tooltip: its whole line, and what a click does.
    bool helpEvent(QHelpEvent* event, QAbstractItemView* view, const QStyleOptionViewItem& option,
                   const QModelIndex& index) override;
};

} // namespace spanscope::gui
