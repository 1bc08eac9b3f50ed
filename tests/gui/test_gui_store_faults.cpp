// The desktop application's store worker under faults: its writes (a chat renamed, the document
// order kept) and the Markdown export on a full disk (a file size limit set in this process,
// SIGXFSZ ignored, so write() fails with EFBIG), the project's folder removed or renamed while it
// is open, and spanscope-cli adding a document while the worker reads and writes the project.
// Each fault is reported in words naming the file and the cause, loses nothing committed and
// leaves no half-written file; afterwards the worker works again.
#include "project_faults.h"
#include "storage/project.h"
#include "tiny_model.h"
#include "ui/store_worker.h"

#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::gui;
using namespace spanscope::test;

namespace {

/// A project with one document and two chats of two messages each; returns the chats' ids.
std::vector<int64_t> make_project(const std::string& path, const std::string& doc_path) {
    auto p = Project::open(path, /*create=*/true);
    p->add_document(doc_path, text_document(read_file(doc_path)));
    std::vector<int64_t> chats;
    for (const char* title : {"First", "Second"}) {
        const int64_t c = p->create_chat(title);
        p->add_message(c, "user", std::string("A question of ") + title + "?");
        // An answer long enough that its export is several KiB.
        p->add_message(c, "assistant", sample_prose(13, 6000), "{}");
        chats.push_back(c);
    }
    return chats;
}

} // namespace

class GuiStoreFaults : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        register_gui_types();
    }
    void writesOnAFullDiskSayWhyAndLoseNothing();
    void exportOnAFullDiskLeavesNoFile();
    void exportKeepsTheUmaskOrTheReplacedFilesMode();
    void exportThroughASymbolicLinkWritesItsTarget();
    void folderRemovedOrRenamedWhileOpen();
    void cliIngestWhileTheWorkerUsesTheProject();
};

void GuiStoreFaults::writesOnAFullDiskSayWhyAndLoseNothing() {
    TempDir dir;
    const std::string doc = dir.file("notes.txt"), p = dir.file("p.spanscope");
    std::ofstream(doc, std::ios::binary) << sample_prose(2, 800);
    const auto chats = make_project(p, doc);
    StoreWorker w;
    QSignalSpy errors(&w, &StoreWorker::error);
    QSignalSpy listed(&w, &StoreWorker::chats_listed);
    w.open_project(QString::fromStdString(p));
    w.list_chats();
    QCOMPARE(errors.count(), 0);
    // A second program writes meanwhile, so the log is not reset under the worker: its next
    // write goes past the log's end, where the limit stops it.
    {
        auto other = Project::open(p, false);
        const std::string big = dir.file("big.txt");
        std::ofstream(big, std::ios::binary) << sample_prose(21, 120000);
        other->add_document(big, text_document(read_file(big)));
        const auto before = dump_project(p);
        const int64_t wal = file_bytes(p + "-wal");
        QVERIFY2(wal > (40 << 10), "the log should have grown");
        {
            FileSizeLimit limit(wal + 1);
            w.rename_chat(chats[0], QStringLiteral("Renamed on a full disk"));
            w.save_document_list({2, 1}, {2});
        }
        QCOMPARE(errors.count(), 2);
        for (const auto& e : errors) {
            const QString m = e[0].toString();
            qInfo("%s", qPrintable(m));
            QVERIFY2(m.contains(QString::fromStdString(p)), qPrintable(m));
            QVERIFY2(m.contains(QStringLiteral("file size limit (ulimit -f)")) &&
                         !m.contains(QStringLiteral("Free some space")),
                     qPrintable(m));
        }
        QCOMPARE(QString::fromStdString(integrity_of(p)), QStringLiteral("ok"));
        QVERIFY(rows_lost(before, dump_project(p)).empty());
        QCOMPARE(dump_project(p), before);
    }
    // The fault gone: the same rename works.
    errors.clear();
    w.rename_chat(chats[0], QStringLiteral("Renamed later"));
    QCOMPARE(errors.count(), 0);
    QVERIFY(!listed.isEmpty());
    const auto rows = listed.back()[0].value<QList<ChatRow>>();
    QCOMPARE(rows.size(), 2);
    QCOMPARE(rows[0].title, QStringLiteral("Renamed later"));
}

