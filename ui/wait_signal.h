// Wait for a signal while the event loop runs (the GUI stays responsive), with a time limit.
#pragma once

#include <QEventLoop>
#include <QObject>
#include <QTimer>

namespace spanscope::gui {

/// Run the event loop until `sender` emits `signal` (true) or `timeout_ms` passes (false).
template <typename Sender, typename Signal>
bool wait_for_signal(Sender* sender, Signal signal, int timeout_ms) {
    QEventLoop loop;
    bool fired = false;
    auto c = QObject::connect(sender, signal, &loop, [&] {
        fired = true;
        loop.quit();
    });
    QTimer::singleShot(timeout_ms, &loop, &QEventLoop::quit);
    loop.exec();
    QObject::disconnect(c);
    return fired;
}

} // namespace spanscope::gui
