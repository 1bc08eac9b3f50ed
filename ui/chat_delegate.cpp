#include "ui/chat_delegate.h"

#include "ui/chat_model.h"

#include <QAbstractItemView>
#include <QHelpEvent>
#include <QPainter>
#include <QTextLayout>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <memory>

namespace spanscope::gui {

namespace {
constexpr int kPad = 8;
const QColor kSelectedToken(252, 211, 77);

struct Layout {
    QRect who, text, details;
    QRect sources; ///< the "Sources" title (null: no sources)
    /// Each citation's line: its rect (as wide as its text) and the text drawn, cut to fit.
    QList<QRect> citations;
    QStringList citation_lines;
    QList<int> place_ends; ///< where the place ends in each line drawn (after "[n] PLACE")
    int height = 0;
    std::unique_ptr<QTextLayout> lines; ///< the message's text, laid out at `text`'s origin
};

QFont small_font(const QFont& f) {
    QFont s = f;
    s.setPointSizeF(f.pointSizeF() > 0 ? f.pointSizeF() * 0.85 : 8);
    return s;
}

// A note line's font: small and italic.
QFont note_font(const QFont& f) {
    QFont n = small_font(f);
    n.setItalic(true);
    return n;
}

QFont title_font(const QFont& f) {
    QFont t = small_font(f);
    t.setBold(true);
    return t;
}

// "[1] " before a citation.
QString citation_number(int i) {
    return QStringLiteral("[%1] ").arg(i + 1);
}

Layout layout(const QStyleOptionViewItem& option, const QModelIndex& index) {
    const int width = qMax(120, option.rect.width() > 0 ? option.rect.width() : 400);
    const QFontMetrics sm(small_font(option.font));
    const int inner = width - 2 * kPad;
    const bool note = index.data(ChatModel::NoteRole).toBool();
    Layout l;
    int y = option.rect.top() + kPad;
    if (!note) { // a note has no "You" / "Spanscope" line
        l.who = QRect(option.rect.left() + kPad, y, inner, sm.height());
        y += sm.height() + 2;
    }
    QString text = index.data(Qt::DisplayRole).toString();
    if (text.isEmpty())
        text = QStringLiteral(" ");
    // QTextLayout breaks lines only at U+2028: a '\n' would join the words around it. One
    // character for one, so the token offsets into the text stay valid.
    text.replace(QLatin1Char('\n'), QChar::LineSeparator);
    // One layout for painting, sizing and finding tokens, so that they agree.
    l.lines = std::make_unique<QTextLayout>(text, note ? note_font(option.font) : option.font);
    QTextOption wrap;
    wrap.setWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    if (note)
        wrap.setAlignment(Qt::AlignHCenter);
    l.lines->setTextOption(wrap);
    l.lines->beginLayout();
    qreal h = 0;
    for (QTextLine line = l.lines->createLine(); line.isValid(); line = l.lines->createLine()) {
        line.setLineWidth(inner);
        line.setPosition(QPointF(0, h));
        h += line.height();
    }
    l.lines->endLayout();
    l.text = QRect(option.rect.left() + kPad, y, inner, static_cast<int>(std::ceil(h)));
    y += l.text.height();
    const auto citations = index.data(ChatModel::CitationsRole).value<QList<Citation>>();
    if (!citations.isEmpty()) {
        const QFontMetrics tm(title_font(option.font));
        y += 4;
        l.sources = QRect(option.rect.left() + kPad, y, inner, tm.height());
        y += tm.height() + 1;
        for (int i = 0; i < citations.size(); ++i) {
            const QString head = citation_number(i) + citations[i].place;
            const QString line =
                sm.elidedText(head + citation_text(citations[i]).mid(citations[i].place.size()),
                              Qt::ElideRight, inner);
            l.citation_lines << line;
            l.place_ends << static_cast<int>(std::min(head.size(), line.size()));
            l.citations << QRect(option.rect.left() + kPad, y,
                                 std::min(inner, sm.horizontalAdvance(line) + 1), sm.height());
            y += sm.height() + 1;
        }
    }
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

// [begin, end) of a token in the shown text; begin == end when it is not shown.
std::pair<int, int> token_range(const QModelIndex& index, int token) {
    const auto starts = index.data(ChatModel::TokenStartsRole).value<QList<int>>();
    if (token < 0 || token + 1 >= starts.size())
        return {0, 0};
    return {starts[token], starts[token + 1]};
}
} // namespace

void ChatDelegate::paint(QPainter* painter, const QStyleOptionViewItem& option,
                         const QModelIndex& index) const {
    const bool user = index.data(ChatModel::FromUserRole).toBool();
    const Layout l = layout(option, index);
    painter->save();
    const QPalette& pal = option.palette;
    if (index.data(ChatModel::NoteRole).toBool()) {
        // A note between exchanges: grey italic text, centred, on the view's background.
        painter->setPen(pal.color(QPalette::PlaceholderText));
        l.lines->draw(painter, l.text.topLeft());
        painter->restore();
        return;
    }
    QColor bg = user ? pal.color(QPalette::AlternateBase) : pal.color(QPalette::Base);
    if (option.state & QStyle::State_Selected)
        bg = pal.color(QPalette::Highlight).lighter(170);
    painter->fillRect(option.rect.adjusted(2, 2, -2, -2), bg);
    painter->setFont(small_font(option.font));
    painter->setPen(pal.color(QPalette::PlaceholderText));
    painter->drawText(l.who, Qt::AlignLeft, user ? tr("You") : tr("Spanscope"));
    painter->setPen(pal.color(QPalette::Text));
    QList<QTextLayout::FormatRange> marks;
    const auto [b, e] = token_range(index, index.data(ChatModel::SelectedTokenRole).toInt());
    if (e > b) {
        QTextLayout::FormatRange r;
        r.start = b;
        r.length = e - b;
        r.format.setBackground(kSelectedToken);
        marks << r;
    }
    l.lines->draw(painter, l.text.topLeft(), marks);
    if (!l.sources.isNull()) {
        painter->setFont(title_font(option.font));
        painter->setPen(pal.color(QPalette::PlaceholderText));
        painter->drawText(l.sources, Qt::AlignLeft,
                          index.data(ChatModel::TokenCitationsRole).toBool()
                              ? tr("Sources of the selected word")
                              : tr("Sources"));
        const QFont small = small_font(option.font);
        QFont place = small;
        place.setUnderline(true);
        const int selected = index.data(ChatModel::SelectedCitationRole).toInt();
        for (int i = 0; i < l.citations.size(); ++i) {
            // "[1] " muted, the place as a link, then the share and the excerpt.
            const QRect& r = l.citations[i];
            if (i == selected)
                painter->fillRect(r, kSelectedToken);
            const QString& line = l.citation_lines[i];
            const int number = static_cast<int>(std::min(citation_number(i).size(), line.size()));
            const QString parts[3] = {line.left(number), line.mid(number, l.place_ends[i] - number),
                                      line.mid(l.place_ends[i])};
            const QFont* fonts[3] = {&small, &place, &small};
            const QColor colours[3] = {pal.color(QPalette::PlaceholderText),
                                       pal.color(QPalette::Link), pal.color(QPalette::Text)};
            int x = r.left();
            for (int k = 0; k < 3; ++k) {
                painter->setFont(*fonts[k]);
                painter->setPen(colours[k]);
                painter->drawText(QRect(x, r.top(), r.right() - x + 1, r.height()),
                                  Qt::AlignLeft | Qt::TextSingleLine, parts[k]);
                x += QFontMetrics(*fonts[k]).horizontalAdvance(parts[k]);
            }
        }
    }
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

QStyleOptionViewItem ChatDelegate::option_for(const QAbstractItemView* view,
                                              const QModelIndex& index) {
    QStyleOptionViewItem o;
    o.initFrom(view->viewport());
    o.font = view->font();
    o.rect = view->visualRect(index);
    o.widget = view;
    return o;
}

int ChatDelegate::token_at(const QStyleOptionViewItem& option, const QModelIndex& index,
                           QPoint pos) const {
    const auto starts = index.data(ChatModel::TokenStartsRole).value<QList<int>>();
    if (starts.size() < 2)
        return -1;
    const Layout l = layout(option, index);
    const QPointF at = pos - l.text.topLeft();
    for (int i = 0; i < l.lines->lineCount(); ++i) {
        const QTextLine line = l.lines->lineAt(i);
        if (at.y() < line.y() || at.y() >= line.y() + line.height())
            continue;
        if (at.x() < 0 || at.x() > line.naturalTextWidth())
            return -1;
        const int c = line.xToCursor(at.x(), QTextLine::CursorOnCharacter);
        // The token holding character c: the last that starts at or before it and is not empty.
        for (int t = static_cast<int>(starts.size()) - 2; t >= 0; --t)
            if (starts[t] <= c && c < starts[t + 1])
                return t;
        return -1;
    }
    return -1;
}

int ChatDelegate::citation_at(const QStyleOptionViewItem& option, const QModelIndex& index,
                              QPoint pos) const {
    const Layout l = layout(option, index);
    for (int i = 0; i < l.citations.size(); ++i)
        if (l.citations[i].contains(pos))
            return i;
    return -1;
}

QRect ChatDelegate::citation_rect(const QStyleOptionViewItem& option, const QModelIndex& index,
                                  int citation) const {
    const Layout l = layout(option, index);
    return citation >= 0 && citation < l.citations.size() ? l.citations[citation] : QRect();
}

QString ChatDelegate::citation_line(const QStyleOptionViewItem& option, const QModelIndex& index,
                                    int citation) const {
    const Layout l = layout(option, index);
    return citation >= 0 && citation < l.citation_lines.size() ? l.citation_lines[citation]
                                                               : QString();
}

bool ChatDelegate::helpEvent(QHelpEvent* event, QAbstractItemView* view,
                             const QStyleOptionViewItem& option, const QModelIndex& index) {
    if (event && view && index.isValid() && event->type() == QEvent::ToolTip) {
        const int c = citation_at(option, index, event->pos());
        if (c >= 0) {
            const auto citations = index.data(ChatModel::CitationsRole).value<QList<Citation>>();
            QToolTip::showText(event->globalPos(),
                               citation_number(c) + citation_text(citations[c]) + "\n" +
                                   tr("Click to show this passage in the document."),
                               view->viewport());
            return true;
        }
    }
    return QStyledItemDelegate::helpEvent(event, view, option, index);
}

QRect ChatDelegate::token_rect(const QStyleOptionViewItem& option, const QModelIndex& index,
                               int token) const {
    const auto [b, e] = token_range(index, token);
    if (e <= b)
        return {};
    const Layout l = layout(option, index);
    const QTextLine line = l.lines->lineForTextPosition(b);
    if (!line.isValid())
        return {};
    const qreal x0 = line.cursorToX(b);
    const qreal x1 = line.cursorToX(std::min(e, line.textStart() + line.textLength()));
    return QRectF(l.text.left() + x0, l.text.top() + line.y(), std::max<qreal>(1, x1 - x0),
                  line.height())
        .toAlignedRect();
}

} // namespace spanscope::gui
