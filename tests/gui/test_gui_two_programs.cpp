// The whole desktop application beside another program and on a full disk: a window ingesting a
// document dropped on it while spanscope-cli ingests another into the same project (both finish,
// or the one that has to wait too long says so and the same action repeated completes it; every
// chunk state is then byte for byte what each program stores alone, and the window's list shows
// both documents), and the engine worker saving an answer when the disk is full (a file size
// limit set in this process, SIGXFSZ ignored, so write() fails with EFBIG): the window says why,
// nothing saved before is lost, and once the limit is raised the same question is answered and
// saved. A tiny model the test writes does the prefilling and answering (tests/unit/tiny_model.h).
// And a project another program changed so that its document list cannot be read: the engine
// worker says why once, not at every look, and keeps the list it showed.
#include "answering/project_settings.h"
#include "gui_test_support.h"
#include "project_faults.h"
#include "storage/project.h"
#include "tiny_model.h"
#include "ui/engine_worker.h"
#include "ui/gui_types.h"
#include "ui/main_window.h"

#include <QSignalSpy>
#include <QStandardPaths>
#include <QUrl>
#include <QtTest>

#include <signal.h>

#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::gui;
using namespace spanscope::test;

namespace {

/// The row of the window's document list for `path`, or nullptr.
const DocumentRow* row_of(MainWindow& w, const std::string& path) {
    auto* m = w.document_model();
    for (int r = 0; r < m->rowCount(); ++r)
        if (m->row(r).path == QString::fromStdString(path))
            return &m->row(r);
    return nullptr;
}

/// The messages of every chat: (role, text) pairs by chat, in order.
std::map<int64_t, std::vector<std::pair<std::string, std::string>>>
chat_messages(const std::string& path) {
    Db db(path, /*create=*/false);
    std::map<int64_t, std::vector<std::pair<std::string, std::string>>> out;
    auto q = db.prepare("SELECT chat_id, role, text FROM messages ORDER BY id");
    while (q.step())
        out[q.int64(0)].emplace_back(q.text(1), q.text(2));
    return out;
}

} // namespace

class GuiTwoPrograms : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void windowAndCliIngestTheSameProjectAtOnce();
    void answerSavedOnAFullDiskSaysWhyAndLosesNothing();
    void aListThatCannotBeReadSaysWhyOnce();

private:
    /// A window on the tiny model with `project` open (created with the test's chunk size when
    /// missing); false (reason in `why`) on failure.
    bool open_window(std::unique_ptr<MainWindow>& w, const std::string& project, QString* why);
    std::vector<std::string> ingest(const std::string& project, const std::string& doc) const {
        return ingest_args(project, model_, doc);
    }
    TempDir dir_;
    std::string model_;
};

void GuiTwoPrograms::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    model_ = write_fault_model(dir_.file("tiny.gguf"));
}

bool GuiTwoPrograms::open_window(std::unique_ptr<MainWindow>& w, const std::string& project,
                                 QString* why) {
    // The chunk size is a setting of the project (answering/project_settings.h), read by the
    // window's engine as by spanscope-cli.
    {
        auto p = Project::open(project, /*create=*/true);
        set_project_chunk_tokens(*p, kFaultChunkTokens);
    }
    AppSettings s;
    s.model_path = QString::fromStdString(model_);
    s.threads = 1;
    s.memory.policy = QStringLiteral("full");
    s.generation.max_tokens = 6;
    return start_window(w, s, QString::fromStdString(project), /*create=*/false, why);
}

