// The list models of the desktop application under QAbstractItemModelTester: rows change by
// inserts, removals, moves and dataChanged, and a streamed answer never resets the chat model.
// The SEKV views on made-up data: byte offsets to positions of the shown text, an answer's zoom
// counts and tokens, the document view's tints, heat and tooltips, the inspector's grid, and
// clickable answer tokens. No model is needed.
#include "ui/answer_stats_json.h"
#include "ui/chat_delegate.h"
#include "ui/chat_model.h"
#include "ui/document_list_model.h"
#include "ui/document_view.h"
#include "ui/zoom_data.h"
#include "ui/zoom_inspector.h"

#include <QAbstractItemModelTester>
#include <QListView>
#include <QSignalSpy>
#include <QtTest>

using namespace spanscope::gui;

class GuiModels : public QObject {
    Q_OBJECT
private slots:
    void documentRowsAreUpdatedInPlace();
    void documentsAreReorderedByMovesAndKeepTheirChecks();
    void answerStatisticsAreReadFromTheStoredJson();
    void answerStreamsIntoTheLastRowWithoutAReset();
    void chatListKeepsRowsItDoesNotChange();
    void shownTextMapsBytesToPositions();
    void answerZoomCountsSpansAndSplitsTokens();
    void damagedTraceShapeIsRefused();
    void documentViewTintsSpansAndDrawsTheZoom();
    void inspectorGridShowsEveryLayerHeadAndStep();
    void answerTokensAreClickable();
    void lineBreaksInAnAnswerBreakItsLines();
};

namespace {
// A trace of 3 tokens over 2 layers (5, 11) × 2 heads and 10 spans: 0-5 from document 1,
// 6-9 from document 2 (its second section). " Café ok" with "é" cut between tokens 0 and 1.
spanscope::StoredZoomTrace made_up_trace() {
    using namespace spanscope;
    StoredZoomTrace t;
    t.trace.n_spans = 10;
    t.sources = {{1, 0, 0, 6, 0}, {2, 1, 6, 4, 300}};
    const std::vector<std::vector<std::vector<int32_t>>> spans = {
        {{1, 2}, {2}, {2, 7}, {}},   // step 0: layer 5 heads 0-1, layer 11 heads 0-1
        {{}, {0}, {3}, {3, 9}},      // step 1
        {{4}, {4}, {4, 8}, {1, 4}}}; // step 2
    for (size_t s = 0; s < spans.size(); ++s) {
        ZoomStep step;
        step.fast_tier_bytes = 1000 + 10 * static_cast<int64_t>(s);
        step.host_tier_bytes = 4000;
        for (int l = 0; l < 2; ++l) {
            LayerZoom lz;
            lz.layer = l == 0 ? 5 : 11;
            for (int h = 0; h < 2; ++h) {
                ZoomHead zh;
                zh.spans = spans[s][static_cast<size_t>(2 * l + h)];
                zh.relevance.assign(zh.spans.size(), 0.9f);
                lz.heads.push_back(zh);
            }
            step.layers.push_back(lz);
        }
        t.trace.steps.push_back(step);
    }
    t.tokens = {11, 12, 13};
    t.token_texts = {" Caf\xC3", "\xA9", " ok"};
    return t;
}
} // namespace

static DocumentRow doc(const QString& key, qint64 id, DocumentRow::Status st) {
    DocumentRow r;
    r.key = key;
    r.path = key;
    r.name = key.section('/', -1);
    r.id = id;
    r.status = st;
    return r;
}

