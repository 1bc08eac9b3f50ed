#include "ui/document_view.h"

#include <QHelpEvent>
#include <QLocale>
#include <QTextBlock>
#include <QToolTip>

#include <algorithm>

namespace spanscope::gui {

namespace {
// Alternating span tints, the anchors' mark, the heat's two ends.
const QColor kSpanTint[2] = {QColor(221, 234, 252), QColor(226, 243, 222)};
const QColor kAnchorTint(255, 236, 204);
const QColor kAnchorLine(194, 65, 12);
const QColor kHeatLow(255, 232, 214), kHeatHigh(232, 72, 56);
// A live zoom: the spans that carried the token's attention mass, and the others expanded.
const QColor kLiveCarried(176, 112, 245), kLiveExpanded(216, 192, 250);
// A citation's passage: a saturated yellow, the chat's selected token's, with an underline,
// unlike the light tints of the spans and the reds and violets of the zoom.
const QColor kCitation(252, 211, 77), kCitationLine(146, 64, 14);

template <typename T> int find_at(const QList<T>& marks, int position) {
    // The last mark starting at or before the position, if it holds it.
    auto it = std::upper_bound(marks.begin(), marks.end(), position,
                               [](int p, const T& m) { return p < m.range.begin; });
    if (it == marks.begin())
        return -1;
    --it;
    return position < it->range.end ? static_cast<int>(it - marks.begin()) : -1;
}
} // namespace

DocumentView::DocumentView(QWidget* parent) : QPlainTextEdit(parent) {
    setReadOnly(true);
    setMouseTracking(true);
}

void DocumentView::show_document(qint64 id, const QString& text, TextPositionsPtr positions) {
    const bool had_zoom = !zoom_.isEmpty() || live_token_ >= 0;
    spans_.clear();
    anchors_.clear();
    zoom_.clear();
    base_.clear();
    zoom_counts_.clear();
    live_.clear();
    live_token_ = -1;
    citation_ = {};
    document_id_ = id;
    positions_ = std::move(positions);
    setExtraSelections({});
    setPlainText(text);
    if (had_zoom)
        emit zoom_changed();
}

void DocumentView::clear_document() {
    show_document(0, QString(), nullptr);
}

DocumentView::Range DocumentView::range_of(int64_t begin, int64_t end) const {
    if (!positions_ || begin < 0 || end <= begin)
        return {};
    const int b = positions_->at(begin), e = positions_->at(end);
    if (b < 0 || e <= b)
        return {};
    return {b, e};
}

void DocumentView::set_spans(const DocumentSpansPtr& spans) {
    spans_.clear();
    anchors_.clear();
    if (spans && spans->document_id == document_id_) {
        for (const auto& u : spans->units) {
            for (size_t i = 0; i < u.spans.size(); ++i) {
                const auto& s = u.spans[i];
                const Range r = range_of(s.char_begin, s.char_end);
                if (r.end > r.begin)
                    spans_ << SpanMark{r, u.unit, static_cast<int>(i), s};
            }
            for (const auto& [b, e] : u.anchors) {
                const Range r = range_of(b, e);
                if (r.end > r.begin)
                    anchors_ << r;
            }
        }
        const auto by_begin = [](const auto& a, const auto& b) {
            return a.range.begin < b.range.begin;
        };
        std::stable_sort(spans_.begin(), spans_.end(), by_begin);
        std::stable_sort(anchors_.begin(), anchors_.end(),
                         [](const Range& a, const Range& b) { return a.begin < b.begin; });
    }
    rebuild_base_selections();
    // The zoom is drawn over the spans: the same counts, on the new ranges.
    if (live_token_ >= 0)
        set_live_zoom(std::map(live_), live_token_, live_measured_, QString(zoom_what_));
    else if (!zoom_counts_.empty())
        set_zoom(std::map(zoom_counts_), zoom_of_, QString(zoom_what_));
    else
        update_selections();
}

void DocumentView::clear_spans() {
    const bool had_marks = !zoom_.isEmpty();
    spans_.clear();
    anchors_.clear();
    zoom_.clear();
    rebuild_base_selections();
    update_selections();
    if (had_marks)
        emit zoom_changed();
}

void DocumentView::set_zoom(const std::map<std::pair<int, int>, int>& counts, int of,
                            const QString& what) {
    live_.clear();
    live_token_ = -1;
    zoom_counts_ = counts;
    zoom_of_ = std::max(1, of);
    zoom_what_ = what;
    zoom_.clear();
    for (int i = 0; i < spans_.size(); ++i) {
        const auto it = counts.find({spans_[i].unit, spans_[i].index});
        if (it != counts.end() && it->second > 0)
            zoom_ << ZoomMark{spans_[i].range, it->second, false, i};
    }
    update_selections();
    emit zoom_changed();
}

void DocumentView::set_live_zoom(const std::map<std::pair<int, int>, LiveSpan>& spans, int token,
                                 bool measured, const QString& what) {
    zoom_counts_.clear();
    live_ = spans;
    live_token_ = std::max(0, token);
    live_measured_ = measured;
    zoom_what_ = what;
    zoom_.clear();
    for (int i = 0; i < spans_.size(); ++i) {
        const auto it = spans.find({spans_[i].unit, spans_[i].index});
        if (it != spans.end() && it->second.count > 0)
            zoom_ << ZoomMark{spans_[i].range, it->second.count, it->second.carried, i};
    }
    update_selections();
    emit zoom_changed();
}

void DocumentView::clear_zoom() {
    const bool had_zoom = !zoom_counts_.empty() || live_token_ >= 0 || !zoom_.isEmpty();
    zoom_counts_.clear();
    live_.clear();
    live_token_ = -1;
    zoom_.clear();
    zoom_what_.clear();
    update_selections();
    if (had_zoom)
        emit zoom_changed();
}

bool DocumentView::scroll_to_zoom() {
    if (zoom_.isEmpty())
        return false;
    QTextCursor c(document());
    c.setPosition(zoom_.front().range.begin);
    setTextCursor(c);
    centerCursor();
    return true;
}

bool DocumentView::show_citation(int64_t begin, int64_t end) {
    citation_ = range_of(begin, end);
    update_selections();
    if (citation_.end <= citation_.begin)
        return false;
    QTextCursor c(document());
    c.setPosition(citation_.begin);
    setTextCursor(c);
    centerCursor();
    return true;
}

void DocumentView::clear_citation() {
    if (citation_ == Range{})
        return;
    citation_ = {};
    update_selections();
}

QColor DocumentView::citation_colour() {
    return kCitation;
}

QColor DocumentView::heat_colour(int count, int of) {
    const double t =
        0.15 + 0.85 * std::clamp(static_cast<double>(count) / std::max(1, of), 0.0, 1.0);
    const auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
    return QColor(mix(kHeatLow.red(), kHeatHigh.red()), mix(kHeatLow.green(), kHeatHigh.green()),
                  mix(kHeatLow.blue(), kHeatHigh.blue()));
}

QColor DocumentView::live_colour(bool carried) {
    return carried ? kLiveCarried : kLiveExpanded;
}

namespace {
QTextEdit::ExtraSelection selection(QTextDocument* document, const DocumentView::Range& r,
                                    const QTextCharFormat& f) {
    QTextEdit::ExtraSelection s;
    s.cursor = QTextCursor(document);
    s.cursor.setPosition(r.begin);
    s.cursor.setPosition(r.end, QTextCursor::KeepAnchor);
    s.format = f;
    return s;
}
} // namespace

void DocumentView::rebuild_base_selections() {
    base_.clear();
    base_.reserve(spans_.size() + anchors_.size());
    for (int i = 0; i < spans_.size(); ++i) {
        QTextCharFormat f;
        f.setBackground(kSpanTint[i % 2]);
        base_ << selection(document(), spans_[i].range, f);
    }
    QTextCharFormat anchor;
    anchor.setBackground(kAnchorTint);
    anchor.setUnderlineStyle(QTextCharFormat::SingleUnderline);
    anchor.setUnderlineColor(kAnchorLine);
    for (const auto& r : anchors_)
        base_ << selection(document(), r, anchor);
}

void DocumentView::update_selections() {
    QList<QTextEdit::ExtraSelection> all = base_;
    for (const auto& z : zoom_)
        all[z.span].format.setBackground(live_token_ >= 0 ? live_colour(z.carried)
                                                          : heat_colour(z.count, zoom_of_));
    if (citation_.end > citation_.begin) { // last: drawn over the spans and the zoom
        QTextCharFormat f;
        f.setBackground(kCitation);
        f.setUnderlineStyle(QTextCharFormat::SingleUnderline);
        f.setUnderlineColor(kCitationLine);
        all << selection(document(), citation_, f);
    }
    setExtraSelections(all);
}

QString DocumentView::tooltip_at(int position) const {
    QString text = marks_tooltip_at(position);
    if (position >= citation_.begin && position < citation_.end)
        text.prepend(tr("The passage the answer cites") + (text.isEmpty() ? "" : "\n"));
    return text;
}

QString DocumentView::marks_tooltip_at(int position) const {
    const QLocale l;
    const int s = find_at(spans_, position);
    if (s >= 0) {
        const auto& m = spans_[s];
        QString text =
            tr("Span %1 of section %2 · %3 · rank %4 · summary norm %5")
                .arg(QString::number(m.index), QString::number(m.unit + 1),
                     count_text(m.span.tokens, tr("token"), tr("tokens")),
                     QString::number(m.span.rank), l.toString(m.span.summary_norm, 'f', 2));
        const auto it = zoom_counts_.find({m.unit, m.index});
        if (it != zoom_counts_.end() && it->second > 0)
            text +=
                tr("\nZoom: expanded %1 times (%2)").arg(QString::number(it->second), zoom_what_);
        const auto live = live_.find({m.unit, m.index});
        if (live_token_ >= 0 && live != live_.end() && live->second.count > 0) {
            const QString how = !live_measured_ ? tr("its attention mass was not measured")
                                : live->second.carried
                                    ? tr("one of the spans that carried most of its attention")
                                    : tr("it carried little of the token's attention");
            text += tr("\nZoom: expanded %1 times (%2); %3")
                        .arg(QString::number(live->second.count), zoom_what_, how);
        }
        return text;
    }
    const auto a = std::upper_bound(anchors_.begin(), anchors_.end(), position,
                                    [](int p, const Range& r) { return p < r.begin; });
    if (a != anchors_.begin() && position < std::prev(a)->end)
        return tr("Anchor: a surprising token, always kept at full resolution");
    return {};
}

bool DocumentView::viewportEvent(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        auto* help = static_cast<QHelpEvent*>(event);
        const QString text = tooltip_at(cursorForPosition(help->pos()).position());
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(help->globalPos(), text, viewport());
        return true;
    }
    return QPlainTextEdit::viewportEvent(event);
}

} // namespace spanscope::gui
