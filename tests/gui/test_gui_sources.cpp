// The sources of an answer in the window (docs/desktop-app.md, "Sources"): on made-up data, the
// citation lines and the document view's highlight of a passage given in UTF-8 bytes (past a PDF
// page marker, after characters of two and four bytes); then with a tiny model the test writes
// (tests/unit/tiny_model.h), offscreen: an answer shows its sources under its text, a click on
// a citation shows its document with exactly the passage's characters highlighted and scrolled
// into view, another document takes the highlight away, the chat reopened shows the saved
// sources again, and a citation of a document removed since says so in the status bar.
#include "storage/project.h"
#include "tiny_model.h"
#include "ui/chat_delegate.h"
#include "ui/document_view.h"
#include "ui/main_window.h"

#include <QFile>
#include <QLabel>
#include <QListView>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <memory>

using namespace spanscope;
using namespace spanscope::gui;

namespace {

using Range = DocumentView::Range;

/// The UTF-16 positions of bytes [begin, end) of a UTF-8 text with nothing inserted before them:
/// the lengths of the text's prefixes decoded.
Range utf16_range(const std::string& text, int64_t begin, int64_t end) {
    return {static_cast<int>(QString::fromUtf8(text.data(), begin).size()),
            static_cast<int>(QString::fromUtf8(text.data(), end).size())};
}

/// "42%" or "<1%", as a citation writes a share (docs/desktop-app.md).
QString share_text(double share) {
    const double percent = 100 * share;
    return percent < 0.5 ? QStringLiteral("<1%")
                         : QStringLiteral("%1%").arg(static_cast<long long>(std::lround(percent)));
}

/// The citation line of a source of the text document `name`, written from the docs: "NAME, line
/// L (S%): EXCERPT".
QString expected_citation(const QString& name, const SourceRecord& s) {
    return QStringLiteral("%1, line %2 (%3): %4")
        .arg(name, QString::number(s.line), share_text(s.share), QString::fromStdString(s.excerpt));
}

/// Show document `id` in the window's document view and wait until it is there.
bool show(MainWindow& w, qint64 id) {
    if (w.document_view()->document_id() == id)
        return true;
    QSignalSpy shown(&w, &MainWindow::document_shown);
    w.show_document(id);
    return shown.wait(10000) && w.document_view()->document_id() == id;
}

/// The extra selection drawn in the highlight's colour, as a range ({} when none).
Range highlighted(const DocumentView& view) {
    Range r;
    int found = 0;
    for (const auto& s : view.extraSelections())
        if (s.format.background().color() == DocumentView::citation_colour()) {
            r = {s.cursor.selectionStart(), s.cursor.selectionEnd()};
            ++found;
        }
    return found == 1 ? r : Range{};
}

// The tall document: 90 short lines, each with characters of two, three and four bytes in UTF-8
// (one and two UTF-16 units), so that a passage far down lies out of view and its byte offsets
// differ from its character positions.
std::string tall_text() {
    std::string t;
    for (int i = 1; i <= 90; ++i)
        t += "Ligne " + std::to_string(i) + ": caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x98\x80 fin.\n";
    return t;
}

} // namespace

class GuiSources : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void citationLinesNameThePlace();
    void aSelectedWordShowsItsOwnSources();
    void theViewHighlightsBytesAsCharacters();
    void aClickedCitationShowsItsPassage();
    void savedSourcesAreShownAgain();
    void aRemovedDocumentIsSaidInTheStatusBar();

private:
    QString path(const QString& name) const { return dir_.filePath(name); }
    /// A window on the tiny model (full policy, 6-token greedy answers) showing project_;
    /// create: a new project with the two documents; false (reason in `why`) on failure.
    bool open_window(std::unique_ptr<MainWindow>& w, bool create, QString* why);
    /// A window on project_ again with the chat of aClickedCitationShowsItsPassage shown, and
    /// the index of its answer; false (reason in `why`) on failure.
    bool reopen_answer(std::unique_ptr<MainWindow>& w, QModelIndex* answer, QString* why);
    /// The conversation and the index of the chat's last answer.
    QModelIndex last_answer(MainWindow& w) const;
    /// The citation of the answer at `answer` clicked where the delegate draws it.
    static bool click_citation(MainWindow& w, const QModelIndex& answer, int citation,
                               QString* why);
    /// The citations shown under `answer` (its lines as drawn), checked against the sources
    /// saved in the project for message `message_id`, in order.
    void check_shown_sources(MainWindow& w, const QModelIndex& answer, qint64 message_id);

    QTemporaryDir dir_;
    QString model_, tall_, short_, project_;
    std::string tall_bytes_;
    qint64 message_ = 0, chat_ = 0;
    int clicked_ = -1; ///< the citation clicked in aClickedCitationShowsItsPassage
};

