// The plots of report_plots.h.
#include "lab/report/report_plots.h"

#include "lab/report/report_paint.h"

#include <QDir>
#include <QFontMetrics>
#include <QLinearGradient>
#include <QPainter>
#include <QPainterPath>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace spanscope::report {

namespace {

QString qs(const std::string& s) {
    return QString::fromStdString(s);
}

QColor mix(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                            static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                            static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

/// Where a point's label of the given width goes: above right of the point, else below
/// right, left, or further away, the first place that overlaps no earlier label (recorded).
QRectF label_place(std::vector<QRectF>& placed, QPointF point, int width) {
    const double w = width + 2, h = 18;
    const QPointF offsets[] = {{8, -22}, {8, 4},  {-8 - w, -22}, {-8 - w, 4},
                               {8, -40}, {8, 22}, {-8 - w, -40}, {-8 - w, 22}};
    QRectF rect(point + offsets[0], QSizeF(w, h));
    for (const QPointF& o : offsets) {
        const QRectF r(point + o, QSizeF(w, h));
        if (std::none_of(placed.begin(), placed.end(),
                         [&](const QRectF& q) { return q.intersects(r); })) {
            rect = r;
            break;
        }
    }
    placed.push_back(rect);
    return rect;
}

QString percent_label(double fraction) {
    return QString::number(static_cast<int>(std::lround(fraction * 100))) + QStringLiteral(" %");
}

} // namespace

QColor accuracy_colour(double accuracy) {
    const QColor red(0xd7, 0x30, 0x27), yellow(0xfe, 0xe0, 0x8b), green(0x1a, 0x98, 0x50);
    const double a = std::clamp(accuracy, 0.0, 1.0);
    return a < 0.5 ? mix(red, yellow, a / 0.5) : mix(yellow, green, (a - 0.5) / 0.5);
}

QColor policy_colour(const std::string& policy) {
    static const std::map<std::string, QColor> known = {
        {"full", QColor(0x33, 0x33, 0x33)},         {"sekv", QColor(0x1f, 0x77, 0xb4)},
        {"sekv-trained", QColor(0x00, 0x3f, 0x7f)}, {"chunk_summary", QColor(0xff, 0x7f, 0x0e)},
        {"snapkv", QColor(0x2c, 0xa0, 0x2c)},       {"h2o", QColor(0x94, 0x67, 0xbd)},
        {"streaming", QColor(0x8c, 0x56, 0x4b)}};
    const auto it = known.find(policy);
    if (it != known.end())
        return it->second;
    static const QColor others[] = {QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf),
                                    QColor(0xbc, 0xbd, 0x22), QColor(0xd6, 0x27, 0x28)};
    return others[std::hash<std::string>{}(policy) % std::size(others)];
}