void GuiModels::documentsAreReorderedByMovesAndKeepTheirChecks() {
    DocumentListModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto c = doc("/c", 3, DocumentRow::Status::Ready);
    c.in_context = false; // as the project kept it
    m.reset_rows(
        {doc("/a", 1, DocumentRow::Status::Ready), doc("/b", 2, DocumentRow::Status::Ready), c});
    QCOMPARE(m.ordered_ids(), (QList<qint64>{1, 2, 3}));
    QCOMPARE(m.checked_ids(), (QList<qint64>{1, 2}));
    QCOMPARE(m.unchecked_ids(), (QList<qint64>{3}));
    QSignalSpy moved(&m, &QAbstractItemModel::rowsMoved);
    QSignalSpy context(&m, &DocumentListModel::context_changed);

    // moveRow's destination is the row the moved one goes before (QListView's drag uses it).
    QVERIFY(m.moveRow({}, 2, {}, 0)); // c to the top
    QCOMPARE(m.ordered_ids(), (QList<qint64>{3, 1, 2}));
    QVERIFY(m.moveRow({}, 0, {}, 3)); // c to the end
    QCOMPARE(m.ordered_ids(), (QList<qint64>{1, 2, 3}));
    QVERIFY(m.moveRow({}, 0, {}, 2)); // a below b
    QCOMPARE(m.ordered_ids(), (QList<qint64>{2, 1, 3}));
    QCOMPARE(moved.count(), 3);
    QCOMPARE(context.count(), 3);
    // The check travels with its row; checked ids come in list order.
    QCOMPARE(m.index(2).data(Qt::CheckStateRole).toInt(), int(Qt::Unchecked));
    QCOMPARE(m.checked_ids(), (QList<qint64>{2, 1}));
    // Onto itself, outside the list, or under a parent: refused, nothing changes.
    QVERIFY(!m.moveRow({}, 1, {}, 1));
    QVERIFY(!m.moveRow({}, 1, {}, 2));
    QVERIFY(!m.moveRow({}, 3, {}, 0));
    QVERIFY(!m.moveRow({}, 0, {}, 4));
    QVERIFY(!m.moveRow(m.index(0), 0, {}, 2));
    QCOMPARE(m.ordered_ids(), (QList<qint64>{2, 1, 3}));
    QCOMPARE(moved.count(), 3);
    // Checking a document changes the context; setting the same check again does not.
    QVERIFY(m.setData(m.index(2), Qt::Checked, Qt::CheckStateRole));
    QVERIFY(m.setData(m.index(2), Qt::Checked, Qt::CheckStateRole));
    QCOMPARE(context.count(), 4);
    QCOMPARE(m.checked_ids(), (QList<qint64>{2, 1, 3}));
    // Documents drag; a file still being read (no id) does not; drops go between rows.
    m.upsert(doc("/d", 0, DocumentRow::Status::Extracting));
    QVERIFY(m.flags(m.index(0)) & Qt::ItemIsDragEnabled);
    QVERIFY(!(m.flags(m.index(3)) & Qt::ItemIsDragEnabled));
    QVERIFY(!(m.flags(m.index(0)) & Qt::ItemIsDropEnabled));
    QVERIFY(m.flags(QModelIndex()) & Qt::ItemIsDropEnabled);
    QCOMPARE(m.ordered_ids(), (QList<qint64>{2, 1, 3}));
}

