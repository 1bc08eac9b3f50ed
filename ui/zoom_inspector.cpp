#include "ui/zoom_inspector.h"

#include <QHelpEvent>
#include <QLabel>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollArea>
#include <QScrollBar>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace spanscope::gui {

namespace {
constexpr int kLeft = 78, kTop = 18, kCellW = 12, kCellH = 14, kMaxCellW = 48;
const QColor kEmpty(243, 244, 246), kLow(219, 234, 254), kHigh(30, 64, 175);
const QColor kFast(37, 99, 235), kHost(234, 88, 12);

QColor cell_colour(int v, int max) {
    if (v <= 0)
        return kEmpty;
    const double t = std::clamp(static_cast<double>(v) / std::max(1, max), 0.0, 1.0);
    const auto mix = [t](int a, int b) { return static_cast<int>(std::lround(a + (b - a) * t)); };
    return QColor(mix(kLow.red(), kHigh.red()), mix(kLow.green(), kHigh.green()),
                  mix(kLow.blue(), kHigh.blue()));
}

// A token for a label: its number, then its text quoted without its blanks around (unless it
// is blank, then shown escaped), at most 24 characters; the number alone when the token has no
// text (an answer still being written, or a character's later bytes).
QString token_label(const AnswerZoom& z, int step) {
    QString t = z.token_texts().value(step);
    if (t.isEmpty())
        return QString::number(step);
    if (!t.trimmed().isEmpty())
        t = t.trimmed();
    t.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
    if (t.size() > 24)
        t = t.left(23) + QChar(0x2026);
    return QString::number(step) + QStringLiteral(" “") + t + QStringLiteral("”");
}
} // namespace

ZoomGrid::ZoomGrid(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setObjectName(QStringLiteral("zoomGrid"));
}

void ZoomGrid::set_zoom(AnswerZoomPtr zoom) {
    zoom_ = std::move(zoom);
    selected_ = -1;
    max_ = 1;
    for (int r = 0; r < rows(); ++r)
        for (int c = 0; c < columns(); ++c)
            max_ = std::max(max_, value(r, c));
    updateGeometry();
    update();
}

void ZoomGrid::set_selected_step(int step) {
    selected_ = step >= 0 && step < columns() ? step : -1;
    update();
}

int ZoomGrid::cell_width() const {
    if (columns() <= 0)
        return kCellW;
    return std::clamp((width() - kLeft - 4) / columns(), kCellW, kMaxCellW);
}

QRect ZoomGrid::cell_rect(int row, int column) const {
    const int w = cell_width();
    return {kLeft + column * w, kTop + row * kCellH, w - 1, kCellH - 1};
}

QString ZoomGrid::row_label(int row) const {
    if (!zoom_ || zoom_->heads() <= 0 || row < 0 || row >= rows())
        return {};
    return tr("layer %1 · head %2")
        .arg(zoom_->layers()[static_cast<size_t>(row / zoom_->heads())])
        .arg(row % zoom_->heads());
}

QSize ZoomGrid::sizeHint() const {
    return {kLeft + std::max(1, columns()) * kMaxCellW + 4,
            kTop + std::max(1, rows()) * kCellH + 4};
}

QSize ZoomGrid::minimumSizeHint() const {
    return {kLeft + std::max(1, columns()) * kCellW + 4, kTop + std::max(1, rows()) * kCellH + 4};
}

std::pair<int, int> ZoomGrid::cell_at(QPoint p) const {
    if (p.x() < kLeft || p.y() < kTop)
        return {-1, -1};
    const int c = (p.x() - kLeft) / cell_width(), r = (p.y() - kTop) / kCellH;
    if (c >= columns() || r >= rows())
        return {-1, -1};
    return {r, c};
}

