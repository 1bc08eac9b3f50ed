// The inspector (docs/desktop-app.md): an answer's zoom decisions as a layer × head × step grid,
// the SEKV layers' memory per tier over the answer, and the expansion rate. Drawn with QPainter;
// clicking a step (a column of the grid) selects that answer token.
#pragma once

#include "ui/zoom_data.h"

#include <QWidget>

class QLabel;
class QScrollArea;

namespace spanscope::gui {

/// One row per (layer, head), one column per generated token; a cell's colour is the number of
/// spans that head expanded for that token.
class ZoomGrid : public QWidget {
    Q_OBJECT
public:
    explicit ZoomGrid(QWidget* parent = nullptr);
    void set_zoom(AnswerZoomPtr zoom);
    void set_selected_step(int step);
    int selected_step() const { return selected_; }
    int rows() const { return zoom_ ? zoom_->rows() : 0; }
    int columns() const { return zoom_ ? zoom_->steps() : 0; }
    /// Spans expanded in a cell (what its colour shows).
    int value(int row, int column) const { return zoom_ ? zoom_->cell(row, column) : 0; }
    /// Where a cell is drawn (widget coordinates).
    QRect cell_rect(int row, int column) const;
    /// "layer 5 · head 2" for a row.
    QString row_label(int row) const;
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    void step_selected(int step);

protected:
    void paintEvent(QPaintEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    bool event(QEvent* event) override;

private:
    /// (row, column) at a point, {-1, -1} outside the cells.
    std::pair<int, int> cell_at(QPoint p) const;

    AnswerZoomPtr zoom_;
    int selected_ = -1;
    int max_ = 1;           ///< the largest cell value (full colour)
    int cell_width() const; ///< wider than the least when the answer is short
};

/// Fast-tier and host-tier bytes of the SEKV layers at each step of the answer.
class MemoryChart : public QWidget {
    Q_OBJECT
public:
    explicit MemoryChart(QWidget* parent = nullptr);
    /// full_kv_bytes: what full would hold for the same layers (a reference line; 0: none).
    void set_zoom(AnswerZoomPtr zoom, qint64 full_kv_bytes = 0);
    void set_selected_step(int step);
    QSize sizeHint() const override { return {480, 170}; }
    QSize minimumSizeHint() const override { return {240, 120}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    AnswerZoomPtr zoom_;
    int selected_ = -1;
    qint64 full_ = 0;
};

class ZoomInspector : public QWidget {
    Q_OBJECT
public:
    explicit ZoomInspector(QWidget* parent = nullptr);
    /// Show an answer's trace (nullptr: none; `message` says why, in words); full_kv_bytes:
    /// what full would hold for its SEKV layers (0: unknown).
    void set_zoom(AnswerZoomPtr zoom, const QString& message = {}, qint64 full_kv_bytes = 0);
    void set_selected_step(int step);
    AnswerZoomPtr zoom() const { return zoom_; }
    ZoomGrid* grid() const { return grid_; }
    MemoryChart* chart() const { return chart_; }
    /// "4.2 spans per token and head (0.8 % of the 506 spans)".
    QString rate_text() const;
    QString message_text() const;

signals:
    void step_selected(int step);

private:
    AnswerZoomPtr zoom_;
    QLabel* summary_ = nullptr;
    QLabel* rate_ = nullptr;
    QLabel* message_ = nullptr;
    QLabel* step_ = nullptr;
    QWidget* body_ = nullptr;
    QScrollArea* grid_area_ = nullptr;
    ZoomGrid* grid_ = nullptr;
    MemoryChart* chart_ = nullptr;
};

} // namespace spanscope::gui