void GuiStoreFaults::exportOnAFullDiskLeavesNoFile() {
    TempDir dir;
    const std::string doc = dir.file("notes.txt"), p = dir.file("p.spanscope");
    std::ofstream(doc, std::ios::binary) << sample_prose(2, 800);
    const auto chats = make_project(p, doc);
    const std::string out = dir.file("export");
    std::filesystem::create_directory(out);
    const QString target = QString::fromStdString(out + "/chat.md");
    const QString kept = QString::fromStdString(out + "/kept.md");
    const std::string earlier = "an earlier export\n";
    std::ofstream(kept.toStdString(), std::ios::binary) << earlier;
    StoreWorker w;
    QSignalSpy errors(&w, &StoreWorker::error);
    QSignalSpy exported(&w, &StoreWorker::chat_exported);
    w.open_project(QString::fromStdString(p));
    const auto before = dump_project(p);
    {
        FileSizeLimit limit(2048); // the Markdown is several KiB
        w.export_chat(chats[1], target);
        w.export_chat(chats[1], kept);
    }
    for (const auto& f : files_under(out))
        qInfo("after the export on a full disk: %s, %lld bytes", f.c_str(),
              static_cast<long long>(file_bytes(out + "/" + f)));
    QCOMPARE(exported.count(), 0);
    QCOMPARE(errors.count(), 2);
    for (const auto& e : errors) {
        const QString m = e[0].toString();
        qInfo("%s", qPrintable(m));
        QVERIFY2(m.contains(QStringLiteral("file size limit (ulimit -f)")) &&
                     !m.contains(QStringLiteral("Free some space")),
                 qPrintable(m));
    }
    QVERIFY(errors[0][0].toString().contains(target));
    // Nothing under the target's name, no temporary file left, the earlier export unchanged.
    QCOMPARE(files_under(out), std::vector<std::string>{"kept.md"});
    QCOMPARE(read_file(kept.toStdString()), earlier);
    QCOMPARE(dump_project(p), before);
    // The fault gone: the export is written whole.
    w.export_chat(chats[1], target);
    QCOMPARE(exported.count(), 1);
    QVERIFY(read_file(target.toStdString()).size() > 6000);
}

