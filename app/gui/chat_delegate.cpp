#include "chat_delegate.h"

#include "chat_model.h"

#include <QAbstractItemView>
#include <QPainter>

namespace spanscope::gui {

namespace {
constexpr int kPad = 8;

struct Layout {
    QRect who, text, details;
    int height = 0;
};

QFont small_font(const QFont& f) {
    QFont s = f;
    s.setPointSizeF(f.pointSizeF() > 0 ? f.pointSizeF() * 0.85 : 8);
    return s;
}

Layout layout(const QStyleOptionViewItem& option, const QModelIndex& index) {
    const int width = qMax(120, option.rect.width() > 0 ? option.rect.width() : 400);
    const QFontMetrics fm(option.font);
    const QFontMetrics sm(small_font(option.font));
    const int inner = width - 2 * kPad;
    Layout l;
    int y = option.rect.top() + kPad;
    l.who = QRect(option.rect.left() + kPad, y, inner, sm.height());
    y += sm.height() + 2;
    QString text = index.data(Qt::DisplayRole).toString();
    if (text.isEmpty())
        text = QStringLiteral(" ");
    const QRect tr = fm.boundingRect(QRect(0, 0, inner, 100000), Qt::TextWordWrap, text);
    l.text = QRect(option.rect.left() + kPad, y, inner, tr.height());
    y += tr.height();
    const QString details = index.data(ChatModel::DetailsRole).toString();
    if (!details.isEmpty()) {
        const QRect dr = sm.boundingRect(QRect(0, 0, inner, 100000), Qt::TextWordWrap, details);
        y += 2;
        l.details = QRect(option.rect.left() + kPad, y, inner, dr.height());
        y += dr.height();
    }
    l.height = y + kPad - option.rect.top();
    return l;
}
} // namespace

void ChatDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                         const QModelIndex& index) const {
    const bool user = index.data(ChatModel::FromUserRole).toBool();
    const Layout l = layout(option, index);
    painter->save();
    const QPalette& pal = option.palette;
    QColor bg = user ? pal.color(QPalette::AlternateBase) : pal.color(QPalette::Base);
    if (option.state & QStyle::State_Selected)
        bg = pal.color(QPalette::Highlight).lighter(170);
    painter->fillRect(option.rect.adjusted(2, 2, -2, -2), bg);
    painter->setFont(small_font(option.font));
    painter->setPen(pal.color(QPalette::PlaceholderText));
    painter->drawText(l.who, Qt::AlignLeft, user ? tr("You") : tr("Spanscope"));
    painter->setFont(option.font);
    painter->setPen(pal.color(QPalette::Text));
    painter->drawText(l.text, Qt::TextWordWrap, index.data(Qt::DisplayRole).toString());
    if (!l.details.isNull()) {
        painter->setFont(small_font(option.font));
        painter->setPen(pal.color(QPalette::PlaceholderText));
        painter->drawText(l.details, Qt::TextWordWrap,
                          index.data(ChatModel::DetailsRole).toString());
    }
    painter->restore();
}

QSize ChatDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
    QStyleOptionViewItem o = option;
    if (const auto* view = qobject_cast<const QAbstractItemView*>(option.widget))
        o.rect.setWidth(view->viewport()->width());
    return {o.rect.width(), layout(o, index).height};
}

} // namespace spanscope::gui
