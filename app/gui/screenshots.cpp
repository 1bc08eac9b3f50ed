#include "screenshots.h"

#include "main_window.h"
#include "wait_signal.h"

#include <QApplication>
#include <QDir>
#include <QPixmap>
#include <QTemporaryDir>

#include <cstdio>

namespace spanscope::gui {

namespace {
bool save(MainWindow& w, const QString& path) {
    QApplication::processEvents();
    const bool ok = w.grab().save(path, "PNG");
    std::fprintf(stderr, "%s %s\n", ok ? "wrote" : "could not write", qPrintable(path));
    return ok;
}

int fail(const char* what) {
    std::fprintf(stderr, "spanscope --screenshots: %s\n", what);
    return 1;
}
} // namespace

int render_screenshots(const QString& dir, const QStringList& files, const QString& question,
                       const AppSettings& settings) {
    if (!QDir().mkpath(dir))
        return fail("cannot create the output directory");
    QTemporaryDir tmp;
    MainWindow w(settings, /*persist_settings=*/false);
    w.resize(1280, 800);
    w.show();
    bool model_ok = false;
    QObject::connect(&w, &MainWindow::model_ready, [&](bool ok) { model_ok = ok; });
    if (!wait_for_signal(&w, &MainWindow::model_ready, 120000) || !model_ok)
        return fail(qPrintable("no model: " + w.banner_text()));
    w.open_project(tmp.filePath(QStringLiteral("screenshots.spanscope")), true);
    if (!wait_for_signal(&w, &MainWindow::project_ready, 60000))
        return fail("the project did not open");

    // While the document is prefilled: the progress bar after a few chunks.
    bool shot = false, done = false;
    int failed = 0;
    QObject::connect(&w, &MainWindow::ingest_progressed, [&](const IngestStatus& st) {
        if (!shot && st.chunk >= 2) {
            shot = true;
            save(w, dir + "/main-window-ingest.png");
        }
    });
    QObject::connect(&w, &MainWindow::ingest_done, [&](int, int f, bool) {
        done = true;
        failed = f;
    });
    w.add_documents(files);
    while (!done)
        if (!wait_for_signal(&w, &MainWindow::ingest_done, 1800000))
            return fail("adding the documents did not finish in 30 minutes");
    if (failed > 0)
        return fail(qPrintable("a document failed: " + w.banner_text()));
    wait_for_signal(&w, &MainWindow::document_shown, 10000);
    if (!shot && !save(w, dir + "/main-window-ingest.png"))
        return 1;
    if (!save(w, dir + "/main-window-document.png"))
        return 1;

    bool answered = false;
    QObject::connect(&w, &MainWindow::answer_done, [&] { answered = true; });
    w.ask(question);
    if (!wait_for_signal(&w, &MainWindow::answer_done, 600000) || !answered)
        return fail(qPrintable("no answer: " + w.banner_text()));
    wait_for_signal(&w, &MainWindow::chats_changed, 5000);
    return save(w, dir + "/main-window-answer.png") ? 0 : 1;
}

} // namespace spanscope::gui