void GuiStoreFaults::exportKeepsTheUmaskOrTheReplacedFilesMode() {
    TempDir dir;
    const std::string doc = dir.file("notes.txt"), p = dir.file("p.spanscope");
    std::ofstream(doc, std::ios::binary) << sample_prose(2, 800);
    const auto chats = make_project(p, doc);
    const std::string created = dir.file("created.md"), replaced = dir.file("replaced.md");
    std::ofstream(replaced, std::ios::binary) << "an earlier export\n";
    QCOMPARE(::chmod(replaced.c_str(), 0640), 0);
    StoreWorker w;
    QSignalSpy errors(&w, &StoreWorker::error);
    QSignalSpy exported(&w, &StoreWorker::chat_exported);
    w.open_project(QString::fromStdString(p));
    // A new file gets 0666 less the umask; a file replaced keeps its mode.
    struct Umask {
        mode_t old = ::umask(077);
        ~Umask() { ::umask(old); }
    } umask_077;
    w.export_chat(chats[1], QString::fromStdString(created));
    w.export_chat(chats[1], QString::fromStdString(replaced));
    QCOMPARE(errors.count(), 0);
    QCOMPARE(exported.count(), 2);
    struct stat st {};
    QCOMPARE(::stat(created.c_str(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t{0600});
    QCOMPARE(::stat(replaced.c_str(), &st), 0);
    QCOMPARE(st.st_mode & 07777, mode_t{0640});
    QCOMPARE(read_file(replaced), read_file(created));
    QVERIFY(read_file(created).size() > 6000);
}

void GuiStoreFaults::exportThroughASymbolicLinkWritesItsTarget() {
    TempDir dir;
    const std::string doc = dir.file("notes.txt"), p = dir.file("p.spanscope");
    std::ofstream(doc, std::ios::binary) << sample_prose(2, 800);
    const auto chats = make_project(p, doc);
    const std::string target = dir.file("target.md"), link = dir.file("link.md");
    const std::string reference = dir.file("reference.md");
    std::ofstream(target, std::ios::binary) << "an earlier export\n";
    std::filesystem::create_symlink("target.md", link);
    StoreWorker w;
    QSignalSpy errors(&w, &StoreWorker::error);
    QSignalSpy exported(&w, &StoreWorker::chat_exported);
    w.open_project(QString::fromStdString(p));
    w.export_chat(chats[1], QString::fromStdString(reference));
    w.export_chat(chats[1], QString::fromStdString(link));
    QCOMPARE(errors.count(), 0);
    QCOMPARE(exported.count(), 2);
    // The link is still a link to the same name; its target holds the export.
    QVERIFY(std::filesystem::is_symlink(link));
    QCOMPARE(std::filesystem::read_symlink(link).string(), std::string("target.md"));
    QVERIFY(read_file(reference).size() > 6000);
    QCOMPARE(read_file(target), read_file(reference));
    // No temporary file left beside either name.
    for (const auto& f : files_under(dir.path))
        QVERIFY2(f.rfind("target.md.", 0) != 0 && f.rfind("link.md.", 0) != 0, f.c_str());
}

void GuiStoreFaults::folderRemovedOrRenamedWhileOpen() {
    TempDir dir;
    const std::string doc = dir.file("notes.txt");
    std::ofstream(doc, std::ios::binary) << sample_prose(2, 800);
    for (const bool rename : {true, false}) {
        const std::string folder = dir.file(rename ? "renamed" : "removed");
        std::filesystem::create_directory(folder);
        const std::string p = folder + "/p.spanscope";
        const auto chats = make_project(p, doc);
        StoreWorker w;
        QSignalSpy errors(&w, &StoreWorker::error);
        QSignalSpy loaded(&w, &StoreWorker::chat_loaded);
        w.open_project(QString::fromStdString(p));
        if (rename)
            std::filesystem::rename(folder, dir.file("moved"));
        else
            std::filesystem::remove_all(folder);
        // Reading what is open still works; a write is refused in words.
        w.load_chat(chats[0]);
        QCOMPARE(loaded.count(), 1);
        w.rename_chat(chats[0], QStringLiteral("After the folder went"));
        QCOMPARE(errors.count(), 1);
        const QString m = errors[0][0].toString();
        qInfo("%s", qPrintable(m));
        QVERIFY2(m.contains(QString::fromStdString(p)), qPrintable(m));
        QVERIFY2(m.contains(QStringLiteral("moved or removed")), qPrintable(m));
        w.close_project();
        QVERIFY2(!std::filesystem::exists(folder), "the folder was made anew");
        if (rename) {
            const std::string moved = dir.file("moved") + "/p.spanscope";
            QCOMPARE(QString::fromStdString(integrity_of(moved)), QStringLiteral("ok"));
            QCOMPARE(dump_project(moved).at("chats").size(), size_t{2});
        }
    }
}

void GuiStoreFaults::cliIngestWhileTheWorkerUsesTheProject() {
    TempDir dir;
    const std::string model = write_fault_model(dir.file("tiny.gguf"));
    const std::string a = write_prose(dir.file("a.txt"), 5, 900);
    const std::string b = write_prose(dir.file("b.txt"), 6, 2200);
    const std::string ref = dir.file("reference.spanscope"), p = dir.file("p.spanscope");
    QCOMPARE(run_cli_in(dir.path, ingest_args(ref, model, a)).status, 0);
    QCOMPARE(run_cli_in(dir.path, ingest_args(ref, model, b)).status, 0);
    QCOMPARE(run_cli_in(dir.path, ingest_args(p, model, a)).status, 0);
    int64_t chat = 0;
    {
        auto project = Project::open(p, false);
        chat = project->create_chat("While ingesting");
        project->add_message(chat, "user", "What is stored?");
    }
    StoreWorker w;
    QSignalSpy errors(&w, &StoreWorker::error);
    QSignalSpy texts(&w, &StoreWorker::document_text);
    w.open_project(QString::fromStdString(p));
    const pid_t pid = start_cli(ingest_args(p, model, b), dir.file("out"), dir.file("err"));
    int rounds = 0;
    for (;;) {
        w.rename_chat(chat, QStringLiteral("Round %1").arg(rounds));
        w.save_document_list({1}, {});
        w.load_document_text(1);
        w.load_chat(chat);
        ++rounds;
        siginfo_t info{};
        if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid)
            break;
    }
    const auto r = finish_cli(pid, dir.file("out"), dir.file("err"));
    qInfo("%d rounds of the worker's reads and writes while the ingest ran; the ingest: exit %d",
          rounds, r.status);
    QVERIFY2(r.status == 0, r.err.c_str());
    for (const auto& e : errors) // a write that waited too long says so, nothing else fails
        QVERIFY2(e[0].toString().contains(QStringLiteral("another program")),
                 qPrintable(e[0].toString()));
    QCOMPARE(QString::fromStdString(integrity_of(p)), QStringLiteral("ok"));
    QVERIFY(state_differences(states_by_chunk(ref), states_by_chunk(p)).empty());
    // The worker sees the new document.
    w.load_document_text(2);
    QVERIFY(!texts.isEmpty());
    QCOMPARE(texts.back()[0].toLongLong(), qint64{2});
    QCOMPARE(texts.back()[1].toString(), QStringLiteral("b.txt"));
}

QTEST_MAIN(GuiStoreFaults)
#include "test_gui_store_faults.moc"