void GuiSources::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    model_ = path(QStringLiteral("tiny.gguf"));
    test::TinyGemma3Config c;
    c.n_ctx = 4096;
    c.seed = 7;
    test::write_tiny_gemma3(model_.toStdString(), c);
    tall_ = path(QStringLiteral("tall.txt"));
    short_ = path(QStringLiteral("short.txt"));
    tall_bytes_ = tall_text();
    QFile t(tall_), s(short_);
    QVERIFY(t.open(QIODevice::WriteOnly) && s.open(QIODevice::WriteOnly));
    t.write(tall_bytes_.data(), static_cast<qint64>(tall_bytes_.size()));
    s.write("The lighthouse was built in 1874.\nIts keeper kept a log.\n");
    project_ = path(QStringLiteral("p.spanscope"));
}

void GuiSources::citationLinesNameThePlace() {
    // Made-up records: the place by format, the share in whole percent, a removed document.
    DocumentRecord pdf, docx, epub;
    pdf.id = 1;
    pdf.name = "a.pdf";
    pdf.format = "pdf";
    docx.id = 2;
    docx.name = "b.docx";
    docx.format = "docx";
    epub.id = 3;
    epub.name = "c.epub";
    epub.format = "epub";
    std::vector<SourceRecord> sources = {{1, 10, 20, 3, 7, 0.425, "on page three"},
                                         {2, 0, 5, 0, 12, 0.3, "a paragraph"},
                                         {3, 5, 9, 0, 40, 0.2, "a chapter"},
                                         {9, 0, 4, 0, 2, 0.004, "gone"}};
    const auto c = citations_of(sources, {pdf, docx, epub});
    QCOMPARE(c.size(), 4);
    QCOMPARE(citation_text(c[0]), QStringLiteral("a.pdf, page 3 (43%): on page three"));
    QCOMPARE(citation_text(c[1]), QStringLiteral("b.docx, paragraph 12 (30%): a paragraph"));
    QCOMPARE(citation_text(c[2]), QStringLiteral("c.epub (20%): a chapter"));
    QCOMPARE(citation_text(c[3]), QStringLiteral("document 9 (removed), line 2 (<1%): gone"));
    QVERIFY(!c[0].removed && !c[1].removed && !c[2].removed && c[3].removed);
    QCOMPARE(c[0].start_char, 10);
    QCOMPARE(c[0].end_char, 20);
    QCOMPARE(c[1].document, QStringLiteral("b.docx"));
}