void GuiModels::answerStatisticsAreReadFromTheStoredJson() {
    // The fields as ask_project saves them; the line shown under the answer and in the status
    // bar says what the selector recomputed and which share of the sections was used.
    const auto j = nlohmann::json::parse(R"({
        "ttft_ms": 812.4, "decode_tokens_per_s": 30.5, "tokens_reused": 2048,
        "tokens_computed": 60, "generated_tokens": 12, "policy": "full",
        "selector": "epic", "recompute_set": 12,
        "layer_rows": {"global": {"layers": 3, "rows_recomputed": 36, "rows_reused": 108},
                       "sliding": {"layers": 15, "rows_recomputed": 18, "rows_reused": 162}},
        "units_left_out": 3, "ranking": "bm25",
        "units_used": [{"document_id": 4, "unit": 0, "tokens": 900},
                       {"document_id": 2, "unit": 2, "tokens": 1100}]})");
    const AnswerStats s = answer_stats_from_json(j);
    QCOMPARE(s.selector, QStringLiteral("epic"));
    QCOMPARE(s.recompute_set, qint64{12});
    QCOMPARE(s.global_rows.layers, 3);
    QCOMPARE(s.sliding_rows.reused, qint64{162});
    QCOMPARE(s.sections_used.size(), 2);
    QCOMPARE(s.sections_used[1].document_id, qint64{2});
    QCOMPARE(s.sections_used[1].unit, 2);
    const QString text = stats_text(s);
    QVERIFY2(text.contains(QStringLiteral("epic recomputed 12 tokens (global layers 25 % of rows, "
                                          "sliding 10 %)")),
             qPrintable(text));
    QVERIFY2(text.contains(QStringLiteral("2 of 5 sections used (bm25)")), qPrintable(text));
    QVERIFY(text.contains(QStringLiteral("full memory")));
    // Without a selector or left-out sections the line says neither; junk gives zeros.
    const AnswerStats plain = answer_stats_from_json(nlohmann::json::parse(
        R"({"ttft_ms": 10, "selector": 5, "units_used": "x", "layer_rows": []})"));
    QVERIFY(!stats_text(plain).contains(QStringLiteral("recomputed")));
    QVERIFY(!stats_text(plain).contains(QStringLiteral("sections")));
    QCOMPARE(plain.sections_used.size(), 0);
    // Why an answer ended, where its text would not say: cut at the longest answer, the
    // context full, stopped by the user; the model's own end says nothing.
    QVERIFY(stop_reason_text(QStringLiteral("max_tokens"), 128)
                .startsWith(QStringLiteral(" · cut at the longest answer, 128 tokens")));
    QCOMPARE(stop_reason_text(QStringLiteral("context_full"), 9),
             QStringLiteral(" · the context window is full"));
    QCOMPARE(stop_reason_text(QStringLiteral("stopped"), 3), QStringLiteral(" · stopped"));
    QCOMPARE(stop_reason_text(QStringLiteral("eog"), 12), QString());
    // A sekv answer names the router that zoomed (issue 8); one saved before it, none.
    const AnswerStats routed = answer_stats_from_json(nlohmann::json::parse(
        R"({"policy": "sekv", "router": "trained", "fast_tier_fraction": 0.31,
            "expansions": 4.2})"));
    QCOMPARE(routed.router, QStringLiteral("trained"));
    QVERIFY2(
        stats_text(routed).contains(QStringLiteral("spans expanded per token, trained router")),
        qPrintable(stats_text(routed)));
    QCOMPARE(routed.rerank, 0);
    QVERIFY(!stats_text(routed).contains(QStringLiteral("two-stage")));
    // With two-stage routing the answer says its N.
    const AnswerStats two_stage = answer_stats_from_json(nlohmann::json::parse(
        R"({"policy": "sekv", "router": "training-free", "rerank": 4, "expansions": 2.0})"));
    QCOMPARE(two_stage.rerank, 4);
    QVERIFY2(stats_text(two_stage).contains(QStringLiteral(
                 "training-free router, two-stage routing (4 candidates per expanded span)")),
             qPrintable(stats_text(two_stage)));
    // Which layers SEKV served and the whole cache against full (an all-global stack: SEKV on
    // its later half).
    const AnswerStats served = answer_stats_from_json(nlohmann::json::parse(
        R"({"policy": "sekv", "fast_tier_fraction": 0.577, "cache_fraction": 0.789,
            "expansions": 1.5, "memory_per_layer": [{"layer": 15}, {"layer": 16}, {"layer": 17}]})"));
    QCOMPARE(served.sekv_layers, (QList<int>{15, 16, 17}));
    QVERIFY2(
        stats_text(served).contains(QStringLiteral("sekv on 3 layers: fast tier 58 % of full "
                                                   "there, whole cache (both tiers) 79 % of full")),
        qPrintable(stats_text(served)));
    const AnswerStats older = answer_stats_from_json(
        nlohmann::json::parse(R"({"policy": "sekv", "fast_tier_fraction": 0.31})"));
    QVERIFY(older.router.isEmpty());
    QVERIFY(!stats_text(older).contains(QStringLiteral("router")));
    QVERIFY(!stats_text(older).contains(QStringLiteral("whole cache")));
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
    // The same file added again while its document is listed: its pending row goes when the
    // project names the document (it used to stay, "extracting text", under the document).
    m.upsert(doc("/a", 0, DocumentRow::Status::Extracting));
    QCOMPARE(m.rowCount(), 3);
    m.upsert(doc("/a", 1, DocumentRow::Status::Prefilling));
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.index(0).data(DocumentListModel::IdRole).toLongLong(), 1);
    QCOMPARE(m.index(1).data(DocumentListModel::IdRole).toLongLong(), 2);
    // A failed second read of it keeps its row (and reason) when the document is updated.
    auto failed = doc("/a", 0, DocumentRow::Status::Failed);
    failed.error = QStringLiteral("unreadable");
    m.upsert(failed);
    QCOMPARE(m.rowCount(), 3);
    m.upsert(doc("/a", 1, DocumentRow::Status::Ready));
    QCOMPARE(m.rowCount(), 3);
    QCOMPARE(m.index(2).data(DocumentListModel::StatusTextRole).toString(),
             QStringLiteral("failed: unreadable"));
    m.remove_row(2);

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

