// The training-curve plots of report_curves_plot.h.
#include "lab/report/report_curves_plot.h"

#include <QDir>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>

namespace spanscope::report {

namespace {

using Series = std::vector<std::pair<long long, double>>;

/// A series as a polyline (a single point draws nothing).
void draw_series(QPainter& p, const Series& s, const std::function<QPointF(double, double)>& to_px,
                 const QPen& pen) {
    if (s.size() < 2)
        return;
    QPainterPath path(to_px(static_cast<double>(s[0].first), s[0].second));
    for (size_t i = 1; i < s.size(); ++i)
        path.lineTo(to_px(static_cast<double>(s[i].first), s[i].second));
    p.setPen(pen);
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
}

/// A point of the held-out series: a filled circle with a white rim.
void draw_point(QPainter& p, QPointF centre, double radius) {
    p.setPen(QPen(Qt::white, 1.5));
    p.setBrush(kHeldOutCurve);
    p.drawEllipse(centre, radius, radius);
    p.setBrush(Qt::NoBrush);
}

} // namespace

QImage render_curve(const Curves& curves, size_t component) {
    const CurveComponent& c = curve_components().at(component);
    const Series train = moving_average(curve_series(curves.train, component), kTrainWindowSteps);
    const Series held = curve_series(curves.held_out, component);

    const int width = kPlotWidth, height = kPlotHeight;
    const int left = 90, right = kCurveLegendWidth, top = 74, bottom = 70;
    QImage img = blank(width, height);
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    draw_titles(p, width, QStringLiteral("Held-out and training %1").arg(QLatin1String(c.key)),
                QStringLiteral("%1 by training step (training: mean of the last %2 steps)")
                    .arg(QLatin1String(c.label))
                    .arg(kTrainWindowSteps));

    // The axes' ranges cover both series.
    long long step_lo = std::numeric_limits<long long>::max(), step_hi = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const Series* s : {&train, &held})
        for (const auto& [step, v] : *s) {
            step_lo = std::min(step_lo, step);
            step_hi = std::max(step_hi, step);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    if (step_lo > step_hi)
        step_lo = step_hi = 0;
    // At least 6 steps across, so 7 ticks fall on whole steps.
    const Ticks xt = nice_ticks(static_cast<double>(step_lo),
                                static_cast<double>(std::max(step_hi, step_lo + 6)), 7);
    const Ticks yt = nice_ticks(lo, hi, 6);
    const QRectF area(left, top, width - left - right, height - top - bottom);
    const auto to_px = [&](double x, double y) {
        return QPointF(area.left() + area.width() * (x - xt.low()) / (xt.high() - xt.low()),
                       area.bottom() - area.height() * (y - yt.low()) / (yt.high() - yt.low()));
    };

    // Grid and tick labels, then the axes.
    p.setFont(font_px(13));
    for (const double y : yt.values) {
        const QPointF a = to_px(xt.low(), y), b = to_px(xt.high(), y);
        p.setPen(QPen(kGrid, 1));
        p.drawLine(a, b);
        p.setPen(kText);
        p.drawText(QRectF(a.x() - 82, a.y() - 10, 76, 20), Qt::AlignRight | Qt::AlignVCenter,
                   yt.label(y));
    }
    for (const double x : xt.values) {
        const QPointF a = to_px(x, yt.low()), b = to_px(x, yt.high());
        p.setPen(QPen(kGrid, 1));
        p.drawLine(a, b);
        p.setPen(kText);
        p.drawText(QRectF(a.x() - 50, a.y() + 4, 100, 20), Qt::AlignCenter, xt.label(x));
    }
    draw_axes(p, area, QStringLiteral("training step"), QLatin1String(c.label), 18);

    // The series: training under held-out, so the evaluations stay visible.
    draw_series(p, train, to_px, QPen(kTrainCurve, 2.5));
    draw_series(p, held, to_px, QPen(kHeldOutCurve, 2.5));
    for (const auto& [step, v] : held)
        draw_point(p, to_px(static_cast<double>(step), v), 4.5);
    if (held.empty()) {
        p.setPen(kAxis);
        p.setFont(font_px(14));
        p.drawText(area, Qt::AlignCenter, QStringLiteral("no held-out evaluation recorded"));
    }

    // Legend to the right of the plot: a sample of each series, then the held-out change.
    const double lx = area.right() + 24, text_w = right - 30;
    double ly = area.top() + 4;
    const auto entry = [&](const QString& name, const QString& detail, bool held_out) {
        const double cy = ly + 10;
        p.setPen(QPen(held_out ? kHeldOutCurve : kTrainCurve, 2.5));
        p.drawLine(QPointF(lx, cy), QPointF(lx + 30, cy));
        if (held_out)
            draw_point(p, QPointF(lx + 15, cy), 4.5);
        p.setPen(kText);
        p.setFont(font_px(13));
        p.drawText(QRectF(lx + 38, ly, text_w - 38, 20), Qt::AlignLeft | Qt::AlignVCenter, name);
        p.setPen(kAxis);
        p.setFont(font_px(12));
        p.drawText(QRectF(lx + 38, ly + 18, text_w - 38, 18), Qt::AlignLeft | Qt::AlignVCenter,
                   detail);
        ly += 46;
    };
    if (!train.empty())
        entry(QStringLiteral("training"), QStringLiteral("mean of %1 steps").arg(kTrainWindowSteps),
              false);
    if (!held.empty())
        entry(QStringLiteral("held-out"), QStringLiteral("each evaluation"), true);
    if (held.size() > 1) {
        p.setPen(kText);
        p.setFont(font_px(12));
        p.drawText(QRectF(lx, ly + 4, text_w, 54), Qt::AlignLeft | Qt::TextWordWrap,
                   QStringLiteral("held-out, step %1 \u2192 %2:\n%3 \u2192 %4")
                       .arg(held.front().first)
                       .arg(held.back().first)
                       .arg(QString::number(held.front().second, 'g', 4),
                            QString::number(held.back().second, 'g', 4)));
    }
    return img;
}

std::vector<std::string> write_curve_plots(const Curves& curves, const QString& dir) {
    const QDir out(dir);
    std::vector<std::string> files;
    for (const size_t c : curves.components) {
        const std::string file = curve_file(c);
        const QString path = out.filePath(QString::fromStdString(file));
        if (!render_curve(curves, c).save(path, "PNG"))
            throw std::runtime_error("cannot write " + path.toStdString());
        files.push_back(file);
    }
    return files;
}

} // namespace spanscope::report
