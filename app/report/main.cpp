// spanscope-report: evaluation results (JSON Lines from `spanscope-cli eval --out` and
// `pic-eval --out`) as Markdown tables and PNG plots, drawn offscreen (no display is needed).
//
//   spanscope-report --out-dir DIR [--title T] FILE.jsonl...
//
// Writes DIR/report.md and the plots beside it. Exit 0 ok, 1 unreadable or malformed input, no
// result rows or an output that cannot be written, 2 bad arguments; errors are one line on
// stderr.
#include "report_data.h"
#include "report_markdown.h"
#include "report_plots.h"

#include <QCommandLineParser>
#include <QDir>
#include <QGuiApplication>
#include <QSaveFile>

#include <cstdio>
#include <exception>

using namespace spanscope::report;

namespace {

/// One line on stderr, then the exit code.
int fail(int code, const QString& message) {
    QString line = message;
    line.replace(QLatin1Char('\n'), QLatin1Char(' '));
    std::fprintf(stderr, "spanscope-report: %s\n", line.toLocal8Bit().constData());
    return code;
}

/// Qt's offscreen platform may warn about things that do not matter for images (e.g. an unset
/// XDG_RUNTIME_DIR); only critical messages reach stderr.
void quiet_handler(QtMsgType type, const QMessageLogContext&, const QString& message) {
    if (type == QtCriticalMsg || type == QtFatalMsg)
        std::fprintf(stderr, "spanscope-report: %s\n", message.toLocal8Bit().constData());
}

} // namespace

int main(int argc, char** argv) {
    // The report never shows a window: the offscreen platform gives fonts without a display.
    qputenv("QT_QPA_PLATFORM", "offscreen");
    qInstallMessageHandler(quiet_handler);
    QGuiApplication app(argc, argv);
    QGuiApplication::setApplicationName(QStringLiteral("spanscope-report"));
    QGuiApplication::setApplicationVersion(QStringLiteral(SPANSCOPE_VERSION));

    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral("Turn evaluation results (JSON Lines written by spanscope-cli eval --out) "
                       "into DIR/report.md (accuracy tables with 95 % confidence intervals, a "
                       "summary per budget, fidelity) and PNG plots (accuracy heat maps, "
                       "accuracy against fast-tier memory)."));
    const QCommandLineOption help = p.addHelpOption();
    const QCommandLineOption version = p.addVersionOption();
    const QCommandLineOption out_dir(
        QStringLiteral("out-dir"),
        QStringLiteral("Folder to write report.md and the PNG files to (created if needed)."),
        QStringLiteral("dir"));
    const QCommandLineOption title(QStringLiteral("title"),
                                   QStringLiteral("Title of report.md (default: %1).")
                                       .arg(QStringLiteral("Evaluation report")),
                                   QStringLiteral("text"), QStringLiteral("Evaluation report"));
    p.addOptions({out_dir, title});
    p.addPositionalArgument(QStringLiteral("FILE.jsonl"),
                            QStringLiteral("Result files; a sample repeated within or across "
                                           "them counts once (the last line wins)."),
                            QStringLiteral("FILE.jsonl..."));

    if (!p.parse(QGuiApplication::arguments()))
        return fail(2, p.errorText() + QStringLiteral(" (see --help)"));
    if (p.isSet(help) || p.isSet(QStringLiteral("help-all")))
        p.showHelp(0);
    if (p.isSet(version))
        p.showVersion();
    if (!p.isSet(out_dir) || p.value(out_dir).isEmpty())
        return fail(2, QStringLiteral("--out-dir DIR is required (see --help)"));
    const QStringList files = p.positionalArguments();
    if (files.isEmpty())
        return fail(2, QStringLiteral("no result file given (see --help)"));

    LoadedResults loaded;
    try {
        std::vector<std::string> paths;
        for (const auto& f : files)
            paths.push_back(f.toStdString());
        loaded = load_results(paths);
    } catch (const InputError& e) {
        return fail(1, QString::fromStdString(e.what()));
    }

    const QString dir = p.value(out_dir);
    if (!QDir().mkpath(dir))
        return fail(1, QStringLiteral("cannot create %1").arg(dir));
    const Report report = aggregate(loaded);
    const std::vector<PlotSpec> plots = plan_plots(report);
    try {
        write_plots(report, plots, dir);
    } catch (const std::exception& e) {
        return fail(1, QString::fromStdString(e.what()));
    }
    const std::string md = render_markdown(loaded, report, p.value(title).toStdString(), plots);
    const QString md_path = QDir(dir).filePath(QStringLiteral("report.md"));
    QSaveFile out(md_path);
    if (!out.open(QIODevice::WriteOnly) ||
        out.write(md.data(), static_cast<qint64>(md.size())) != static_cast<qint64>(md.size()) ||
        !out.commit())
        return fail(1, QStringLiteral("cannot write %1: %2").arg(md_path, out.errorString()));
    std::printf("wrote %s and %zu plots (%zu result rows; duplicate lines counted once: %d)\n",
                md_path.toLocal8Bit().constData(), plots.size(), loaded.rows.size(),
                loaded.duplicates);
    return 0;
}