void GuiModels::shownTextMapsBytesToPositions() {
    // "é" is 2 bytes and 1 position, "𝄞" 4 bytes and 2 positions; page 2 starts at byte 6
    // (inside a line: a newline is added before its marker).
    const std::string text = "h\xC3\xA9llo\xF0\x9D\x84\x9E x";
    const auto shown = shown_text(text, {{0, 1}, {6, 2}});
    QCOMPARE(shown.text, QString::fromUtf8("[page 1]\nhéllo\n[page 2]\n𝄞 x"));
    const auto& p = shown.positions;
    QCOMPARE(p.bytes(), static_cast<int64_t>(text.size()));
    QCOMPARE(p.at(0), 9);   // "h", after "[page 1]\n"
    QCOMPARE(p.at(1), 10);  // "é"
    QCOMPARE(p.at(2), 10);  // inside "é": that character
    QCOMPARE(p.at(3), 11);  // "l"
    QCOMPARE(p.at(6), 24);  // "𝄞", after "\n[page 2]\n"
    QCOMPARE(p.at(8), 24);  // inside it
    QCOMPARE(p.at(10), 26); // " "
    QCOMPARE(p.at(static_cast<int64_t>(text.size())), static_cast<int>(shown.text.size()));
    QCOMPARE(p.at(-1), -1);
    QCOMPARE(p.at(static_cast<int64_t>(text.size()) + 1), -1);
    QCOMPARE(shown.text.mid(p.at(6), 2), QString::fromUtf8("𝄞"));
    // A page read by OCR says so; the positions follow its longer marker.
    const auto ocr = shown_text(text, {{0, 1}, {6, 2}}, {2});
    QCOMPARE(ocr.text, QString::fromUtf8("[page 1]\nhéllo\n[page 2, read by OCR]\n𝄞 x"));
    QCOMPARE(ocr.text.mid(ocr.positions.at(6), 2), QString::fromUtf8("𝄞"));
    // Without pages the text is shown as it is.
    QCOMPARE(shown_text("abc", {}).text, QStringLiteral("abc"));
    QCOMPARE(shown_text("abc", {}).positions.at(2), 2);
}

