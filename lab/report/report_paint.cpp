// The shared drawing helpers of report_paint.h.
#include "lab/report/report_paint.h"

#include <QGuiApplication>
#include <QPen>
#include <QRect>
#include <QRectF>

#include <algorithm>
#include <cmath>
#include <utility>

namespace spanscope::report {

QFont font_px(int px, bool bold) {
    QFont f = QGuiApplication::font();
    f.setPixelSize(px);
    f.setBold(bold);
    return f;
}

QImage blank(int w, int h) {
    QImage img(w, h, QImage::Format_RGB32);
    img.fill(Qt::white);
    return img;
}

void draw_titles(QPainter& p, int width, const QString& title, const QString& subtitle) {
    p.setPen(kText);
    p.setFont(font_px(18, true));
    p.drawText(QRect(0, 10, width, 26), Qt::AlignHCenter | Qt::AlignVCenter, title);
    p.setFont(font_px(13));
    p.drawText(QRect(0, 38, width, 20), Qt::AlignHCenter | Qt::AlignVCenter, subtitle);
}

void draw_vertical_text(QPainter& p, int x, int y, const QString& text) {
    p.save();
    p.translate(x, y);
    p.rotate(-90);
    p.drawText(QRect(-300, -10, 600, 20), Qt::AlignCenter, text);
    p.restore();
}

QString Ticks::label(double value) const {
    // Rounding to the step first keeps 0.30000000000000004 and -0 out of the labels.
    double v = std::round(value / step) * step;
    if (v == 0)
        v = 0;
    return QString::number(v, 'f', decimals);
}

Ticks nice_ticks(double lo, double hi, int target) {
    if (!std::isfinite(lo))
        lo = 0;
    if (!std::isfinite(hi))
        hi = 0;
    lo = std::clamp(lo, -1e300, 1e300);
    hi = std::clamp(hi, -1e300, 1e300);
    if (lo > hi)
        std::swap(lo, hi);
    if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
        // One value: a range of ±10 % around it (±0.5 around 0).
        const double pad = lo == 0 ? 0.5 : std::fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    target = std::max(2, target);
    // The step: the raw step rounded up to 1, 2 or 5 × 10^k (Heckbert, "Nice numbers for graph
    // labels", Graphics Gems, 1990, with a ceiling instead of rounding so there are at most
    // about `target` intervals).
    const double raw = (hi - lo) / (target - 1);
    const double power = std::pow(10.0, std::floor(std::log10(raw)));
    const double fraction = raw / power;
    const double nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
    Ticks t;
    t.step = nice * power;
    t.decimals = std::clamp(-static_cast<int>(std::floor(std::log10(t.step) + 1e-9)), 0, 15);
    const long long first = static_cast<long long>(std::floor(lo / t.step + 1e-9));
    const long long last = static_cast<long long>(std::ceil(hi / t.step - 1e-9));
    for (long long i = first; i <= std::max(last, first + 1); ++i)
        t.values.push_back(static_cast<double>(i) * t.step);
    return t;
}

void draw_axes(QPainter& p, const QRectF& area, const QString& x_title, const QString& y_title,
               int y_title_x) {
    p.setPen(QPen(kAxis, 1.5));
    p.drawLine(area.bottomLeft(), area.bottomRight());
    p.drawLine(area.bottomLeft(), area.topLeft());
    p.setPen(kText);
    p.setFont(font_px(14));
    p.drawText(QRectF(area.left(), area.bottom() + 28, area.width(), 24), Qt::AlignCenter, x_title);
    draw_vertical_text(p, y_title_x, static_cast<int>(area.center().y()), y_title);
}

} // namespace spanscope::report