// A selected token's own sources take the answer's place in its Sources block (a token without
// any keeps the answer's); unselected, the answer's come back; a citation chosen counts in the
// list shown.
void GuiSources::aSelectedWordShowsItsOwnSources() {
    DocumentRecord doc;
    doc.id = 1;
    doc.name = "a.txt";
    doc.format = "text";
    MessageRow answer;
    answer.id = 7;
    answer.text = QStringLiteral("Two words");
    answer.citations =
        citations_of({{1, 0, 5, 0, 1, 0.6, "alpha"}, {1, 6, 10, 0, 2, 0.4, "beta"}}, {doc});
    answer.token_citations = token_citations_of({{{1, 20, 25, 0, 3, 1.0, "gamma"}}, {}}, {doc});
    MessageRow question;
    question.from_user = true;
    question.text = QStringLiteral("Q?");
    ChatModel chat;
    chat.set_messages(1, {question, answer});
    const QModelIndex a = chat.index(1);
    auto shown = [&] { return a.data(ChatModel::CitationsRole).value<QList<Citation>>(); };
    QCOMPARE(shown().size(), 2);
    QVERIFY(!a.data(ChatModel::TokenCitationsRole).toBool());
    QSignalSpy changed(&chat, &QAbstractItemModel::dataChanged);
    chat.select_token(7, 0);
    QCOMPARE(shown().size(), 1);
    QCOMPARE(shown()[0].excerpt, QStringLiteral("gamma"));
    QCOMPARE(citation_text(shown()[0]), QStringLiteral("a.txt, line 3 (100%): gamma"));
    QVERIFY(a.data(ChatModel::TokenCitationsRole).toBool());
    QVERIFY(!changed.isEmpty() &&
            changed.last()[2].value<QList<int>>().contains(ChatModel::CitationsRole));
    chat.select_citation(7, 1); // only one shown: not a citation of this list
    QCOMPARE(a.data(ChatModel::SelectedCitationRole).toInt(), -1);
    chat.select_citation(7, 0);
    QCOMPARE(a.data(ChatModel::SelectedCitationRole).toInt(), 0);
    chat.select_token(7, 1); // a token without sources of its own: the answer's
    QCOMPARE(shown().size(), 2);
    QVERIFY(!a.data(ChatModel::TokenCitationsRole).toBool());
    chat.select_token(7, 0);
    chat.select_token(0, -1);
    QCOMPARE(shown(), answer.citations);
}

void GuiSources::theViewHighlightsBytesAsCharacters() {
    // Two PDF pages: the shown text has "[page N]" lines the bytes know nothing of.
    const std::string page1 = "Premi\xc3\xa8re page \xf0\x9f\x98\x80.\n";
    const std::string passage = "Seconde \xe2\x80\x94 page \xc3\xa9t\xc3\xa9.";
    const std::string text = page1 + passage + "\n";
    const auto shown = shown_text(text, {{0, 1}, {static_cast<int64_t>(page1.size()), 2}});
    DocumentView view;
    view.resize(400, 200);
    view.show();
    view.show_document(5, shown.text, std::make_shared<const TextPositions>(shown.positions));
    const int64_t b = static_cast<int64_t>(page1.size());
    const int64_t e = b + static_cast<int64_t>(passage.size());
    QVERIFY(view.show_citation(b, e));
    // Where the passage is in the text shown (it occurs once), and its length in characters.
    const QString want = QString::fromStdString(passage);
    const int at = view.toPlainText().indexOf(want);
    QVERIFY(at > 0 && view.toPlainText().lastIndexOf(want) == at);
    QCOMPARE(view.citation_range(), (Range{at, at + static_cast<int>(want.size())}));
    QCOMPARE(highlighted(view), view.citation_range());
    QCOMPARE(view.textCursor().position(), at);
    QVERIFY(view.tooltip_at(at + 1).startsWith(QStringLiteral("The passage the answer cites")));
    QVERIFY(view.tooltip_at(0).isEmpty());
    // The highlight is neither a span tint nor a zoom colour.
    for (int n = 0; n <= 12; ++n)
        QVERIFY(DocumentView::heat_colour(n, 12) != DocumentView::citation_colour());
    QVERIFY(DocumentView::live_colour(true) != DocumentView::citation_colour());
    QVERIFY(DocumentView::live_colour(false) != DocumentView::citation_colour());
    // A range outside the text: nothing highlighted.
    QVERIFY(!view.show_citation(e, static_cast<int64_t>(text.size()) + 5));
    QCOMPARE(view.citation_range(), Range{});
    QCOMPARE(highlighted(view), Range{});
    // Another document takes the highlight away.
    QVERIFY(view.show_citation(b, e));
    view.show_document(6, QStringLiteral("other"), nullptr);
    QCOMPARE(view.citation_range(), Range{});
    QCOMPARE(highlighted(view), Range{});
}