void GuiModels::answerZoomCountsSpansAndSplitsTokens() {
    const AnswerZoom z(42, made_up_trace());
    QCOMPARE(z.message_id(), 42);
    QCOMPARE(z.steps(), 3);
    QCOMPARE(z.rows(), 4);
    QCOMPARE(z.layers(), (std::vector<int>{5, 11}));
    QCOMPARE(z.heads(), 2);
    // Grid: spans expanded per (layer, head) row and step.
    const int expected[4][3] = {{2, 0, 1}, {1, 1, 1}, {2, 1, 2}, {0, 2, 2}};
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c)
            QCOMPARE(z.cell(r, c), expected[r][c]);
    QCOMPARE(z.cell(4, 0), 0);
    QCOMPARE(z.cell(0, 3), 0);
    // Counts per span: (layer, head) pairs at a step, summed over the steps for -1.
    QCOMPARE(z.span_counts(0), (std::map<int, int>{{1, 1}, {2, 3}, {7, 1}}));
    QCOMPARE(z.span_counts(2), (std::map<int, int>{{1, 1}, {4, 4}, {8, 1}}));
    QCOMPARE(z.span_counts(-1),
             (std::map<int, int>{{0, 1}, {1, 2}, {2, 3}, {3, 2}, {4, 4}, {7, 1}, {8, 1}, {9, 1}}));
    QVERIFY(z.span_counts(3).empty());
    QCOMPARE(z.mean_expansions(), 15.0 / 12.0);
    // Span ids to documents, sections and their own span index.
    SpanRef ref;
    QVERIFY(z.locate(5, &ref));
    QCOMPARE(ref.document_id, 1);
    QCOMPARE(ref.index, 5);
    QVERIFY(z.locate(7, &ref));
    QCOMPARE(ref.document_id, 2);
    QCOMPARE(ref.unit, 1);
    QCOMPARE(ref.index, 1);
    QVERIFY(!z.locate(10, &ref));
    // "é" goes to the token holding its first byte.
    QCOMPARE(z.text(), QString::fromUtf8(" Café ok"));
    QCOMPARE(z.token_texts(), (QStringList{QString::fromUtf8(" Café"), QString(), " ok"}));
    QCOMPARE(z.token_starts(), (QList<int>{0, 5, 5, 8}));
    // In the chat the answer is shown trimmed.
    QCOMPARE(shown_token_starts(QString::fromUtf8("Café ok"), z.text(), z.token_starts()),
             (QList<int>{0, 4, 4, 7}));
    QVERIFY(shown_token_starts(QStringLiteral("other"), z.text(), z.token_starts()).isEmpty());
}

void GuiModels::damagedTraceShapeIsRefused() {
    auto t = made_up_trace();
    t.trace.steps[1].layers[1].heads.pop_back();
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, AnswerZoom(1, t));
    t = made_up_trace();
    t.token_texts.pop_back();
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, AnswerZoom(1, t));
}

