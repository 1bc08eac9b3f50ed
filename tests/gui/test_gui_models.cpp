// The list models of the desktop application under QAbstractItemModelTester: rows change by
// inserts, removals, moves and dataChanged, and a streamed answer never resets the chat model.
#include "chat_model.h"
#include "document_list_model.h"

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QtTest>

using namespace spanscope::gui;

class GuiModels : public QObject {
    Q_OBJECT
private slots:
    void documentRowsAreUpdatedInPlace();
    void answerStreamsIntoTheLastRowWithoutAReset();
    void chatListKeepsRowsItDoesNotChange();
};

static DocumentRow doc(const QString& key, qint64 id, DocumentRow::Status st) {
    DocumentRow r;
    r.key = key;
    r.path = key;
    r.name = key.section('/', -1);
    r.id = id;
    r.status = st;
    return r;
}

void GuiModels::documentRowsAreUpdatedInPlace() {
    DocumentListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.reset_rows({doc("/a", 1, DocumentRow::Status::Ready)});
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    QSignalSpy reset(&m, &QAbstractItemModel::modelReset);

    // A file being read: a new row keyed by its path, then its id and progress.
    m.upsert(doc("/b", 0, DocumentRow::Status::Extracting));
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(inserted.count(), 1);
    auto b = doc("/b", 2, DocumentRow::Status::Prefilling);
    b.chunks = 4;
    for (int c = 0; c <= 4; ++c) {
        b.chunks_stored = c;
        m.upsert(b);
    }
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.index(1).data(DocumentListModel::StatusTextRole).toString(),
             QStringLiteral("prefilling 4/4 chunks"));
    QCOMPARE(m.index(1).data(DocumentListModel::ProgressRole).toDouble(), 1.0);
    QCOMPARE(changed.count(), 5);
    QCOMPARE(reset.count(), 0);

    // The same content from another file gets the id of row 0: the new row merges into it.
    m.upsert(doc("/c", 0, DocumentRow::Status::Extracting));
    QCOMPARE(m.rowCount(), 3);
    m.upsert(doc("/c", 1, DocumentRow::Status::Ready));
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.index(0).data(DocumentListModel::IdRole).toLongLong(), 1);

    // A failed file keeps its row with the reason; it is not checkable (not in the project).
    auto bad = doc("/bad.pdf", 0, DocumentRow::Status::Failed);
    bad.error = QStringLiteral("not a PDF");
    m.upsert(bad);
    QCOMPARE(m.index(2).data(DocumentListModel::StatusTextRole).toString(),
             QStringLiteral("failed: not a PDF"));
    QVERIFY(!(m.flags(m.index(2)) & Qt::ItemIsUserCheckable));

    // Checked documents are those asked about.
    QCOMPARE(m.checked_ids(), (QList<qint64>{1, 2}));
    QVERIFY(m.setData(m.index(0), Qt::Unchecked, Qt::CheckStateRole));
    QCOMPARE(m.checked_ids(), (QList<qint64>{2}));
    QVERIFY(!m.setData(m.index(2), Qt::Checked, Qt::CheckStateRole));

    m.remove_id(2);
    QCOMPARE(m.rowCount(), 2);
    m.remove_row(1);
    QCOMPARE(m.rowCount(), 1);
    QCOMPARE(reset.count(), 0);
}

void GuiModels::answerStreamsIntoTheLastRowWithoutAReset() {
    ChatModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    MessageRow q{1, true, "first?", "", false};
    MessageRow a{2, false, "yes", "first token 10 ms", false};
    m.set_messages(7, {q, a});
    QCOMPARE(m.chat_id(), 7);
    QCOMPARE(m.rowCount(), 2);

    QSignalSpy reset(&m, &QAbstractItemModel::modelAboutToBeReset);
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    m.begin_exchange(QStringLiteral("second?"), QStringLiteral("reading…"));
    QCOMPARE(inserted.count(), 1);
    QVERIFY(m.streaming());
    const QStringList pieces{" The", " answer", " is", " 42.", "\n"};
    for (const auto& p : pieces)
        m.append_piece(p);
    QCOMPARE(changed.count(), pieces.size());
    for (const auto& args : changed) {
        QCOMPARE(args[0].toModelIndex().row(), 3);
        QCOMPARE(args[1].toModelIndex().row(), 3);
    }
    // Shown without the completion's leading space and trailing newline.
    QCOMPARE(m.index(3).data().toString(), QStringLiteral("The answer is 42."));
    m.finish_answer(QStringLiteral("The answer is 42."), QStringLiteral("stats"));
    QVERIFY(!m.streaming());
    QCOMPARE(m.index(3).data(ChatModel::DetailsRole).toString(), QStringLiteral("stats"));
    m.append_piece(QStringLiteral("late"));
    QCOMPARE(m.index(3).data().toString(), QStringLiteral("The answer is 42."));
    QCOMPARE(reset.count(), 0);
    QCOMPARE(m.rowCount(), 4);
}

void GuiModels::chatListKeepsRowsItDoesNotChange() {
    ChatListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.set_chats({{1, "one", 2}, {2, "two", 2}, {3, "three", 0}});
    QCOMPARE(m.rowCount(), 3);
    QSignalSpy removed(&m, &QAbstractItemModel::rowsRemoved);
    QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    QSignalSpy reset(&m, &QAbstractItemModel::modelReset);
    // Chat 2 deleted, 3 renamed, 4 new.
    m.set_chats({{1, "one", 2}, {3, "renamed", 0}, {4, "four", 2}});
    QCOMPARE(removed.count(), 1);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(reset.count(), 0);
    QCOMPARE(m.index(1).data().toString(), QStringLiteral("renamed"));
    QCOMPARE(m.row_of_id(4), 2);
    // Another order moves rows.
    m.set_chats({{4, "four", 2}, {1, "one", 2}, {3, "renamed", 0}});
    QCOMPARE(m.index(0).data(ChatListModel::IdRole).toLongLong(), 4);
    QCOMPARE(m.index(2).data(ChatListModel::IdRole).toLongLong(), 3);
    m.clear();
    QCOMPARE(m.rowCount(), 0);
}

QTEST_MAIN(GuiModels)
#include "test_gui_models.moc"
