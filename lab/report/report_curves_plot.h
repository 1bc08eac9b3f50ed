// The PNGs of the zoom-in training curves (report_curves.h), drawn with QPainter on a QImage (no
// window; a QGuiApplication must exist for the fonts): per component, x = training step, y = the
// value; the training series as a light moving average, the held-out series as a dark line with
// a point per evaluation.
#pragma once

#include "lab/report/report_curves.h"
#include "lab/report/report_paint.h"

#include <QColor>
#include <QImage>
#include <QString>

#include <string>
#include <vector>

namespace spanscope::report {

/// The training series' moving average (light) and the held-out series (dark).
inline constexpr QColor kTrainCurve(0x9e, 0xc9, 0xe2);
inline constexpr QColor kHeldOutCurve(0x08, 0x45, 0x94);

/// The legend's column on the right of every curve plot, in pixels; the plot area ends left of
/// it.
inline constexpr int kCurveLegendWidth = 200;

/// One component (an index into curve_components()) as a kPlotWidth × kPlotHeight image titled
/// "Held-out and training <key>", with ticks, axis labels and a legend. A series without points
/// is left out (with a note in the plot when there is no held-out evaluation).
QImage render_curve(const Curves& curves, size_t component);

/// Renders every component shown (Curves::components) and saves it as DIR/curve_file(component);
/// returns the file names in component order. Throws std::runtime_error naming the file that could
/// not be written.
std::vector<std::string> write_curve_plots(const Curves& curves, const QString& dir);

} // namespace spanscope::report
