// spanscope: the desktop application. `spanscope [FILE…]` opens the window; .spanscope files
// are projects, other files documents added to the project (--project, else the default one).
#include "storage/project.h"
#include "ui/app_settings.h"
#include "ui/main_window.h"
#include "ui/screenshots.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QTimer>

#include <cstdio>
#include <cstring>
#include <memory>

using namespace spanscope::gui;

namespace {
bool has_display() {
    return !qEnvironmentVariableIsEmpty("DISPLAY") ||
           !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") ||
           !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM");
}
} // namespace

namespace {
// Qt's offscreen platform warns about window size hints it cannot pass on, and QStandardPaths
// about an unset XDG_RUNTIME_DIR (usual over ssh): neither matters here.
QtMessageHandler g_default_handler = nullptr;
void quiet_handler(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    if (type == QtWarningMsg &&
        (message.contains(QLatin1String("propagateSizeHints")) ||
         message.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR"))))
        return;
    g_default_handler(type, context, message);
}
} // namespace

int main(int argc, char** argv) {
    g_default_handler = qInstallMessageHandler(quiet_handler);
    // The platform is chosen before QApplication exists: offscreen for --screenshots and on a
    // machine without a display (the window is then saved as a PNG instead of shown).
    bool screenshots = false;
    for (int i = 1; i < argc; ++i)
        screenshots = screenshots || std::strcmp(argv[i], "--screenshots") == 0;
    const bool headless = !screenshots && !has_display();
    if (screenshots || headless)
        qputenv("QT_QPA_PLATFORM", "offscreen");

    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Spanscope"));
    QApplication::setApplicationName(QStringLiteral("spanscope"));
    QApplication::setApplicationDisplayName(QStringLiteral("Spanscope"));
    QApplication::setApplicationVersion(QStringLiteral(SPANSCOPE_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("org.spanscope.Spanscope"));

    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral("Read long documents and ask questions about them with a local model."));
    const QCommandLineOption help = p.addHelpOption();
    const QCommandLineOption version = p.addVersionOption();
    p.addPositionalArgument(QStringLiteral("FILE"),
                            QStringLiteral("Documents to add, or a .spanscope project to open."),
                            QStringLiteral("[FILE…]"));
    QCommandLineOption project({QStringLiteral("p"), QStringLiteral("project")},
                               QStringLiteral("Project NAME (in the data directory) or PATH."),
                               QStringLiteral("project"));
    QCommandLineOption model(QStringLiteral("model"), QStringLiteral("Model file (GGUF)."),
                             QStringLiteral("path"));
    QCommandLineOption ask(QStringLiteral("ask"),
                           QStringLiteral("Ask QUESTION once the documents are ready."),
                           QStringLiteral("question"));
    QCommandLineOption shots(QStringLiteral("screenshots"),
                             QStringLiteral("Render the main window in typical states into PNG "
                                            "files in DIR (offscreen) and exit."),
                             QStringLiteral("dir"));
    p.addOptions({project, model, ask, shots});
    // parse() rather than process(): a bad argument exits 2, as documented (process() exits 1).
    if (!p.parse(QCoreApplication::arguments())) {
        std::fprintf(stderr, "spanscope: %s (see --help)\n", qPrintable(p.errorText()));
        return 2;
    }
    if (p.isSet(help))
        p.showHelp(0);
    if (p.isSet(version))
        p.showVersion();

    if (p.isSet(project) && p.value(project).trimmed().isEmpty()) {
        std::fprintf(stderr, "spanscope: --project needs a project name or path\n");
        return 2;
    }
    if (p.isSet(ask) && p.value(ask).trimmed().isEmpty()) {
        std::fprintf(stderr, "spanscope: the question given with --ask is empty\n");
        return 2;
    }
    AppSettings settings = AppSettings::load();
    if (p.isSet(model))
        settings.model_override = QFileInfo(p.value(model)).absoluteFilePath();
    QStringList documents, projects;
    for (const auto& f : p.positionalArguments())
        (f.endsWith(QStringLiteral(".spanscope")) ? projects : documents) << f;

    if (p.isSet(shots)) {
        if (documents.isEmpty())
            documents << QStringLiteral("/usr/share/common-licenses/GPL-3");
        return render_screenshots(
            p.value(shots), documents,
            p.isSet(ask)
                ? p.value(ask)
                : QStringLiteral("Which organization holds the copyright on the text of this "
                                 "license?"),
            settings);
    }

    MainWindow w(settings);
    w.show();
    if (headless)
        std::fprintf(stderr,
                     "spanscope: no display ($DISPLAY and $WAYLAND_DISPLAY are unset): "
                     "running offscreen%s\n",
                     p.isSet(ask) ? "; the answer is printed and the window saved as "
                                    "spanscope-window.png"
                                  : "");

    QString project_path;
    if (p.isSet(project))
        project_path =
            QString::fromStdString(spanscope::resolve_project_path(p.value(project).toStdString()));
    else if (!projects.isEmpty())
        project_path = projects.first();
    else if (!documents.isEmpty() || settings.recent_projects.isEmpty()) {
        if (!documents.isEmpty()) {
            QDir().mkpath(default_project_dir());
            project_path = default_project_dir() + QStringLiteral("/default.spanscope");
        }
    } else if (QFileInfo::exists(settings.recent_projects.first())) {
        project_path = settings.recent_projects.first();
    }
    if (!project_path.isEmpty())
        w.open_project(project_path, !documents.isEmpty() || p.isSet(project));
    if (headless) {
        // Files that could not be added say why (the others go on).
        QObject::connect(&w, &MainWindow::ingest_done, &w, [&w](int, int failed, bool) {
            for (int r = 0; failed > 0 && r < w.document_model()->rowCount(); ++r)
                if (w.document_model()->row(r).status == DocumentRow::Status::Failed)
                    std::fprintf(stderr, "spanscope: %s\n",
                                 qPrintable(w.document_model()->row(r).error));
        });
    }
    w.add_documents(documents);

    if (p.isSet(ask)) {
        const QString question = p.value(ask);
        auto go = [&w, question] { w.ask(question); };
        if (!documents.isEmpty()) {
            // Asked about the files named, not every document of the (default) project.
            QObject::connect(
                &w, &MainWindow::ingest_done, &w,
                [&w, go, documents] {
                    w.check_only(documents);
                    go();
                },
                Qt::SingleShotConnection);
        } else if (!project_path.isEmpty()) {
            QObject::connect(
                &w, &MainWindow::project_ready, &w,
                [go](qint64 restored) {
                    if (restored >= 0) // a project that failed to open is reported as such
                        go();
                },
                Qt::SingleShotConnection);
        } else {
            QTimer::singleShot(0, &w, go); // nothing to ask about: refused, in words
        }
        if (headless) {
            // Nobody sees the progress bar: one line per stored chunk on stderr.
            QObject::connect(&w, &MainWindow::ingest_progressed, &w, [](const IngestStatus& st) {
                if (st.ocr_page_count > 0) {
                    std::fprintf(stderr, "%s: reading page %d of %d by OCR (no text layer)\n",
                                 qPrintable(st.name), st.ocr_page, st.ocr_page_count);
                    return;
                }
                static qint64 last = -1;
                if (st.chunk == last)
                    return;
                last = st.chunk;
                if (st.chunk == 0)
                    std::fprintf(stderr, "%s: prefilling %lld chunks\n", qPrintable(st.name),
                                 static_cast<long long>(st.chunks));
                else
                    std::fprintf(
                        stderr, "%s: %lld of %lld chunks prefilled, %.0f tokens/s, %.0f s left\n",
                        qPrintable(st.name), static_cast<long long>(st.chunk),
                        static_cast<long long>(st.chunks), st.tokens_per_s, st.seconds_left);
            });
            auto finish = [&w](int code) {
                static bool finished = false; // one report, however many signals follow
                if (finished)
                    return;
                finished = true;
                const bool ok = w.grab().save(QStringLiteral("spanscope-window.png"), "PNG");
                std::fprintf(stderr, "spanscope: %s spanscope-window.png\n",
                             ok ? "saved the window as" : "could not save");
                QApplication::exit(code);
            };
            // The picture shows the window as a user sees it once SEKV has answered: the
            // answer's zoom loaded from the saved trace and the document's spans drawn (either
            // may come before the answer ends); at most 30 s later it is taken as it is.
            struct Shown {
                bool answered = false, sekv = false, zoom = false, spans = false;
            };
            auto shown = std::make_shared<Shown>();
            auto maybe_finish = [shown, finish] {
                if (shown->answered && (!shown->sekv || (shown->zoom && shown->spans)))
                    finish(0);
            };
            QObject::connect(&w, &MainWindow::zoom_loaded, &w, [shown, maybe_finish](qint64, bool) {
                shown->zoom = true;
                maybe_finish();
            });
            QObject::connect(&w, &MainWindow::document_spans_shown, &w, [shown, maybe_finish] {
                shown->spans = true;
                maybe_finish();
            });
            QObject::connect(&w, &MainWindow::answer_done, &w,
                             [finish, shown, maybe_finish, &w](const AnswerStats& s) {
                                 std::printf("%s\n", qPrintable(s.text));
                                 std::fprintf(stderr, "(%s)\n", qPrintable(stats_text(s)));
                                 shown->answered = true;
                                 shown->sekv = s.policy == QLatin1String("sekv");
                                 QTimer::singleShot(30000, &w, [finish] { finish(0); });
                                 maybe_finish();
                             });
            QObject::connect(&w, &MainWindow::answer_error, &w, [finish](const QString& m) {
                std::fprintf(stderr, "spanscope: %s\n", qPrintable(m));
                finish(1);
            });
            QObject::connect(&w, &MainWindow::model_ready, &w, [finish, &w](bool ok) {
                if (!ok) {
                    std::fprintf(stderr, "spanscope: %s\n", qPrintable(w.banner_text()));
                    finish(1);
                }
            });
            QObject::connect(&w, &MainWindow::project_ready, &w, [finish, &w](qint64 restored) {
                if (restored < 0) {
                    std::fprintf(stderr, "spanscope: %s\n", qPrintable(w.banner_text()));
                    finish(1);
                }
            });
        }
    } else if (headless) {
        std::fprintf(stderr, "spanscope: without a display there is nothing to show; use --ask "
                             "QUESTION (or --screenshots DIR) to run offscreen.\n");
        return 2;
    }
    return QApplication::exec();
}
