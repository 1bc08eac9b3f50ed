// Qt's own threads under ThreadSanitizer, with no Spanscope code: a QtTest case (its watchdog
// thread) and QThreads started, quit, waited for and destroyed. Built with SPANSCOPE_TSAN only,
// run by `SPANSCOPE_TSAN_GUI=1 scripts/setup.sh tsan`. Debian's Qt and GLib are not built with
// TSan: this program alone gets reports (a QWaitCondition destroyed after a finished thread woke
// it, the watchdog's state freed by QTest::qRun, GLib's wake-up eventfd, Qt's own allocations
// freed by another thread) in every run, which is why the desktop application's worker tests are
// not in the TSan run until Qt is (docs/faults.md, "Sanitizers").
#include <QThread>
#include <QtTest>

class QtThreadBaseline : public QObject {
    Q_OBJECT
private slots:
    void startQuitWaitDestroy() {
        for (int i = 0; i < 20; ++i) {
            QThread t;
            t.start();
            t.quit();
            QVERIFY(t.wait(5000));
        }
    }
};

QTEST_GUILESS_MAIN(QtThreadBaseline)
#include "qt_thread_baseline.moc"