void ZoomGrid::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), palette().color(QPalette::Base));
    if (!zoom_)
        return;
    QFont small = font();
    small.setPointSizeF(std::max(6.0, font().pointSizeF() * 0.8));
    p.setFont(small);
    p.setPen(palette().color(QPalette::Text));
    for (int r = 0; r < rows(); ++r)
        p.drawText(QRect(2, kTop + r * kCellH - 2, kLeft - 6, kCellH + 4),
                   Qt::AlignRight | Qt::AlignVCenter,
                   QStringLiteral("L%1 h%2")
                       .arg(zoom_->layers()[static_cast<size_t>(r / zoom_->heads())])
                       .arg(r % zoom_->heads()));
    const int w = cell_width();
    // Step numbers; with the token's text where the cells are wide enough.
    const int every = w >= 24 ? 1 : w >= 16 ? 5 : 10;
    const QFontMetrics fm(small);
    for (int c = 0; c < columns(); c += every) {
        QString label = QString::number(c);
        if (w >= 36) {
            QString t = zoom_->token_texts().value(c).trimmed();
            t.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
            label = fm.elidedText(label + QLatin1Char(' ') + t, Qt::ElideRight, w - 2);
        }
        p.drawText(QRect(kLeft + c * w, 0, every > 1 ? 4 * kCellW : w, kTop - 2),
                   Qt::AlignLeft | Qt::AlignBottom, label);
    }
    for (int r = 0; r < rows(); ++r)
        for (int c = 0; c < columns(); ++c)
            p.fillRect(cell_rect(r, c), cell_colour(value(r, c), max_));
    if (selected_ >= 0) {
        p.setPen(QPen(palette().color(QPalette::Text), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRect(kLeft + selected_ * w - 1, kTop - 1, w + 1, rows() * kCellH + 1));
    }
}

void ZoomGrid::mousePressEvent(QMouseEvent* event) {
    const auto [r, c] = cell_at(event->position().toPoint());
    if (c >= 0 && event->button() == Qt::LeftButton) {
        set_selected_step(c);
        emit step_selected(c);
    }
}

bool ZoomGrid::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip && zoom_) {
        auto* help = static_cast<QHelpEvent*>(event);
        const auto [r, c] = cell_at(help->pos());
        if (r < 0) {
            QToolTip::hideText();
        } else {
            QToolTip::showText(help->globalPos(),
                               tr("Token %1 · %2: %3 expanded")
                                   .arg(token_label(*zoom_, c), row_label(r),
                                        count_text(value(r, c), tr("span"), tr("spans"))),
                               this);
        }
        return true;
    }
    return QWidget::event(event);
}

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("memoryChart"));
}

void MemoryChart::set_zoom(AnswerZoomPtr zoom, qint64 full_kv_bytes) {
    zoom_ = std::move(zoom);
    full_ = full_kv_bytes;
    selected_ = -1;
    update();
}

void MemoryChart::set_selected_step(int step) {
    selected_ = step;
    update();
}