void GuiTwoPrograms::windowAndCliIngestTheSameProjectAtOnce() {
    TempDir dir;
    const std::string a = dir.file("a.txt"), b = dir.file("b.txt");
    std::ofstream(a, std::ios::binary) << sample_prose(5, 5000);
    std::ofstream(b, std::ios::binary) << sample_prose(6, 5000);
    // What each program stores for its document alone.
    const std::string ref_a = dir.file("ref-a.spanscope"), ref_b = dir.file("ref-b.spanscope");
    QCOMPARE(run_cli_in(dir.path, ingest(ref_a, a)).status, 0);
    QCOMPARE(run_cli_in(dir.path, ingest(ref_b, b)).status, 0);
    auto expected = states_by_chunk(ref_a);
    expected.merge(states_by_chunk(ref_b));

    const std::string p = dir.file("p.spanscope");
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, p, &why), qPrintable(why));
    QSignalSpy done(w.get(), &MainWindow::ingest_done);
    QElapsedTimer clock;
    clock.start();
    const pid_t pid = start_cli(ingest(p, b), dir.file("out"), dir.file("err"));
    // Whether spanscope-cli still runs when the window's engine starts prefilling.
    int cli_running_at_start = -1;
    const auto watch = connect(w.get(), &MainWindow::ingest_progressed, this, [&] {
        if (cli_running_at_start >= 0)
            return;
        siginfo_t info{};
        cli_running_at_start =
            waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == 0;
    });
    drop(*w, {QString::fromStdString(a)});
    const bool window_done = done.wait(60000);
    disconnect(watch);
    QVERIFY(window_done);
    const qint64 window_ms = clock.elapsed();
    siginfo_t info{};
    const bool cli_running =
        waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == 0;
    const auto cli = finish_cli(pid, dir.file("out"), dir.file("err"));
    // spanscope-cli closed the project while the window still has it open: the log stays
    // (SQLite removes it only when the last connection to the file closes).
    QVERIFY2(std::filesystem::exists(p + "-wal") && std::filesystem::exists(p + "-shm"),
             "spanscope-cli took the window's open project for closed and removed its log");
    qInfo("spanscope-cli %s when the window began prefilling; the window's ingest ended after "
          "%lld ms (spanscope-cli %s then), spanscope-cli's after %lld ms: exit %d",
          cli_running_at_start == 1 ? "was running" : "had ended",
          static_cast<long long>(window_ms), cli_running ? "still running" : "done",
          static_cast<long long>(clock.elapsed()), cli.status);
    for (const auto& l : message_lines(cli.err))
        qInfo("spanscope-cli: %s", l.c_str());

    // A program that waited too long says so in words; the same action again completes it.
    if (done[0][1].toInt() > 0) {
        const DocumentRow* row = row_of(*w, a);
        QVERIFY(row != nullptr);
        qInfo("the window's row: %s; banner: %s", qPrintable(row->error),
              qPrintable(w->banner_text()));
        QVERIFY2(row->error.contains(QStringLiteral("another program")), qPrintable(row->error));
        QVERIFY2(w->banner_text().contains(row->error), qPrintable(w->banner_text()));
        done.clear();
        w->add_documents({QString::fromStdString(a)});
        QVERIFY(done.wait(60000));
    }
    QCOMPARE(done.back()[0].toInt(), 1);
    QCOMPARE(done.back()[1].toInt(), 0);
    if (cli.status != 0) {
        QVERIFY2(cli.err.find("another program") != std::string::npos, cli.err.c_str());
        const auto again = run_cli_in(dir.path, ingest(p, b));
        QVERIFY2(again.status == 0, again.err.c_str());
    }

    QCOMPARE(QString::fromStdString(integrity_of(p)), QStringLiteral("ok"));
    const auto diff = state_differences(expected, states_by_chunk(p));
    for (size_t i = 0; i < diff.size() && i < 10; ++i)
        qInfo("%s", diff[i].c_str());
    QVERIFY2(diff.empty(), "the chunk states differ from the single-program runs'");

    // The window's list shows both documents, ready, without the project being opened again.
    QTRY_VERIFY_WITH_TIMEOUT(row_of(*w, b) != nullptr, 15000);
    for (const auto& path : {a, b}) {
        const DocumentRow* row = row_of(*w, path);
        QVERIFY2(row != nullptr, path.c_str());
        QTRY_COMPARE_WITH_TIMEOUT(row_of(*w, path)->status, DocumentRow::Status::Ready, 15000);
        QVERIFY(row_of(*w, path)->id > 0);
    }
    QCOMPARE(w->document_model()->rowCount(), 2);
    QCOMPARE(w->document_model()->checked_ids().size(), 2);
}

