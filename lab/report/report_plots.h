// spanscope-report's PNG plots, drawn with QPainter on a QImage (no window; a QGuiApplication
// must exist for the fonts): accuracy heat maps per task and configuration, and accuracy
// against fast-tier memory per task and over all tasks.
#pragma once

#include "lab/report/report_data.h"
#include "lab/report/report_paint.h"

#include <QColor>
#include <QImage>
#include <QString>

#include <string>
#include <vector>

namespace spanscope::report {

/// The heat map colour of an accuracy in [0, 1]: red (0) → yellow (0.5) → green (1).
QColor accuracy_colour(double accuracy);

/// The colour of a policy's series (full dark grey, sekv blue, then fixed colours).
QColor policy_colour(const std::string& policy);

/// Accuracy of one configuration of a task, x = needle depth (the depths the task has), y =
/// target length; each cell coloured by accuracy and labelled with the accuracy % and n.
QImage render_heatmap(const TaskTable& task, const ConfigRow& row);

/// Accuracy (y, 0–100 %) against mean fast-tier fraction (x, 0–100 %): one series per policy
/// joining its budgets, full as a point with a dashed horizontal line at its accuracy.
QImage render_memory_plot(const std::string& title, const std::vector<MemoryPoint>& points);

/// The image of one planned plot.
QImage render_plot(const Report& report, const PlotSpec& plot);

/// Renders and saves every plot as DIR/plot.file. Throws std::runtime_error naming the file
/// that could not be written.
void write_plots(const Report& report, const std::vector<PlotSpec>& plots, const QString& dir);

} // namespace spanscope::report