bool GuiSources::open_window(std::unique_ptr<MainWindow>& w, bool create, QString* why) {
    AppSettings s;
    s.model_path = model_;
    s.model_files = {model_};
    s.threads = 1;
    s.generation.max_tokens = 6;
    s.memory.policy = QStringLiteral("full");
    w = std::make_unique<MainWindow>(s, /*persist_settings=*/false);
    w->resize(1280, 800);
    w->show();
    QSignalSpy ready(w.get(), &MainWindow::model_ready);
    if (!ready.wait(30000) || !ready[0][0].toBool()) {
        *why = QStringLiteral("the tiny model did not load: ") + w->banner_text();
        return false;
    }
    QSignalSpy opened(w.get(), &MainWindow::project_ready);
    QSignalSpy chats(w.get(), &MainWindow::chats_changed);
    w->open_project(project_, create);
    if (!opened.wait(30000)) {
        *why = QStringLiteral("the project did not open");
        return false;
    }
    if (!create) {
        if (chats.isEmpty() && !chats.wait(10000)) {
            *why = QStringLiteral("the chats were not listed");
            return false;
        }
        return true;
    }
    QSignalSpy ingested(w.get(), &MainWindow::ingest_done);
    w->add_documents({tall_, short_});
    if (!ingested.wait(60000) || ingested[0][0].toInt() != 2) {
        *why = QStringLiteral("the documents were not added: ") + w->banner_text();
        return false;
    }
    return true;
}

bool GuiSources::reopen_answer(std::unique_ptr<MainWindow>& w, QModelIndex* answer, QString* why) {
    if (!open_window(w, /*create=*/false, why))
        return false;
    auto* list = w->findChild<QListView*>(QStringLiteral("chatList"));
    list->setCurrentIndex(w->chat_list_model()->index(w->chat_list_model()->row_of_id(chat_)));
    if (!QTest::qWaitFor([&] { return w->chat_model()->row_of_message(message_) >= 0; }, 10000)) {
        *why = QStringLiteral("the chat's answer was not shown");
        return false;
    }
    *answer = w->chat_model()->index(w->chat_model()->row_of_message(message_));
    return true;
}

QModelIndex GuiSources::last_answer(MainWindow& w) const {
    auto* chat = w.chat_model();
    return chat->index(chat->rowCount() - 1);
}

bool GuiSources::click_citation(MainWindow& w, const QModelIndex& answer, int citation,
                                QString* why) {
    auto* conversation = w.findChild<QListView*>(QStringLiteral("conversation"));
    auto* delegate = qobject_cast<ChatDelegate*>(conversation->itemDelegate());
    conversation->scrollTo(answer);
    QApplication::processEvents();
    const QRect r =
        delegate->citation_rect(ChatDelegate::option_for(conversation, answer), answer, citation);
    if (r.isEmpty() || !conversation->viewport()->rect().contains(r.center())) {
        *why = QStringLiteral("citation %1 is not drawn in view").arg(citation);
        return false;
    }
    QTest::mouseClick(conversation->viewport(), Qt::LeftButton, {}, r.center());
    return true;
}

void GuiSources::check_shown_sources(MainWindow& w, const QModelIndex& answer, qint64 message_id) {
    std::vector<SourceRecord> saved;
    std::vector<DocumentRecord> docs;
    {
        auto p = Project::open(project_.toStdString(), false);
        for (const auto& m : p->messages(chat_))
            if (m.id == message_id)
                saved = m.sources;
        docs = p->documents();
    }
    QVERIFY2(!saved.empty(), "the answer saved no sources");
    const auto citations = answer.data(ChatModel::CitationsRole).value<QList<Citation>>();
    QCOMPARE(citations.size(), static_cast<qsizetype>(saved.size()));
    auto* conversation = w.findChild<QListView*>(QStringLiteral("conversation"));
    auto* delegate = qobject_cast<ChatDelegate*>(conversation->itemDelegate());
    const auto option = ChatDelegate::option_for(conversation, answer);
    for (size_t i = 0; i < saved.size(); ++i) {
        const int k = static_cast<int>(i);
        QString name = QStringLiteral("document %1 (removed)").arg(saved[i].document_id);
        for (const auto& d : docs)
            if (d.id == saved[i].document_id)
                name = QString::fromStdString(d.name);
        QCOMPARE(citations[k].document_id, saved[i].document_id);
        QCOMPARE(citations[k].start_char, saved[i].start_char);
        QCOMPARE(citations[k].end_char, saved[i].end_char);
        // The line drawn: "[n] " and the citation, whole or cut at its end with "…".
        const QString full = QStringLiteral("[%1] ").arg(k + 1) + expected_citation(name, saved[i]);
        const QString line = delegate->citation_line(option, answer, k);
        QVERIFY2(line == full || (line.endsWith(QChar(0x2026)) &&
                                  full.startsWith(line.chopped(1)) && line.size() > 20),
                 qPrintable(line + " | " + full));
        QVERIFY(!delegate->citation_rect(option, answer, k).isEmpty());
    }
    QVERIFY(delegate->citation_rect(option, answer, static_cast<int>(saved.size())).isEmpty());
}

