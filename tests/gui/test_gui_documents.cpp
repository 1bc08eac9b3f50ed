// The documents people have, dropped on the window: a DOCX, an EPUB and a scanned PDF become
// ready documents (the scan read by OCR page by page, its pages marked in the document view), a
// damaged file fails in its row with the reason and leaves nothing in the project, and Cancel
// stops OCR. A tiny model the test writes does the prefilling (tests/unit/tiny_model.h).
#include "engine/model/model_locator.h"
#include "gui_test_support.h"
#include "storage/page_ocr.h"
#include "storage/project.h"
#include "test_support.h"
#include "tiny_model.h"
#include "ui/document_view.h"
#include "ui/main_window.h"

#include <QFile>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUrl>
#include <QtTest>

#include <filesystem>

using namespace spanscope;
using namespace spanscope::gui;

namespace {

const std::string kBashPdf = "/usr/share/doc/bash/bash.pdf"; // Debian package bash-doc
const QString kEpub = QStringLiteral("/usr/share/doc/cxxtest/guide.epub");

bool run(const std::string& command) {
    return test::run_command(command).has_value();
}

} // namespace

class GuiDocuments : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void droppedDocumentsOfEveryKindBecomeReadyAndADamagedOneSaysWhy();
    void cancelStopsOcr();

private:
    QString path(const QString& name) const { return dir_.filePath(name); }
    /// A window on the tiny model with a new project; false (reason in `why`) on failure.
    bool open_window(std::unique_ptr<MainWindow>& w, const QString& project, QString* why);
    /// Pages first..last of bash.pdf as an image-only PDF (pdftoppm, img2pdf); "" on failure.
    QString scan(int first, int last, const QString& name);
    QTemporaryDir dir_;
    QString model_;
    QString missing_; ///< why the scans or the pandoc file cannot be made, "" when they can
};

void GuiDocuments::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    model_ = path(QStringLiteral("tiny.gguf"));
    test::TinyGemma3Config c;
    c.n_ctx = 4096;
    test::write_tiny_gemma3(model_.toStdString(), c);
    if (!std::filesystem::exists(kBashPdf))
        missing_ = QString::fromStdString(kBashPdf) + " absent (Debian package bash-doc)";
    for (const char* tool : {"pdftoppm", "img2pdf", "pandoc"})
        if (missing_.isEmpty() && !test::have_program(tool))
            missing_ = QStringLiteral("%1 is not installed").arg(tool);
    if (PageOcr ocr; missing_.isEmpty() && !ocr.available())
        missing_ = QString::fromStdString(ocr.unavailable_reason());
}

bool GuiDocuments::open_window(std::unique_ptr<MainWindow>& w, const QString& project,
                               QString* why) {
    AppSettings s;
    s.model_path = model_;
    s.threads = 1;
    s.memory.policy = QStringLiteral("full");
    return start_window(w, s, project, /*create=*/true, why);
}

QString GuiDocuments::scan(int first, int last, const QString& name) {
    const std::string prefix = path(name).toStdString() + "-page";
    const std::string out = path(name + QStringLiteral(".pdf")).toStdString();
    if (!run("pdftoppm -r 300 -gray -png -f " + std::to_string(first) + " -l " +
             std::to_string(last) + " '" + kBashPdf + "' '" + prefix + "'") ||
        !run("img2pdf '" + prefix + "'-*.png -o '" + out + "' 2>/dev/null"))
        return {};
    return QString::fromStdString(out);
}

