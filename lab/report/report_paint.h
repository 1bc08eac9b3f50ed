// The drawing helpers every plot of spanscope-report shares (the accuracy plots of
// report_plots.h and the training curves of report_curves_plot.h): the page, its titles, fonts,
// the colours of text and axes, and tick positions for a numeric axis. QPainter on a QImage, no
// window; a QGuiApplication must exist for the fonts.
#pragma once

#include <QColor>
#include <QFont>
#include <QImage>
#include <QPainter>
#include <QRectF>
#include <QString>

#include <vector>

namespace spanscope::report {

/// The size a plot has unless its content needs more room (many depths or lengths).
inline constexpr int kPlotWidth = 900;
inline constexpr int kPlotHeight = 600;

/// The colours of text, grid lines and axes.
inline constexpr QColor kText(0x20, 0x20, 0x20);
inline constexpr QColor kGrid(0xdd, 0xdd, 0xdd);
inline constexpr QColor kAxis(0x55, 0x55, 0x55);

/// The application's font at a size in pixels.
QFont font_px(int px, bool bold = false);

/// A white image of w × h pixels (RGB32).
QImage blank(int w, int h);

/// The title (bold, 18 px) and the subtitle (13 px), centred at the top of an image `width`
/// pixels wide; they take the top 58 pixels.
void draw_titles(QPainter& p, int width, const QString& title, const QString& subtitle);

/// Text turned 90° anticlockwise (a vertical axis label), centred on (x, y), with the
/// painter's current pen and font.
void draw_vertical_text(QPainter& p, int x, int y, const QString& text);

/// The axes of a plot area: its bottom and left edges (1.5 px), the x title (14 px) centred
/// below the area, 28 px under it, and the y title turned 90° and centred at x = y_title_x.
void draw_axes(QPainter& p, const QRectF& area, const QString& x_title, const QString& y_title,
               int y_title_x);

/// The ticks of a numeric axis: values step apart, first ≤ lo and last ≥ hi.
struct Ticks {
    std::vector<double> values; ///< ascending, evenly spaced
    double step = 1;            ///< 1, 2 or 5 × a power of ten
    int decimals = 0;           ///< digits after the point that label every tick exactly

    double low() const { return values.front(); }
    double high() const { return values.back(); }
    /// A tick value as text with `decimals` digits (e.g. 0.25 with step 0.05 → "0.25").
    QString label(double value) const;
};

/// About `target` ticks (at least 2) covering [lo, hi] at a "nice" step (1, 2 or 5 × 10^k),
/// e.g. (0.13, 0.71, 6) → 0, 0.2, 0.4, 0.6, 0.8 (step 0.2). lo > hi are swapped; lo == hi gets a
/// range around the value; a bound that is not finite is taken as 0, bounds beyond ±1e300 as
/// ±1e300. At least two values.
Ticks nice_ticks(double lo, double hi, int target);

} // namespace spanscope::report
