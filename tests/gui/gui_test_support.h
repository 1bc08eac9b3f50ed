// What the window tests share: the real model's path (or a skip), a window started on a
// project, files dropped on the window, and a meter of the gaps between the event loop's timer
// ticks.
#pragma once

#include "engine/model/model_locator.h"
#include "ui/main_window.h"

#include <QCoreApplication>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QMimeData>
#include <QSignalSpy>
#include <QStringList>
#include <QTimer>
#include <QUrl>

#include <fstream>
#include <memory>

namespace spanscope::gui {

/// Real documents the window tests read, from Debian packages the set-up installs (base-files,
/// bash).
inline const QString kBsd = QStringLiteral("/usr/share/common-licenses/BSD");
inline const QString kRbash = QStringLiteral("/usr/share/doc/bash/RBASH");

/// The real model file, or "" (the caller skips with the printed reason).
inline QString real_model_path(QString* why) {
    const auto where = locate_model("");
    if (where.path.empty()) {
        *why = QString::fromStdString(missing_model_message(where));
        return {};
    }
    return QString::fromStdString(where.path);
}

/// Drops `files` on the window, as a file manager does.
inline void drop(MainWindow& w, const QStringList& files) {
    QMimeData mime;
    QList<QUrl> urls;
    for (const auto& f : files)
        urls << QUrl::fromLocalFile(f);
    mime.setUrls(urls);
    const QPointF at(w.width() / 2.0, w.height() / 2.0);
    QDragEnterEvent enter(at.toPoint(), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(&w, &enter);
    QDropEvent dropped(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(&w, &dropped);
}

/// Makes a window with settings `s` (not saved), shows it, waits up to 30 s for its model, then
/// opens (with `create`, creates) `project` and waits up to 30 s for it. False with the reason in
/// `why` when the model does not load or the project does not open.
inline bool start_window(std::unique_ptr<MainWindow>& w, const AppSettings& s,
                         const QString& project, bool create, QString* why) {
    w = std::make_unique<MainWindow>(s, /*persist_settings=*/false);
    w->show();
    QSignalSpy ready(w.get(), &MainWindow::model_ready);
    if (!ready.wait(30000) || !ready[0][0].toBool()) {
        *why = QStringLiteral("the model did not load: ") + w->banner_text();
        return false;
    }
    QSignalSpy opened(w.get(), &MainWindow::project_ready);
    w->open_project(project, create);
    if (!opened.wait(30000) || opened[0][0].toLongLong() < 0) {
        *why = QStringLiteral("the project did not open: ") + w->banner_text();
        return false;
    }
    return true;
}

/// Ticks every 5 ms on the GUI thread while measuring (between resume() and pause()) and
/// records, between two ticks, the longest wall-clock gap and the longest stall: the gap less
/// the time the thread waited for a CPU (the run_delay of /proc/thread-self/schedstat), i.e.
/// the time it worked or was blocked without returning to the event loop. A machine busy with
/// other work lengthens the gaps, not the stalls. Where schedstat is missing a stall is the
/// whole gap.
class GapMeter : public QObject {
public:
    GapMeter() {
        timer_.setInterval(5);
        timer_.setTimerType(Qt::PreciseTimer);
        connect(&timer_, &QTimer::timeout, this, [this] { tick(); });
        clock_.start();
        schedstat_ = run_delay_ns() >= 0;
    }
    void resume() {
        // Measured from now: work done right after resume() counts before the first tick.
        last_ = clock_.nsecsElapsed();
        last_delay_ = run_delay_ns();
        timer_.start();
    }
    void pause() {
        tick(); // the time since the last tick counts too
        timer_.stop();
        last_ = 0;
    }
    double max_gap_ms() const { return static_cast<double>(max_gap_ns_) / 1e6; }
    double max_stall_ms() const { return static_cast<double>(max_stall_ns_) / 1e6; }
    bool has_schedstat() const { return schedstat_; }
    qint64 ticks() const { return ticks_; }

private:
    /// This thread's time spent waiting on a run queue (ns), or -1 without schedstat.
    static qint64 run_delay_ns() {
        std::ifstream in("/proc/thread-self/schedstat");
        long long runtime = 0, delay = -1;
        if (!(in >> runtime >> delay))
            return -1;
        return delay;
    }
    void tick() {
        const qint64 now = clock_.nsecsElapsed(), delay = run_delay_ns();
        if (last_ > 0) {
            const qint64 gap = now - last_;
            max_gap_ns_ = qMax(max_gap_ns_, gap);
            max_stall_ns_ =
                qMax(max_stall_ns_, schedstat_ && delay >= 0 ? gap - (delay - last_delay_) : gap);
        }
        last_ = now;
        last_delay_ = delay;
        ++ticks_;
    }

    QTimer timer_;
    QElapsedTimer clock_;
    bool schedstat_ = false;
    qint64 last_ = 0, last_delay_ = 0, max_gap_ns_ = 0, max_stall_ns_ = 0, ticks_ = 0;
};

} // namespace spanscope::gui