void GuiDocuments::droppedDocumentsOfEveryKindBecomeReadyAndADamagedOneSaysWhy() {
    if (!missing_.isEmpty())
        QSKIP(qPrintable(missing_));
    const QString docx = path(QStringLiteral("field-notes.docx"));
    QVERIFY(run("pandoc '" + test::data_dir() + "/fixtures/office/field-notes.md' -o '" +
                docx.toStdString() + "'"));
    const QString scanned = scan(1, 1, QStringLiteral("scan"));
    QVERIFY(!scanned.isEmpty());
    const QString damaged = path(QStringLiteral("damaged.docx"));
    {
        QFile f(damaged);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QFile good(docx);
        QVERIFY(good.open(QIODevice::ReadOnly));
        f.write(good.readAll().left(3000)); // cut: the central directory is gone
    }
    QStringList files{damaged, docx, scanned};
    const bool have_epub = QFile::exists(kEpub);
    if (have_epub)
        files << kEpub;
    else
        qInfo("%s absent (Debian package cxxtest): the EPUB is not dropped", qPrintable(kEpub));

    std::unique_ptr<MainWindow> w;
    QString why;
    const QString project = path(QStringLiteral("docs.spanscope"));
    QVERIFY2(open_window(w, project, &why), qPrintable(why));
    // Every status a row shows on its way.
    QStringList seen;
    auto* model = w->document_model();
    connect(model, &QAbstractItemModel::dataChanged, this,
            [&](const QModelIndex& from) { seen << status_text(model->row(from.row())); });
    connect(model, &QAbstractItemModel::rowsInserted, this,
            [&](const QModelIndex&, int first) { seen << status_text(model->row(first)); });
    QSignalSpy done(w.get(), &MainWindow::ingest_done);
    QSignalSpy progressed(w.get(), &MainWindow::ingest_progressed);
    drop(*w, files);
    QVERIFY(done.wait(600000));
    // The progress bar says which file OCR reads, and which page.
    bool ocr_shown = false;
    for (const auto& p : progressed) {
        const auto st = p[0].value<IngestStatus>();
        if (st.ocr_page_count == 1 && st.ocr_page == 1 && st.name == QStringLiteral("scan.pdf"))
            ocr_shown = true;
    }
    QVERIFY(ocr_shown);
    QCOMPARE(done[0][0].toInt(), static_cast<int>(files.size()) - 1); // added
    QCOMPARE(done[0][1].toInt(), 1);                                  // failed
    QVERIFY2(seen.contains(QStringLiteral("reading page 1 of 1 by OCR (no text layer)")),
             qPrintable(seen.join(QStringLiteral(" | "))));

    int ready = 0;
    qint64 scan_id = 0;
    for (int r = 0; r < model->rowCount(); ++r) {
        const DocumentRow& row = model->row(r);
        if (row.path == damaged) {
            QCOMPARE(row.status, DocumentRow::Status::Failed);
            QVERIFY2(row.error.contains(QStringLiteral("damaged or truncated ZIP container")),
                     qPrintable(row.error));
            // The file is named once: "Adding /…/damaged.docx: is a damaged or truncated …".
            QCOMPARE(row.error.count(QStringLiteral("damaged.docx")), 1);
            QCOMPARE(row.id, qint64{0});
            continue;
        }
        QVERIFY2(row.status == DocumentRow::Status::Ready,
                 qPrintable(row.name + QStringLiteral(": ") + status_text(row)));
        ++ready;
        if (row.path == scanned) {
            scan_id = row.id;
            QVERIFY2(row.warnings.join(QStringLiteral(" ")).contains(QStringLiteral("OCR")),
                     qPrintable(row.warnings.join(QStringLiteral(" | "))));
        }
    }
    QCOMPARE(ready, static_cast<int>(files.size()) - 1);

    // The document view marks the page OCR read.
    QSignalSpy shown(w.get(), &MainWindow::document_shown);
    w->show_document(scan_id);
    QVERIFY(shown.wait(30000));
    const QString text = w->document_view()->toPlainText();
    QVERIFY2(text.startsWith(QStringLiteral("[page 1, read by OCR]\n")), qPrintable(text.left(80)));
    QVERIFY2(text.contains(QStringLiteral("Bash")), qPrintable(text.left(400)));
    w.reset();

    // The project holds the ready documents and nothing of the damaged one.
    auto p = Project::open(project.toStdString(), false);
    const auto docs = p->documents();
    QCOMPARE(static_cast<int>(docs.size()), ready);
    for (const auto& d : docs) {
        QVERIFY(d.path != damaged.toStdString());
        if (d.path == scanned.toStdString())
            QCOMPARE(d.ocr_pages, std::vector<int32_t>{1});
    }
}

void GuiDocuments::cancelStopsOcr() {
    if (!missing_.isEmpty())
        QSKIP(qPrintable(missing_));
    const QString scanned = scan(1, 4, QStringLiteral("long-scan"));
    QVERIFY(!scanned.isEmpty());
    std::unique_ptr<MainWindow> w;
    QString why;
    const QString project = path(QStringLiteral("cancel.spanscope"));
    QVERIFY2(open_window(w, project, &why), qPrintable(why));
    auto* model = w->document_model();
    QSignalSpy done(w.get(), &MainWindow::ingest_done);
    w->add_documents({scanned});
    // Cancel once OCR is on its first page: it stops there, not after four pages.
    QTRY_VERIFY_WITH_TIMEOUT(model->rowCount() == 1 && model->row(0).ocr_page_count == 4, 120000);
    QElapsedTimer clock;
    clock.start();
    w->cancel_ingest();
    QVERIFY(done.wait(120000));
    QCOMPARE(done[0][2].toBool(), true);
    QCOMPARE(model->row(0).status, DocumentRow::Status::Cancelled);
    qInfo("OCR stopped %lld ms after Cancel", static_cast<long long>(clock.elapsed()));
    // The stop within the page is the unit test's (test_document_ocr); here: the row and the
    // project after it.
    w.reset();
    auto p = Project::open(project.toStdString(), false);
    QVERIFY(p->documents().empty());
}

QTEST_MAIN(GuiDocuments)
#include "test_gui_documents.moc"
