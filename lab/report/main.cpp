// spanscope-report: evaluation results (JSON Lines from `spanscope-lab eval --out` and
// `pic-eval --out`) as Markdown tables and PNG plots, drawn offscreen (no display is needed).
//
// With --curves, also the zoom-in training curves of `spanscope-lab zoom-train --curves FILE`
// (issue 8); the result files are then optional.
//
//   spanscope-report --out-dir DIR [--title T] [--curves CURVES.jsonl]... [FILE.jsonl...]
//
// Writes DIR/report.md and the plots beside it. Exit 0 ok, 1 unreadable or malformed input, no
// result rows or curve lines, or an output that cannot be written, 2 bad arguments; errors are
// one line on stderr.
#include "lab/report/report_curves.h"
#include "lab/report/report_curves_plot.h"
#include "lab/report/report_data.h"
#include "lab/report/report_markdown.h"
#include "lab/report/report_plots.h"

#include <QCommandLineParser>
#include <QDir>
#include <QGuiApplication>
#include <QSaveFile>

#include <cstdio>
#include <exception>
#include <optional>

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
        QStringLiteral("Turn evaluation results (JSON Lines written by spanscope-lab eval --out) "
                       "into DIR/report.md (accuracy tables with 95 % confidence intervals, a "
                       "summary per budget, fidelity) and PNG plots (accuracy heat maps, "
                       "accuracy against fast-tier memory); with --curves, also the zoom-in "
                       "training curves (a table of the held-out losses and a PNG per "
                       "component)."));
    const QCommandLineOption help = p.addHelpOption();
    const QCommandLineOption version = p.addVersionOption();
    const QCommandLineOption out_dir(
        QStringLiteral("out-dir"),
        QStringLiteral("Folder to write report.md and the PNG files to (created if needed)."),
        QStringLiteral("dir"));
    const QCommandLineOption title(
        QStringLiteral("title"),
        QStringLiteral("Title of report.md (default: %1, or %2 with only --curves).")
            .arg(QStringLiteral("Evaluation report"), QStringLiteral("Training report")),
        QStringLiteral("text"));
    const QCommandLineOption curves_option(
        QStringLiteral("curves"),
        QStringLiteral("Training curves written by spanscope-lab zoom-train --curves (JSON "
                       "Lines); repeat for several files. Adds their section to report.md and "
                       "zoom-train-<component>.png; a split and step repeated within or across "
                       "them counts once (the last line wins)."),
        QStringLiteral("FILE.jsonl"));
    p.addOptions({out_dir, title, curves_option});
    p.addPositionalArgument(QStringLiteral("FILE.jsonl"),
                            QStringLiteral("Result files (optional with --curves); a sample "
                                           "repeated within or across them counts once (the "
                                           "last line wins)."),
                            QStringLiteral("[FILE.jsonl...]"));

    if (!p.parse(QGuiApplication::arguments()))
        return fail(2, p.errorText() + QStringLiteral(" (see --help)"));
    if (p.isSet(help) || p.isSet(QStringLiteral("help-all")))
        p.showHelp(0);
    if (p.isSet(version))
        p.showVersion();
    if (!p.isSet(out_dir) || p.value(out_dir).isEmpty())
        return fail(2, QStringLiteral("--out-dir DIR is required (see --help)"));
    const QStringList files = p.positionalArguments();
    const QStringList curve_files = p.values(curves_option);
    if (files.isEmpty() && curve_files.isEmpty())
        return fail(2, QStringLiteral("no result file and no --curves file given (see --help)"));
    for (const auto& f : curve_files)
        if (f.isEmpty())
            return fail(2, QStringLiteral("--curves needs a file name (see --help)"));

    // Everything is read and checked before anything is written.
    LoadedResults loaded;
    std::optional<Curves> curves;
    try {
        const auto paths_of = [](const QStringList& list) {
            std::vector<std::string> paths;
            for (const auto& f : list)
                paths.push_back(f.toStdString());
            return paths;
        };
        if (!files.isEmpty())
            loaded = load_results(paths_of(files));
        if (!curve_files.isEmpty())
            curves = load_curves(paths_of(curve_files));
    } catch (const InputError& e) {
        return fail(1, QString::fromStdString(e.what()));
    }

    const QString dir = p.value(out_dir);
    if (!QDir().mkpath(dir))
        return fail(1, QStringLiteral("cannot create %1").arg(dir));
    const std::string report_title =
        p.isSet(title) ? p.value(title).toStdString()
                       : (files.isEmpty() ? "Training report" : "Evaluation report");
    std::string md;
    size_t plot_count = 0;
    try {
        if (!files.isEmpty()) {
            const Report report = aggregate(loaded);
            const std::vector<PlotSpec> plots = plan_plots(report);
            write_plots(report, plots, dir);
            md = render_markdown(loaded, report, report_title, plots);
            plot_count += plots.size();
        } else {
            md = "# " + report_title + "\n";
        }
        if (curves) {
            plot_count += write_curve_plots(*curves, dir).size();
            md += '\n';
            md += render_curves_markdown(*curves);
        }
    } catch (const std::exception& e) {
        return fail(1, QString::fromStdString(e.what()));
    }
    const QString md_path = QDir(dir).filePath(QStringLiteral("report.md"));
    QSaveFile out(md_path);
    if (!out.open(QIODevice::WriteOnly) ||
        out.write(md.data(), static_cast<qint64>(md.size())) != static_cast<qint64>(md.size()) ||
        !out.commit())
        return fail(1, QStringLiteral("cannot write %1: %2").arg(md_path, out.errorString()));
    std::printf("wrote %s and %zu plots (", md_path.toLocal8Bit().constData(), plot_count);
    if (!files.isEmpty())
        std::printf("%zu result rows; duplicate lines counted once: %d%s", loaded.rows.size(),
                    loaded.duplicates, curves ? "; " : "");
    if (curves)
        std::printf("%zu training steps, %zu held-out evaluations; repeated lines counted once: %d",
                    curves->train.size(), curves->held_out.size(), curves->duplicates);
    std::printf(")\n");
    return 0;
}