QImage render_heatmap(const TaskTable& task, const ConfigRow& row) {
    const int left = 120, right = 110, top = 74, bottom = 72;
    const int cols = std::max<int>(1, static_cast<int>(task.depths.size()));
    const int rows = std::max<int>(1, static_cast<int>(task.lengths.size()));
    // Cells wide enough for "100 %" and "n=99" at 13 px; the image grows when needed.
    const int width = std::max(kPlotWidth, left + right + cols * 58);
    const int height = std::max(kPlotHeight, top + bottom + rows * 40);
    QImage img = blank(width, height);
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    draw_titles(p, width, qs(task.task + " \u2014 " + row.config.label()),
                QStringLiteral("accuracy by needle depth and target length (cell: accuracy, "
                               "number of samples)"));

    const QRectF area(left, top, width - left - right, height - top - bottom);
    const double cw = area.width() / cols, ch = area.height() / rows;
    const QFont cell_font = font_px(13);
    const QFont cell_bold = font_px(14, true);
    for (int r = 0; r < rows && r < static_cast<int>(task.lengths.size()); ++r) {
        for (int c = 0; c < cols && c < static_cast<int>(task.depths.size()); ++c) {
            const QRectF rect(area.left() + c * cw, area.top() + r * ch, cw, ch);
            const auto it = row.by_cell.find({task.lengths[r], task.depths[c]});
            const bool empty = it == row.by_cell.end() || it->second.n == 0;
            const QColor fill = empty ? QColor(0xee, 0xee, 0xee) : accuracy_colour(it->second.mean);
            p.fillRect(rect, fill);
            p.setPen(QPen(Qt::white, 1));
            p.drawRect(rect);
            const double luma = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF();
            p.setPen(luma < 0.5 ? QColor(Qt::white) : kText);
            if (empty) {
                p.setFont(cell_font);
                p.drawText(rect, Qt::AlignCenter, QStringLiteral("\u2013"));
                continue;
            }
            const QRectF upper(rect.left(), rect.top(), rect.width(), rect.height() / 2 + 2);
            const QRectF lower(rect.left(), rect.center().y() + 1, rect.width(),
                               rect.height() / 2 - 1);
            p.setFont(cell_bold);
            p.drawText(upper, Qt::AlignHCenter | Qt::AlignBottom, percent_label(it->second.mean));
            p.setFont(cell_font);
            p.drawText(lower, Qt::AlignHCenter | Qt::AlignTop,
                       QStringLiteral("n=%1").arg(it->second.n));
        }
    }

    // Ticks and axis labels.
    p.setPen(kText);
    p.setFont(font_px(13));
    for (int c = 0; c < static_cast<int>(task.depths.size()); ++c)
        p.drawText(QRectF(area.left() + c * cw, area.bottom() + 4, cw, 20), Qt::AlignCenter,
                   QString::number(task.depths[c]) + QStringLiteral(" %"));
    for (int r = 0; r < static_cast<int>(task.lengths.size()); ++r)
        p.drawText(QRectF(left - 88, area.top() + r * ch, 80, ch),
                   Qt::AlignRight | Qt::AlignVCenter, QString::number(task.lengths[r]));
    p.setFont(font_px(14));
    p.drawText(QRectF(area.left(), area.bottom() + 30, area.width(), 24), Qt::AlignCenter,
               QStringLiteral("needle depth (% of the document)"));
    draw_vertical_text(p, 20, static_cast<int>(area.center().y()),
                       QStringLiteral("target length (tokens)"));

    // Colour bar: 100 % at the top, 0 % at the bottom.
    const QRectF bar(area.right() + 28, area.top(), 22, area.height());
    QLinearGradient g(bar.topLeft(), bar.bottomLeft());
    for (int i = 0; i <= 10; ++i)
        g.setColorAt(i / 10.0, accuracy_colour(1.0 - i / 10.0));
    p.fillRect(bar, g);
    p.setPen(kAxis);
    p.drawRect(bar);
    p.setFont(font_px(12));
    for (int i = 0; i <= 4; ++i) {
        const double y = bar.top() + bar.height() * i / 4.0;
        p.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 4, y));
        p.drawText(QRectF(bar.right() + 6, y - 10, 60, 20), Qt::AlignLeft | Qt::AlignVCenter,
                   percent_label(1.0 - i / 4.0));
    }
    p.setFont(font_px(12));
    p.drawText(QRectF(bar.left() - 20, bar.top() - 22, 70, 18), Qt::AlignCenter,
               QStringLiteral("accuracy"));
    return img;
}