void GuiSources::aClickedCitationShowsItsPassage() {
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, /*create=*/true, &why), qPrintable(why));
    QSignalSpy answered(w.get(), &MainWindow::answer_done);
    QSignalSpy failed(w.get(), &MainWindow::answer_error);
    w->ask(QStringLiteral("What is on the last line?"));
    QVERIFY2(answered.wait(60000),
             failed.isEmpty() ? "no answer" : qPrintable(failed[0][0].toString()));
    const auto stats = answered[0][0].value<AnswerStats>();
    message_ = stats.message_id;
    chat_ = stats.chat_id;
    QVERIFY(message_ > 0);
    const QModelIndex answer = last_answer(*w);
    QCOMPARE(answer.data(ChatModel::MessageIdRole).toLongLong(), message_);
    check_shown_sources(*w, answer, message_);
    if (QTest::currentTestFailed())
        return;

    // The citation to click: the first in the tall document (the premise: there is one).
    const auto citations = answer.data(ChatModel::CitationsRole).value<QList<Citation>>();
    qint64 tall_id = 0, short_id = 0;
    for (int r = 0; r < w->document_model()->rowCount(); ++r) {
        const auto& row = w->document_model()->row(r);
        (row.name == QStringLiteral("tall.txt") ? tall_id : short_id) = row.id;
    }
    for (int i = 0; i < citations.size() && clicked_ < 0; ++i)
        if (citations[i].document_id == tall_id)
            clicked_ = i;
    QVERIFY2(clicked_ >= 0, "no source in the tall document");
    const Citation c = citations[clicked_];
    const Range want = utf16_range(tall_bytes_, c.start_char, c.end_char);
    qInfo("%d sources; clicked [%d] %s: bytes [%lld, %lld), characters [%d, %d)",
          static_cast<int>(citations.size()), clicked_ + 1, qPrintable(citation_text(c)),
          c.start_char, c.end_char, want.begin, want.end);
    // The premise of the UTF-8 check: the passage starts after characters of several bytes.
    QVERIFY(want.begin < c.start_char);

    // The short document shown, scrolled to its start: the click must switch and scroll.
    auto* view = w->document_view();
    QVERIFY(show(*w, short_id));
    QSignalSpy cited(w.get(), &MainWindow::citation_shown);
    QVERIFY2(click_citation(*w, answer, clicked_, &why), qPrintable(why));
    QVERIFY(cited.count() > 0 || cited.wait(10000));
    QCOMPARE(cited[0][0].toLongLong(), message_);
    QCOMPARE(cited[0][1].toInt(), clicked_);
    QCOMPARE(w->shown_document(), tall_id);
    QCOMPARE(view->document_id(), tall_id);
    QCOMPARE(view->toPlainText(), QString::fromStdString(tall_bytes_)); // a text file: no markers
    QCOMPARE(view->citation_range(), want);
    QCOMPARE(highlighted(*view), want);
    QCOMPARE(answer.data(ChatModel::SelectedCitationRole).toInt(), clicked_);
    // Scrolled into view: the passage's first line is inside the viewport.
    QCOMPARE(view->textCursor().position(), want.begin);
    QVERIFY2(view->viewport()->rect().contains(view->cursorRect().center()),
             qPrintable(QStringLiteral("cursor at %1,%2")
                            .arg(view->cursorRect().x())
                            .arg(view->cursorRect().y())));

    // Scrolled away to the other end, clicked again: back in view.
    QTextCursor far(view->document());
    far.setPosition(want.begin < view->toPlainText().size() / 2 ? view->toPlainText().size() : 0);
    view->setTextCursor(far);
    view->ensureCursorVisible();
    QApplication::processEvents();
    QTextCursor at(view->document());
    at.setPosition(want.begin);
    QVERIFY2(!view->viewport()->rect().contains(view->cursorRect(at).center()),
             "the document is not tall enough to scroll the passage out of view");
    QVERIFY2(click_citation(*w, answer, clicked_, &why), qPrintable(why));
    QVERIFY(cited.count() > 1 || cited.wait(10000));
    QCOMPARE(view->citation_range(), want);
    QVERIFY(view->viewport()->rect().contains(view->cursorRect(at).center()));

    // Another citation replaces it (in its own document).
    const int other = clicked_ == 0 ? 1 : 0;
    if (other < citations.size()) {
        QVERIFY2(click_citation(*w, answer, other, &why), qPrintable(why));
        QTRY_COMPARE_WITH_TIMEOUT(w->shown_document(), citations[other].document_id, 10000);
        QTRY_COMPARE_WITH_TIMEOUT(answer.data(ChatModel::SelectedCitationRole).toInt(), other,
                                  10000);
        QTRY_VERIFY_WITH_TIMEOUT(view->citation_range().end > 0, 10000);
        QCOMPARE(highlighted(*view), view->citation_range());
    }
    // Another document shown: the highlight and the chat's mark go.
    {
        QVERIFY(show(*w, w->shown_document() == tall_id ? short_id : tall_id));
        QCOMPARE(view->citation_range(), Range{});
        QCOMPARE(highlighted(*view), Range{});
        QCOMPARE(answer.data(ChatModel::SelectedCitationRole).toInt(), -1);
    }
}