void GuiModels::documentViewTintsSpansAndDrawsTheZoom() {
    // "[page 1]\n" then the text; spans at bytes [0,5) "alpha", [6,10) "beta", [11,16)
    // "gamma" of section 0, one over header tokens (not drawn); anchors " " at 5 and 10.
    const std::string text = "alpha beta gamma";
    auto shown = shown_text(text, {{0, 1}});
    DocumentView v;
    v.resize(400, 300);
    v.show_document(3, shown.text, std::make_shared<const TextPositions>(shown.positions));
    auto spans = std::make_shared<DocumentSpans>();
    spans->document_id = 3;
    spanscope::UnitSpans u;
    u.document_id = 3;
    u.spans = {
        {-1, -1, 2, 1, 1.0f}, {0, 5, 5, 3, 2.5f}, {6, 10, 4, 2, 1.25f}, {11, 16, 6, 4, 3.0f}};
    u.anchors = {{5, 6}, {10, 11}};
    spans->units.push_back(u);
    v.set_spans(spans);
    QCOMPARE(v.span_marks().size(), 3);
    const QList<DocumentView::Range> ranges{{9, 14}, {15, 19}, {20, 25}};
    for (int i = 0; i < 3; ++i) {
        QCOMPARE(v.span_marks()[i].range, ranges[i]);
        QCOMPARE(v.span_marks()[i].index, i + 1);
    }
    QCOMPARE(v.anchor_ranges(), (QList<DocumentView::Range>{{14, 15}, {19, 20}}));
    // Alternating tints, then the anchors underlined.
    auto sel = v.extraSelections();
    QCOMPARE(sel.size(), 5);
    QCOMPARE(sel[0].cursor.selectedText(), QStringLiteral("alpha"));
    QVERIFY(sel[0].format.background() != sel[1].format.background());
    QCOMPARE(sel[0].format.background(), sel[2].format.background());
    QCOMPARE(sel[3].format.underlineStyle(), QTextCharFormat::SingleUnderline);
    QVERIFY2(v.tooltip_at(16).contains(QStringLiteral("Span 2 of section 1 · 4 tokens · rank 2")),
             qPrintable(v.tooltip_at(16)));
    QVERIFY(v.tooltip_at(16).contains(QStringLiteral("1.25")));
    QVERIFY(v.tooltip_at(14).startsWith(QStringLiteral("Anchor")));
    QVERIFY(v.tooltip_at(2).isEmpty()); // the page marker
    // Zoom: span 3 by 4 of 4 pairs, span 1 by 1; another section's span is not drawn.
    v.set_zoom({{{0, 3}, 4}, {{0, 1}, 1}, {{1, 0}, 2}}, 4, QStringLiteral("for a token"));
    QCOMPARE(v.zoom_marks().size(), 2);
    QCOMPARE(v.zoom_marks()[0].range, ranges[0]);
    QCOMPARE(v.zoom_marks()[0].count, 1);
    QCOMPARE(v.zoom_marks()[1].range, ranges[2]);
    QCOMPARE(v.zoom_marks()[1].count, 4);
    // A zoomed span is drawn in its heat by its own selection.
    sel = v.extraSelections();
    QCOMPARE(sel.size(), 5);
    QCOMPARE(v.zoom_marks()[1].span, 2);
    QCOMPARE(sel[2].format.background().color(), DocumentView::heat_colour(4, 4));
    QCOMPARE(sel[0].format.background().color(), DocumentView::heat_colour(1, 4));
    QVERIFY(sel[1].format.background() != sel[0].format.background());
    QVERIFY(DocumentView::heat_colour(4, 4) != DocumentView::heat_colour(1, 4));
    QVERIFY(v.tooltip_at(21).contains(QStringLiteral("expanded 4 times (for a token)")));
    QVERIFY(v.scroll_to_zoom());
    QCOMPARE(v.textCursor().position(), 9);
    // New spans keep the zoom; clearing it leaves the spans.
    v.set_spans(spans);
    QCOMPARE(v.zoom_marks().size(), 2);
    v.clear_zoom();
    QCOMPARE(v.zoom_marks().size(), 0);
    QCOMPARE(v.extraSelections().size(), 5);
    QVERIFY(!v.scroll_to_zoom());
    // Spans of another document are not drawn.
    spans->document_id = 4;
    v.set_spans(spans);
    QVERIFY(!v.has_spans());
}

