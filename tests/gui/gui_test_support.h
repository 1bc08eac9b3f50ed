// What the window tests share: the real model's path (or a skip), waiting for a window signal,
// and a meter of the gaps between the event loop's timer ticks.
#pragma once

#include "main_window.h"
#include "model_locator.h"

#include <QElapsedTimer>
#include <QTimer>

#include <ctime>

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
/// records, between two ticks, the longest wall-clock gap (how long the event loop was unable
/// to run, the scheduler's delays on a loaded machine included) and the most CPU time the GUI
/// thread spent in one gap (work done on it without returning to the event loop: a machine
/// busy with other work does not lengthen that).
class GapMeter : public QObject {
public:
    GapMeter() {
        timer_.setInterval(5);
        timer_.setTimerType(Qt::PreciseTimer);
        connect(&timer_, &QTimer::timeout, this, [this] { tick(); });
        clock_.start();
    }
    void resume() {
        last_ = 0;
        timer_.start();
    }
    void pause() {
        // The time since the last tick counts too.
        tick();
        timer_.stop();
        last_ = 0;
    }
    double max_gap_ms() const { return static_cast<double>(max_gap_ns_) / 1e6; }
    double max_busy_gap_ms() const { return static_cast<double>(max_busy_ns_) / 1e6; }
    qint64 ticks() const { return ticks_; }

private:
    static qint64 thread_cpu_ns() {
        timespec t{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return static_cast<qint64>(t.tv_sec) * 1000000000 + t.tv_nsec;
    }
    void tick() {
        const qint64 now = clock_.nsecsElapsed(), cpu = thread_cpu_ns();
        if (last_ > 0) {
            max_gap_ns_ = qMax(max_gap_ns_, now - last_);
            max_busy_ns_ = qMax(max_busy_ns_, cpu - last_cpu_);
        }
        last_ = now;
        last_cpu_ = cpu;
        ++ticks_;
    }

    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ = 0, last_cpu_ = 0, max_gap_ns_ = 0, max_busy_ns_ = 0, ticks_ = 0;
};

} // namespace spanscope::gui