void GuiTwoPrograms::answerSavedOnAFullDiskSaysWhyAndLosesNothing() {
    TempDir dir;
    const std::string a = dir.file("a.txt"), p = dir.file("p.spanscope");
    std::ofstream(a, std::ios::binary) << sample_prose(9, 1500);
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, p, &why), qPrintable(why));
    QSignalSpy done(w.get(), &MainWindow::ingest_done);
    w->add_documents({QString::fromStdString(a)});
    QVERIFY(done.wait(60000));
    QCOMPARE(done[0][0].toInt(), 1);
    QSignalSpy answered(w.get(), &MainWindow::answer_done);
    QSignalSpy failed(w.get(), &MainWindow::answer_error);
    const auto ask = [&](const QString& question) {
        answered.clear();
        failed.clear();
        w->new_chat();
        w->ask(question);
        QTRY_VERIFY_WITH_TIMEOUT(answered.count() + failed.count() == 1, 30000);
    };
    ask(QStringLiteral("Where is the river?"));
    QCOMPARE(failed.count(), 0);
    // A read transaction held open here, as another program's, keeps a snapshot that the log's
    // frames past it may not be checkpointed over nor the log restarted under (SQLite's
    // automatic checkpoint could otherwise reset it between the answers), so each save writes
    // past the log's end. An answer first, unlimited, measures how far the log grows for it (the
    // question, the states' use times, the answer, each its own transaction); the same question
    // in a new chat writes as much, so a limit one byte short stops its last write: the answer's.
    Db keep(p, /*create=*/false);
    keep.exec("BEGIN; SELECT count(*) FROM documents;");
    const QString question = QStringLiteral("Which garden is quiet?");
    const int64_t wal_before = file_bytes(p + "-wal");
    ask(question);
    QCOMPARE(failed.count(), 0);
    const int64_t growth = file_bytes(p + "-wal") - wal_before;
    QVERIFY2(growth > 0, "the log did not grow");
    const auto before = dump_project(p);
    const auto chats_before = chat_messages(p);
    {
        FileSizeLimit limit(file_bytes(p + "-wal") + growth - 1);
        ask(question);
    }
    QCOMPARE(failed.count(), 1);
    const QString message = failed[0][0].toString();
    qInfo("the window says: %s", qPrintable(message));
    QVERIFY2(message.contains(QStringLiteral("file size limit (ulimit -f)")) &&
                 !message.contains(QStringLiteral("Free some space")),
             qPrintable(message));
    QVERIFY2(w->banner_text().contains(message), qPrintable(w->banner_text()));
    auto* chat = w->chat_model();
    const QString shown =
        chat->data(chat->index(chat->rowCount() - 1), ChatModel::DetailsRole).toString();
    qInfo("the chat shows under the question: %s", qPrintable(shown));
    QVERIFY2(shown.contains(QStringLiteral("file size limit (ulimit -f)")) &&
                 !shown.contains(QStringLiteral("Free some space")),
             qPrintable(shown));
    // The question stays in its chat with no answer; nothing saved before is lost.
    QCOMPARE(QString::fromStdString(integrity_of(p)), QStringLiteral("ok"));
    const auto lost = rows_lost(before, dump_project(p));
    for (const auto& l : lost)
        qInfo("lost: %s", l.c_str());
    QVERIFY(lost.empty());
    auto chats_after = chat_messages(p);
    QCOMPARE(chats_after.size(), chats_before.size() + 1);
    const auto& unanswered = chats_after.rbegin()->second;
    QCOMPARE(unanswered.front(),
             (std::pair<std::string, std::string>{"user", question.toStdString()}));
    for (const auto& [role, text] : unanswered)
        QVERIFY2(role == "user" || text.empty(), text.c_str());

    // The limit raised and the read transaction ended: the same question is answered and saved
    // as before.
    keep.exec("COMMIT");
    ask(question);
    QCOMPARE(failed.count(), 0);
    const auto later = chat_messages(p);
    // The calibrating answer's chat (the same question in a new chat) holds what it holds.
    QCOMPARE(later.rbegin()->second, chats_before.rbegin()->second);
    QVERIFY(rows_lost(before, dump_project(p)).empty());
}

void GuiTwoPrograms::aListThatCannotBeReadSaysWhyOnce() {
    register_gui_types();
    TempDir dir;
    const std::string a = dir.file("a.txt"), p = dir.file("p.spanscope");
    std::ofstream(a, std::ios::binary) << sample_prose(3, 400);
    Project::open(p, /*create=*/true)->add_document(a, text_document(read_file(a)));
    EngineWorker e; // called here directly, as its thread's event loop would call it
    QSignalSpy opened(&e, &EngineWorker::project_opened);
    QSignalSpy errors(&e, &EngineWorker::error);
    QSignalSpy removed(&e, &EngineWorker::document_removed);
    e.open_project(QString::fromStdString(p), false);
    QCOMPARE(opened.count(), 1);

    // Another program (another version of Spanscope, say) renames the table of documents.
    Db other(p, /*create=*/false);
    other.exec("ALTER TABLE documents RENAME TO documents_elsewhere");
    for (int look = 0; look < 3; ++look)
        e.refresh_documents();
    QCOMPARE(errors.count(), 1);
    const QString m = errors[0][0].toString();
    qInfo("%s", qPrintable(m));
    QVERIFY2(m.contains(QStringLiteral("document list")) && m.contains(QStringLiteral("documents")),
             qPrintable(m));
    QCOMPARE(removed.count(), 0); // the list as shown is kept

    // Put back: the next look reads the list, silently; failing again is said again.
    other.exec("ALTER TABLE documents_elsewhere RENAME TO documents");
    e.refresh_documents();
    QCOMPARE(errors.count(), 1);
    QCOMPARE(removed.count(), 0);
    other.exec("ALTER TABLE documents RENAME TO documents_elsewhere");
    e.refresh_documents();
    QCOMPARE(errors.count(), 2);
}

QTEST_MAIN(GuiTwoPrograms)
#include "test_gui_two_programs.moc"