void GuiModels::inspectorGridShowsEveryLayerHeadAndStep() {
    auto z = std::make_shared<const AnswerZoom>(42, made_up_trace());
    ZoomInspector inspector;
    inspector.resize(600, 400);
    inspector.show();
    QVERIFY(!inspector.message_text().isEmpty()); // nothing yet: says what to do
    inspector.set_zoom(z);
    QVERIFY(inspector.message_text().isEmpty());
    auto* grid = inspector.grid();
    QCOMPARE(grid->rows(), 4);
    QCOMPARE(grid->columns(), 3);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c)
            QCOMPARE(grid->value(r, c), z->cell(r, c));
    QCOMPARE(grid->row_label(3), QStringLiteral("layer 11 · head 1"));
    QVERIFY2(inspector.rate_text().startsWith(QStringLiteral("1.3 spans per token and head (12.5 % "
                                                             "of the 10 spans)")),
             qPrintable(inspector.rate_text()));
    QSignalSpy selected(&inspector, &ZoomInspector::step_selected);
    QTest::mouseClick(grid, Qt::LeftButton, {}, grid->cell_rect(2, 1).center());
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected[0][0].toInt(), 1);
    QCOMPARE(grid->selected_step(), 1);
    QTest::mouseClick(grid, Qt::LeftButton, {}, QPoint(2, 2)); // the labels: nothing
    QCOMPARE(selected.count(), 1);
    QVERIFY(!grid->grab().isNull());
    QVERIFY(!inspector.chart()->grab().isNull());
    // No trace: the reason, in words.
    inspector.set_zoom(nullptr, QStringLiteral("no zoom trace"));
    QCOMPARE(inspector.message_text(), QStringLiteral("no zoom trace"));
    QCOMPARE(grid->rows(), 0);
}

void GuiModels::answerTokensAreClickable() {
    ChatModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    MessageRow q{1, true, "where?", "", false};
    MessageRow a{2, false, QString::fromUtf8(" Café ok\n"), "stats", false};
    a.sekv = true;
    m.set_messages(7, {q, a});
    const AnswerZoom z(2, made_up_trace());
    QVERIFY(!m.set_tokens(9, z.text(), z.token_starts())); // no such message
    QVERIFY(m.set_tokens(2, z.text(), z.token_starts()));
    QCOMPARE(m.index(1).data(ChatModel::TokenStartsRole).value<QList<int>>(),
             (QList<int>{0, 4, 4, 7}));
    QListView view;
    ChatDelegate delegate;
    view.setItemDelegate(&delegate);
    view.setModel(&m);
    view.resize(400, 300);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    const QModelIndex answer = m.index(1);
    const auto option = ChatDelegate::option_for(&view, answer);
    QVERIFY(delegate.token_rect(option, answer, 1).isEmpty()); // empty token: not shown
    for (const int t : {0, 2}) {
        const QRect r = delegate.token_rect(option, answer, t);
        QVERIFY(!r.isEmpty());
        QCOMPARE(delegate.token_at(option, answer, r.center()), t);
    }
    QCOMPARE(delegate.token_at(option, answer, option.rect.bottomRight() - QPoint(2, 2)), -1);
    QCOMPARE(delegate.token_at(option, m.index(0), option.rect.center()), -1); // a question
    QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
    m.select_token(2, 2);
    QCOMPARE(m.index(1).data(ChatModel::SelectedTokenRole).toInt(), 2);
    QCOMPARE(m.index(0).data(ChatModel::SelectedTokenRole).toInt(), -1);
    QCOMPARE(changed.count(), 1);
    m.select_token(2, 2);
    QCOMPARE(changed.count(), 1); // unchanged: no signal
    QVERIFY(!view.grab().isNull());
}

// An answer's line ends start new lines in the chat (QTextLayout ignores '\n' itself: the
// words around it were drawn joined, "can⏎distribute" as "candistribute").
void GuiModels::lineBreaksInAnAnswerBreakItsLines() {
    ChatModel m;
    m.set_messages(7, {MessageRow{1, false, QStringLiteral("can\ndistribute"), "", false},
                       MessageRow{2, false, QStringLiteral("can distribute"), "", false}});
    QListView view;
    ChatDelegate delegate;
    view.setItemDelegate(&delegate);
    view.setModel(&m);
    view.resize(400, 300);
    const auto broken = ChatDelegate::option_for(&view, m.index(0));
    const auto spaced = ChatDelegate::option_for(&view, m.index(1));
    const int line = QFontMetrics(broken.font).lineSpacing();
    QCOMPARE(delegate.sizeHint(broken, m.index(0)).height(),
             delegate.sizeHint(spaced, m.index(1)).height() + line);
}

QTEST_MAIN(GuiModels)
#include "test_gui_models.moc"