void GuiSources::savedSourcesAreShownAgain() {
    QVERIFY2(message_ > 0 && clicked_ >= 0, "needs the answer of aClickedCitationShowsItsPassage");
    std::unique_ptr<MainWindow> w;
    QString why;
    QModelIndex answer;
    QVERIFY2(reopen_answer(w, &answer, &why), qPrintable(why));
    check_shown_sources(*w, answer, message_);
    if (QTest::currentTestFailed())
        return;
    // A saved citation shows its passage as the fresh one did.
    const auto c = answer.data(ChatModel::CitationsRole).value<QList<Citation>>()[clicked_];
    QSignalSpy cited(w.get(), &MainWindow::citation_shown);
    QVERIFY2(click_citation(*w, answer, clicked_, &why), qPrintable(why));
    QVERIFY(cited.count() > 0 || cited.wait(10000));
    QCOMPARE(w->document_view()->document_id(), c.document_id);
    QCOMPARE(w->document_view()->citation_range(),
             utf16_range(tall_bytes_, c.start_char, c.end_char));
}

void GuiSources::aRemovedDocumentIsSaidInTheStatusBar() {
    QVERIFY2(message_ > 0 && clicked_ >= 0, "needs the answer of aClickedCitationShowsItsPassage");
    qint64 removed = 0;
    {
        auto p = Project::open(project_.toStdString(), false);
        for (const auto& m : p->messages(chat_))
            if (m.id == message_)
                removed = m.sources[static_cast<size_t>(clicked_)].document_id;
        QVERIFY(p->remove_document(removed));
    }
    std::unique_ptr<MainWindow> w;
    QString why;
    QModelIndex answer;
    QVERIFY2(reopen_answer(w, &answer, &why), qPrintable(why));
    // The saved sources stay, their document named by its id.
    check_shown_sources(*w, answer, message_);
    if (QTest::currentTestFailed())
        return;
    const auto c = answer.data(ChatModel::CitationsRole).value<QList<Citation>>()[clicked_];
    QVERIFY(c.removed);
    const qint64 shown_before = w->shown_document();
    QSignalSpy cited(w.get(), &MainWindow::citation_shown);
    QVERIFY2(click_citation(*w, answer, clicked_, &why), qPrintable(why));
    auto* message = w->findChild<QLabel*>(QStringLiteral("messageLabel"));
    QCOMPARE(message->text(),
             QStringLiteral("The cited document, document %1, was removed from the project.")
                 .arg(removed));
    QCOMPARE(w->shown_document(), shown_before);
    QCOMPARE(w->document_view()->citation_range(), Range{});
    QCOMPARE(answer.data(ChatModel::SelectedCitationRole).toInt(), -1);
    QTest::qWait(100);
    QCOMPARE(cited.count(), 0);
}

QTEST_MAIN(GuiSources)
#include "test_gui_sources.moc"
