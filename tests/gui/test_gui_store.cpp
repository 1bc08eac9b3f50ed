// The store worker (document text with PDF page markers, chats listed, renamed, deleted and
// exported as Markdown) and the words shown for errors. No model is needed.
#include "storage/document_loader.h"
#include "storage/project.h"
#include "storage/sqlite_db.h"
#include "ui/chat_export.h"
#include "ui/error_text.h"
#include "ui/store_worker.h"

#include <QDir>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <sqlite3.h>

using namespace spanscope;
using namespace spanscope::gui;

class GuiStore : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates)); // "20,311"
        register_gui_types();
    }
    void pdfTextShowsWherePagesStart();
    void chatsAreListedRenamedDeletedAndExported();
    void errorsAreExplainedInWords();
};

void GuiStore::pdfTextShowsWherePagesStart() {
    const std::string pdf = "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf";
    QVERIFY2(QFile::exists(QString::fromStdString(pdf)), "shared-mime-info is not installed");
    QTemporaryDir dir;
    const QString path = dir.filePath("p.spanscope");
    const auto doc = load_document(pdf);
    QVERIFY(doc.pages > 1);
    int64_t id = 0;
    {
        auto p = Project::open(path.toStdString(), true);
        id = p->add_document(pdf, doc);
    }
    StoreWorker w;
    QSignalSpy text(&w, &StoreWorker::document_text);
    QSignalSpy errors(&w, &StoreWorker::error);
    w.open_project(path);
    w.load_document_text(id);
    QCOMPARE(errors.count(), 0);
    QCOMPARE(text.count(), 1);
    const QString shown = text[0][2].toString();
    // One marker per page with text, in order, and the text itself unchanged around them.
    int last = -1;
    for (int page = 1; page <= doc.pages; ++page) {
        const int at = shown.indexOf(QStringLiteral("[page %1]\n").arg(page));
        if (std::count(doc.pages_without_text.begin(), doc.pages_without_text.end(), page))
            continue;
        QVERIFY2(at > last, qPrintable(QStringLiteral("page %1").arg(page)));
        last = at;
    }
    QString without = shown;
    without.remove(QRegularExpression(QStringLiteral("\\[page \\d+\\]\\n")));
    QString original = QString::fromStdString(doc.text);
    // Markers may add a newline before them where a page did not end with one.
    without.remove('\n');
    original.remove('\n');
    QCOMPARE(without, original);
}