void MemoryChart::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    p.fillRect(rect(), palette().color(QPalette::Base));
    if (!zoom_ || zoom_->steps() == 0)
        return;
    const auto& steps = zoom_->stored().trace.steps;
    int64_t top = std::max<int64_t>(1, full_);
    for (const auto& s : steps)
        top = std::max({top, s.fast_tier_bytes, s.host_tier_bytes});
    top = static_cast<int64_t>(static_cast<double>(top) * 1.1);
    const QLocale l;
    QFont small = font();
    small.setPointSizeF(std::max(6.0, font().pointSizeF() * 0.8));
    p.setFont(small);
    const QFontMetrics fm(small);
    const int left = fm.horizontalAdvance(l.formattedDataSize(top)) + 10;
    const QRect plot(left, 8, std::max(10, width() - left - 10),
                     std::max(10, height() - 8 - fm.height() - 8));
    const QColor text = palette().color(QPalette::Text);
    p.setPen(QColor(209, 213, 219));
    for (int i = 0; i <= 4; ++i) {
        const int y = plot.bottom() - plot.height() * i / 4;
        p.drawLine(plot.left(), y, plot.right(), y);
    }
    p.setPen(text);
    for (int i = 0; i <= 4; i += 2) {
        const int y = plot.bottom() - plot.height() * i / 4;
        p.drawText(QRect(0, y - fm.height() / 2, left - 6, fm.height()), Qt::AlignRight,
                   l.formattedDataSize(top * i / 4));
    }
    const int n = static_cast<int>(steps.size());
    const auto x_of = [&](int i) {
        return n <= 1 ? plot.center().x() : plot.left() + plot.width() * i / (n - 1);
    };
    const auto y_of = [&](int64_t v) {
        return plot.bottom() - static_cast<double>(plot.height()) * static_cast<double>(v) /
                                   static_cast<double>(top);
    };
    p.drawText(QRect(plot.left(), plot.bottom() + 4, plot.width(), fm.height()), Qt::AlignLeft,
               tr("token 0"));
    p.drawText(QRect(plot.left(), plot.bottom() + 4, plot.width(), fm.height()), Qt::AlignRight,
               tr("token %1").arg(n - 1));
    if (selected_ >= 0 && selected_ < n) {
        p.setPen(QPen(text, 1, Qt::DashLine));
        p.drawLine(x_of(selected_), plot.top(), x_of(selected_), plot.bottom());
    }
    const auto line = [&](const QColor& c, auto value) {
        QPainterPath path;
        for (int i = 0; i < n; ++i) {
            const QPointF pt(x_of(i), y_of(value(steps[static_cast<size_t>(i)])));
            if (i == 0)
                path.moveTo(pt);
            else
                path.lineTo(pt);
        }
        p.setPen(QPen(c, 2));
        p.setBrush(Qt::NoBrush);
        p.drawPath(path);
        if (n == 1)
            p.drawEllipse(path.currentPosition(), 3, 3);
    };
    if (full_ > 0) { // what full would hold (after the answer)
        p.setPen(QPen(palette().color(QPalette::PlaceholderText), 1, Qt::DashLine));
        p.drawLine(QPointF(plot.left(), y_of(full_)), QPointF(plot.right(), y_of(full_)));
    }
    line(kFast, [](const ZoomStep& s) { return s.fast_tier_bytes; });
    line(kHost, [](const ZoomStep& s) { return s.host_tier_bytes; });
    // Legend, with the values at the selected step (or the last).
    const auto& at =
        steps[static_cast<size_t>(selected_ >= 0 && selected_ < n ? selected_ : n - 1)];
    const QString fast = tr("fast tier %1").arg(l.formattedDataSize(at.fast_tier_bytes));
    const QString host = tr("host tier %1").arg(l.formattedDataSize(at.host_tier_bytes));
    std::vector<std::pair<QString, QColor>> legend{{fast, kFast}, {host, kHost}};
    if (full_ > 0)
        legend.emplace_back(tr("full would hold %1 (dashed)").arg(l.formattedDataSize(full_)),
                            palette().color(QPalette::PlaceholderText));
    int x = plot.left() + 8;
    const int y = plot.bottom() - 6 - fm.height();
    for (const auto& [label, colour] : legend) {
        const QRect box(x - 4, y - 2, 16 + fm.horizontalAdvance(label) + 8, fm.height() + 4);
        p.fillRect(box, palette().color(QPalette::Base));
        p.fillRect(QRect(x, y + fm.height() / 2 - 2, 12, 4), colour);
        p.setPen(text);
        p.drawText(QPoint(x + 16, y + fm.ascent()), label);
        x += box.width() + 8;
    }
}