QImage render_memory_plot(const std::string& title, const std::vector<MemoryPoint>& points) {
    const int width = kPlotWidth, height = kPlotHeight;
    const int left = 84, right = 190, top = 74, bottom = 70;
    QImage img = blank(width, height);
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::TextAntialiasing);
    draw_titles(p, width, qs(title),
                QStringLiteral("accuracy against the mean fraction of the full KV cache kept in "
                               "the fast tier"));

    double x_max = 1.0;
    for (const auto& pt : points)
        x_max = std::max(x_max, std::ceil(pt.fast_tier * 10.0 - 1e-9) / 10.0);
    const QRectF area(left, top, width - left - right, height - top - bottom);
    auto to_px = [&](double x, double y) {
        return QPointF(area.left() + area.width() * x / x_max,
                       area.bottom() - area.height() * std::clamp(y, 0.0, 1.0));
    };

    // Grid, ticks every 10 % (labels every 20 %), axes.
    p.setFont(font_px(13));
    const int x_steps = static_cast<int>(std::lround(x_max * 10));
    for (int i = 0; i <= std::max(10, x_steps); ++i) {
        if (i <= 10) {
            const QPointF a = to_px(0, i / 10.0), b = to_px(x_max, i / 10.0);
            p.setPen(QPen(kGrid, 1));
            p.drawLine(a, b);
            if (i % 2 == 0) {
                p.setPen(kText);
                p.drawText(QRectF(a.x() - 60, a.y() - 10, 54, 20),
                           Qt::AlignRight | Qt::AlignVCenter, percent_label(i / 10.0));
            }
        }
        if (i <= x_steps) {
            const QPointF a = to_px(i / 10.0, 0), b = to_px(i / 10.0, 1);
            p.setPen(QPen(kGrid, 1));
            p.drawLine(a, b);
            if (i % 2 == 0) {
                p.setPen(kText);
                p.drawText(QRectF(a.x() - 30, a.y() + 4, 60, 20), Qt::AlignCenter,
                           percent_label(i / 10.0));
            }
        }
    }
    draw_axes(p, area, QStringLiteral("mean fast tier (% of the full KV cache)"),
              QStringLiteral("accuracy"), 20);

    // Series: per policy, its points in order of memory.
    std::vector<std::string> policies;
    std::map<std::string, std::vector<MemoryPoint>> series;
    for (const auto& pt : points) {
        if (!series.count(pt.config.policy))
            policies.push_back(pt.config.policy);
        series[pt.config.policy].push_back(pt);
    }
    std::stable_sort(policies.begin(), policies.end(), [](const auto& a, const auto& b) {
        return std::make_pair(policy_rank(a), a) < std::make_pair(policy_rank(b), b);
    });
    if (points.empty()) {
        p.setFont(font_px(14));
        p.drawText(area, Qt::AlignCenter, QStringLiteral("no fast-tier memory recorded"));
    }
    p.setFont(font_px(12));
    std::vector<QRectF> labels; // budget labels placed so far
    for (const auto& policy : policies) {
        auto& pts = series[policy];
        std::stable_sort(pts.begin(), pts.end(),
                         [](const auto& a, const auto& b) { return a.fast_tier < b.fast_tier; });
        const QColor colour = policy_colour(policy);
        if (policy == "full") {
            for (const auto& pt : pts) {
                p.setPen(QPen(colour, 1.5, Qt::DashLine));
                p.drawLine(to_px(0, pt.accuracy), to_px(x_max, pt.accuracy));
            }
        } else if (pts.size() > 1) {
            QPainterPath path(to_px(pts[0].fast_tier, pts[0].accuracy));
            for (size_t i = 1; i < pts.size(); ++i)
                path.lineTo(to_px(pts[i].fast_tier, pts[i].accuracy));
            p.setPen(QPen(colour, 2.5));
            p.setBrush(Qt::NoBrush);
            p.drawPath(path);
        }
        for (const auto& pt : pts) {
            const QPointF c = to_px(pt.fast_tier, pt.accuracy);
            p.setPen(QPen(Qt::white, 1.5));
            p.setBrush(colour);
            p.drawEllipse(c, 6, 6);
            if (!pt.config.is_full() || pt.config.budget != 1.0) {
                const QString text = qs(budget_percent(pt.config.budget)) + QStringLiteral(" %");
                p.setPen(colour.darker(130));
                p.drawText(label_place(labels, c, QFontMetrics(p.font()).horizontalAdvance(text)),
                           Qt::AlignLeft | Qt::AlignVCenter, text);
            }
        }
    }
    p.setBrush(Qt::NoBrush);

    // Legend to the right of the plot.
    const double lx = area.right() + 24;
    double ly = area.top() + 4;
    p.setPen(kText);
    p.setFont(font_px(13, true));
    p.drawText(QRectF(lx, ly, right - 30, 20), Qt::AlignLeft | Qt::AlignVCenter,
               QStringLiteral("policy"));
    ly += 26;
    p.setFont(font_px(13));
    for (const auto& policy : policies) {
        const QColor colour = policy_colour(policy);
        const double cy = ly + 10;
        p.setPen(policy == "full" ? QPen(colour, 1.5, Qt::DashLine) : QPen(colour, 2.5));
        p.drawLine(QPointF(lx, cy), QPointF(lx + 30, cy));
        p.setPen(QPen(Qt::white, 1.5));
        p.setBrush(colour);
        p.drawEllipse(QPointF(lx + 15, cy), 5, 5);
        p.setBrush(Qt::NoBrush);
        p.setPen(kText);
        p.drawText(QRectF(lx + 38, ly, right - 64, 20), Qt::AlignLeft | Qt::AlignVCenter,
                   qs(policy));
        ly += 24;
    }
    if (!policies.empty()) {
        p.setFont(font_px(12));
        p.setPen(kAxis);
        p.drawText(QRectF(lx, ly + 6, right - 30, 60), Qt::AlignLeft | Qt::TextWordWrap,
                   QStringLiteral("point labels: budget"));
    }
    return img;
}

QImage render_plot(const Report& report, const PlotSpec& plot) {
    if (plot.kind == PlotSpec::Kind::Heatmap) {
        const TaskTable& task = report.tasks.at(plot.task);
        return render_heatmap(task, task.rows.at(plot.row));
    }
    if (plot.all_tasks)
        return render_memory_plot("All tasks (macro average)", macro_memory_points(report));
    const TaskTable& task = report.tasks.at(plot.task);
    return render_memory_plot(task.task, memory_points(task));
}

void write_plots(const Report& report, const std::vector<PlotSpec>& plots, const QString& dir) {
    const QDir out(dir);
    for (const auto& plot : plots) {
        const QString path = out.filePath(qs(plot.file));
        if (!render_plot(report, plot).save(path, "PNG"))
            throw std::runtime_error("cannot write " + path.toStdString());
    }
}

} // namespace spanscope::report