void GuiStore::chatsAreListedRenamedDeletedAndExported() {
    QTemporaryDir dir;
    const QString path = dir.filePath("p.spanscope");
    const QString notes = dir.filePath("notes.txt");
    {
        QFile f(notes);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("Copyright notice.\nThe Free Software Foundation holds it.\n");
    }
    int64_t a = 0, b = 0, doc = 0;
    {
        auto p = Project::open(path.toStdString(), true);
        doc = p->add_document(notes.toStdString(), load_document(notes.toStdString()));
        a = p->create_chat("Who holds the copyright?");
        p->add_message(a, "user", "Who holds the copyright?");
        // Its sources: a passage of notes.txt, and one of a document the project no longer has.
        SourceRecord in_notes{doc, 18, 56, 0, 2, 0.4166, "The Free Software Foundation holds it."};
        SourceRecord gone{doc + 41, 0, 7, 0, 3, 0.004, "Removed"};
        p->add_message(a, "assistant", "The Free Software Foundation.",
                       R"({"ttft_ms": 863.4, "decode_tokens_per_s": 31.2, "tokens_reused": 20311,)"
                       R"( "tokens_computed": 14, "stop_reason": "end_of_line"})",
                       {}, {in_notes, gone});
        p->add_message(a, "user", "# and then?");
        p->add_message(a, "assistant", "", R"({"stop_reason": "stopped"})");
        b = p->create_chat("second");
    }
    StoreWorker w;
    QSignalSpy listed(&w, &StoreWorker::chats_listed);
    QSignalSpy loaded(&w, &StoreWorker::chat_loaded);
    QSignalSpy exported(&w, &StoreWorker::chat_exported);
    QSignalSpy errors(&w, &StoreWorker::error);
    w.open_project(path);
    w.list_chats();
    QCOMPARE(listed.count(), 1);
    auto chats = listed.takeFirst()[0].value<QList<ChatRow>>();
    QCOMPARE(chats.size(), 2);
    QCOMPARE(chats[0].messages, 4);

    w.load_chat(a);
    QCOMPARE(loaded.count(), 1);
    const auto msgs = loaded[0][1].value<QList<MessageRow>>();
    QCOMPARE(msgs.size(), 4);
    QVERIFY(msgs[0].from_user);
    QCOMPARE(msgs[1].details,
             QStringLiteral("first token 863 ms · 31.2 tokens/s · 20,311 tokens reused / 14 "
                            "computed"));
    QCOMPARE(msgs[3].details, QStringLiteral("stopped before the answer began"));
    // The answer's sources, top first, named by the project's documents.
    QCOMPARE(msgs[1].citations.size(), 2);
    QCOMPARE(msgs[1].citations[0].document_id, doc);
    QCOMPARE(msgs[1].citations[0].start_char, 18);
    QCOMPARE(msgs[1].citations[0].end_char, 56);
    QCOMPARE(msgs[1].citations[0].place, QStringLiteral("notes.txt, line 2"));
    QVERIFY(!msgs[1].citations[0].removed);
    QCOMPARE(msgs[1].citations[1].place,
             QStringLiteral("document %1 (removed), line 3").arg(doc + 41));
    QVERIFY(msgs[1].citations[1].removed);
    QVERIFY(msgs[0].citations.isEmpty());

    w.rename_chat(b, QStringLiteral("renamed"));
    chats = listed.takeFirst()[0].value<QList<ChatRow>>();
    QCOMPARE(chats[1].title, QStringLiteral("renamed"));
    w.rename_chat(b, QStringLiteral("   "));
    QCOMPARE(errors.count(), 1); // a blank title is refused, in words
    QVERIFY(errors.takeFirst()[0].toString().contains("title"));

    const QString md_path = dir.filePath("chat.md");
    w.export_chat(a, md_path);
    QCOMPARE(exported.count(), 1);
    QFile f(md_path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QString md = QString::fromUtf8(f.readAll());
    // Written out by hand: a question, its answer with its sources (numbered; place, share
    // rounded to a percent, excerpt) and statistics, a heading-like question escaped, and a
    // stopped answer.
    const QString expected =
        QStringLiteral(
            "# Who holds the copyright?\n"
            "\n**You:** Who holds the copyright?\n"
            "\n**Spanscope:** The Free Software Foundation.\n"
            "\nSources:\n\n"
            "1. notes.txt, line 2 (42%): The Free Software Foundation holds it.\n"
            "2. document %1 (removed), line 3 (<1%): Removed\n"
            "\n_first token 863 ms · 31.2 tokens/s · 20,311 tokens reused / 14 computed_\n"
            "\n**You:** \\# and then?\n"
            "\n**Spanscope:** \n"
            "\n_stopped before the answer began_\n")
            .arg(doc + 41);
    QCOMPARE(md, expected);
    // A name without a folder is written in the working directory, byte for byte the same.
    {
        const QString was = QDir::currentPath();
        QVERIFY(QDir::setCurrent(dir.path()));
        w.export_chat(a, QStringLiteral("relative.md"));
        QVERIFY(QDir::setCurrent(was));
        QCOMPARE(exported.count(), 2);
        QFile r(dir.filePath("relative.md"));
        QVERIFY(r.open(QIODevice::ReadOnly));
        QCOMPARE(QString::fromUtf8(r.readAll()), expected);
    }
    // Export into a directory that does not exist: an error, nothing written.
    w.export_chat(a, dir.filePath("missing/chat.md"));
    QCOMPARE(errors.count(), 1);
    QVERIFY(!QFile::exists(dir.filePath("missing/chat.md")));

    w.delete_chat(a);
    chats = listed.takeLast()[0].value<QList<ChatRow>>();
    QCOMPARE(chats.size(), 1);
    QCOMPARE(chats[0].id, b);
}

void GuiStore::errorsAreExplainedInWords() {
    const auto full =
        describe_error("Adding a.txt", DbError("insert: database or disk is full", SQLITE_FULL));
    QVERIFY2(full.contains("disk is full"), qPrintable(full));
    const auto locked =
        describe_error("Answering", DbError("begin: database is locked", SQLITE_BUSY));
    QVERIFY2(locked.contains("try again"), qPrintable(locked));
    // A real locked database: another connection holds the write lock.
    QTemporaryDir dir;
    const QString path = dir.filePath("p.spanscope");
    { Project::open(path.toStdString(), true); }
    auto holder = Project::open(path.toStdString(), false);
    holder->db().exec("BEGIN EXCLUSIVE");
    try {
        auto p = Project::open(path.toStdString(), false);
        p->create_chat("x");
        QFAIL("writing to a locked project succeeded");
    } catch (const std::exception& e) {
        const auto text = describe_error("Saving the chat", e);
        QVERIFY2(text.count("another program") == 1 || text.contains("cannot be used"),
                 qPrintable(text));
    }
    holder->db().exec("ROLLBACK");
    // A project file that is not one.
    QFile junk(dir.filePath("junk.spanscope"));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write(QByteArray(4096, 'x'));
    junk.close();
    try {
        Project::open(junk.fileName().toStdString(), false);
        QFAIL("a junk file opened as a project");
    } catch (const std::exception& e) {
        QVERIFY(describe_error("Opening junk", e).contains("not changed"));
    }
}

QTEST_MAIN(GuiStore)
#include "test_gui_store.moc"