ZoomInspector::ZoomInspector(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("zoomInspector"));
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(6, 6, 6, 6);
    message_ = new QLabel(tr("Ask with the sekv memory policy (Settings), then select an answer: "
                             "its zoom decisions are shown here."));
    message_->setObjectName(QStringLiteral("inspectorMessage"));
    message_->setWordWrap(true);
    outer->addWidget(message_);
    body_ = new QWidget;
    auto* l = new QVBoxLayout(body_);
    l->setContentsMargins(0, 0, 0, 0);
    summary_ = new QLabel;
    summary_->setObjectName(QStringLiteral("inspectorSummary"));
    summary_->setWordWrap(true);
    l->addWidget(summary_);
    rate_ = new QLabel;
    rate_->setObjectName(QStringLiteral("inspectorRate"));
    l->addWidget(rate_);
    auto* grid_title = new QLabel(tr("<b>Zoom decisions</b> — a row per SEKV layer and query "
                                     "head, a column per answer token; darker: more spans "
                                     "expanded. Click a column to select the token."));
    grid_title->setWordWrap(true);
    l->addWidget(grid_title);
    grid_ = new ZoomGrid;
    grid_area_ = new QScrollArea;
    grid_area_->setWidget(grid_);
    grid_area_->setWidgetResizable(true); // a short answer gets wider cells
    grid_area_->setFrameShape(QFrame::NoFrame);
    l->addWidget(grid_area_);
    step_ = new QLabel;
    step_->setObjectName(QStringLiteral("inspectorStep"));
    l->addWidget(step_);
    l->addWidget(new QLabel(tr("<b>Memory of the SEKV layers</b> per tier at each token")));
    chart_ = new MemoryChart;
    l->addWidget(chart_, 1);
    outer->addWidget(body_, 1);
    body_->hide();
    connect(grid_, &ZoomGrid::step_selected, this, [this](int step) {
        set_selected_step(step);
        emit step_selected(step);
    });
}

QString ZoomInspector::rate_text() const {
    if (!zoom_)
        return {};
    const QLocale l;
    const double mean = zoom_->mean_expansions();
    return tr("%1 spans per token and head (%2 % of the %3 spans)")
        .arg(l.toString(mean, 'f', 1))
        .arg(l.toString(zoom_->n_spans() > 0 ? 100 * mean / zoom_->n_spans() : 0.0, 'f', 1))
        .arg(l.toString(zoom_->n_spans()));
}

QString ZoomInspector::message_text() const {
    return message_->isHidden() ? QString() : message_->text();
}

void ZoomInspector::set_zoom(AnswerZoomPtr zoom, const QString& message, qint64 full_kv_bytes) {
    zoom_ = std::move(zoom);
    grid_->set_zoom(zoom_);
    chart_->set_zoom(zoom_, full_kv_bytes);
    step_->clear();
    if (!zoom_) {
        message_->setText(message);
        message_->setVisible(!message.isEmpty());
        body_->hide();
        return;
    }
    message_->setText(message);
    message_->setVisible(!message.isEmpty());
    QStringList layers;
    for (const int layer : zoom_->layers())
        layers << QString::number(layer);
    const QLocale l;
    summary_->setText(tr("Answer of %1 · %2 in its context · SEKV layers %3 × %4 query heads")
                          .arg(count_text(zoom_->steps(), tr("token"), tr("tokens")),
                               count_text(zoom_->n_spans(), tr("span"), tr("spans")),
                               layers.join(QStringLiteral(", ")), QString::number(zoom_->heads())));
    rate_->setText(tr("<b>Expansion rate</b>: %1").arg(rate_text()));
    const int h = grid_->minimumSizeHint().height() +
                  grid_area_->horizontalScrollBar()->sizeHint().height() + 4;
    grid_area_->setFixedHeight(h);
    body_->show();
}

void ZoomInspector::set_selected_step(int step) {
    grid_->set_selected_step(step);
    chart_->set_selected_step(step);
    if (!zoom_ || step < 0 || step >= zoom_->steps()) {
        step_->clear();
        return;
    }
    int total = 0;
    for (int r = 0; r < zoom_->rows(); ++r)
        total += zoom_->cell(r, step);
    step_->setText(tr("Token %1: %2 expanded over the %3 layer-head pairs (%4 distinct)")
                       .arg(token_label(*zoom_, step), count_text(total, tr("span"), tr("spans")),
                            QString::number(zoom_->rows()),
                            QString::number(zoom_->span_counts(step).size())));
    const QRect r = grid_->cell_rect(0, step);
    grid_area_->ensureVisible(r.center().x(), r.center().y(), 40, 0);
}

} // namespace spanscope::gui
