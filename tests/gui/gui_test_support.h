// What the window tests share: the real model's path (or a skip), waiting for a window signal,
// and a meter of the gaps between the event loop's timer ticks.
#pragma once

#include "main_window.h"
#include "model_locator.h"

#include <QElapsedTimer>
#include <QTimer>

namespace spanscope::gui {

/// The real model file, or "" (the caller skips with the printed reason).
inline QString real_model_path(QString* why) {
    const auto where = locate_model("");
    if (where.path.empty()) {
        *why = QString::fromStdString(missing_model_message(where));
        return {};
    }
    return QString::fromStdString(where.path);
}

/// Ticks every 5 ms on the GUI thread while measuring (between resume() and pause()) and
/// records the longest time between two ticks: how long the event loop was unable to run.
class GapMeter : public QObject {
public:
    GapMeter() {
        timer_.setInterval(5);
        timer_.setTimerType(Qt::PreciseTimer);
        connect(&timer_, &QTimer::timeout, this, [this] {
            const qint64 now = clock_.nsecsElapsed();
            if (last_ > 0)
                max_gap_ns_ = qMax(max_gap_ns_, now - last_);
            last_ = now;
            ++ticks_;
        });
        clock_.start();
    }
    void resume() {
        last_ = 0;
        timer_.start();
    }
    void pause() {
        // The time since the last tick counts too.
        if (last_ > 0)
            max_gap_ns_ = qMax(max_gap_ns_, clock_.nsecsElapsed() - last_);
        timer_.stop();
        last_ = 0;
    }
    double max_gap_ms() const { return static_cast<double>(max_gap_ns_) / 1e6; }
    qint64 ticks() const { return ticks_; }

private:
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ = 0, max_gap_ns_ = 0, ticks_ = 0;
};

} // namespace spanscope::gui
