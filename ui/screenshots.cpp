#include "ui/screenshots.h"

#include "ui/main_window.h"
#include "ui/wait_signal.h"
#include "ui/zoom_inspector.h"

#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QPixmap>
#include <QTemporaryDir>

#include <cstdio>

namespace spanscope::gui {

namespace {
bool save(QWidget& w, const QString& path) {
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
    // SEKV with its default settings, so that the spans and the zoom can be shown.
    AppSettings s = settings;
    s.memory = MemorySettings{};
    s.memory.policy = QStringLiteral("sekv");
    MainWindow w(s, /*persist_settings=*/false);
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
    bool spans_shown = false; // the document read, with its spans
    QObject::connect(&w, &MainWindow::document_spans_shown, [&] { spans_shown = true; });
    w.add_documents(files);
    while (!done)
        if (!wait_for_signal(&w, &MainWindow::ingest_done, 1800000))
            return fail("adding the documents did not finish in 30 minutes");
    if (failed > 0)
        return fail(qPrintable("a document failed: " + w.banner_text()));
    if (!spans_shown)
        wait_for_signal(&w, &MainWindow::document_spans_shown, 60000);
    if (!shot && !save(w, dir + "/main-window-ingest.png"))
        return 1;
    if (!save(w, dir + "/main-window-document.png"))
        return 1;

    bool answered = false;
    AnswerStats answer;
    QObject::connect(&w, &MainWindow::answer_done, [&](const AnswerStats& st) {
        answered = true;
        answer = st;
    });
    bool traced = false;
    QObject::connect(&w, &MainWindow::zoom_loaded, [&](qint64, bool ok) { traced = ok; });
    w.ask(question);
    if (!wait_for_signal(&w, &MainWindow::answer_done, 600000) || !answered)
        return fail(qPrintable("no answer: " + w.banner_text()));
    wait_for_signal(&w, &MainWindow::chats_changed, 5000);
    if (!traced && !wait_for_signal(&w, &MainWindow::zoom_loaded, 10000))
        return fail("the answer's zoom trace was not loaded");
    if (!traced)
        return fail(qPrintable("the answer has no zoom trace: " + w.inspector()->message_text()));
    w.inspector_dock()->hide();
    if (!save(w, dir + "/main-window-answer.png"))
        return 1;

    // The answer's top source clicked: its passage highlighted in the document.
    if (answer.citations.isEmpty())
        return fail("the answer has no sources");
    bool cited = false;
    QObject::connect(&w, &MainWindow::citation_shown, [&] { cited = true; });
    w.show_citation(answer.message_id, 0);
    if (!cited && !wait_for_signal(&w, &MainWindow::citation_shown, 30000))
        return fail("the answer's top source was not shown");
    if (!save(w, dir + "/answer-sources.png"))
        return 1;

    // The token whose zoom is shown: the one that expanded the most spans of this document.
    const auto zoom = w.current_zoom();
    int token = 0;
    size_t most = 0;
    for (int t = 0; t < zoom->steps(); ++t) {
        size_t here = 0;
        for (const auto& [span, n] : zoom->span_counts(t)) {
            SpanRef ref;
            here += zoom->locate(span, &ref) && ref.document_id == w.shown_document();
        }
        if (here > most) {
            most = here;
            token = t;
        }
    }
    bool zoomed = false; // drawn at once when the document is the one shown
    QObject::connect(&w, &MainWindow::zoom_shown, [&] { zoomed = true; });
    w.select_answer_token(zoom->message_id(), token);
    if (!zoomed && !wait_for_signal(&w, &MainWindow::zoom_shown, 30000))
        return fail("the token's zoom was not shown");
    if (!save(w, dir + "/document-zoom.png"))
        return 1;

    // The inspector, docked below, with the same token selected.
    w.resize(1280, 1040);
    w.inspector_dock()->show();
    QApplication::processEvents();
    w.resizeDocks({w.inspector_dock()}, {560}, Qt::Vertical); // grid and chart whole
    QApplication::processEvents();
    return save(w, dir + "/inspector.png") ? 0 : 1;
}

} // namespace spanscope::gui
