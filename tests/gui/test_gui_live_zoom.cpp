// Live zoom (docs/desktop-app.md, "Live zoom"): while a sekv answer streams, the document view
// and the inspector show each generated token's zoom as it comes. On made-up data: the rule
// that picks the spans that carried a token's attention mass, a streamed zoom growing step by
// step, and the view's two live tints. With the real model, offscreen: every token's step is
// drawn before the answer ends — while its later pieces are still to come — and the spans drawn
// are exactly those the delivered step expanded in the shown document, tinted by the rule; the
// steps streamed are the ones saved with the answer; once it is saved the views show what they
// showed before live zoom existed.
#include "gui_test_support.h"

#include "answering/document_spans.h"
#include "answering/project_settings.h"
#include "answering/state_cache.h"
#include "engine/model/model.h"
#include "storage/project.h"
#include "ui/document_view.h"
#include "ui/zoom_inspector.h"

#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

using namespace spanscope;
using namespace spanscope::gui;

namespace {

using Range = DocumentView::Range;
struct Mark {
    Range range;
    int count = 0;
    bool carried = false;
    bool operator==(const Mark&) const = default;
};

ZoomHead head(std::vector<int32_t> spans, std::vector<float> mass) {
    ZoomHead h;
    h.relevance.assign(spans.size(), 0.5f);
    h.spans = std::move(spans);
    h.mass = std::move(mass);
    return h;
}

// The docs' rule, written apart from ui/zoom_data.cpp: per span, the mass summed over layers and
// heads; from the largest down (ties: lower id) the spans until half the total is held, at
// least one; all of them when a head with spans has no mass.
std::set<int> carried_by_rule(const ZoomStep& step, bool* measured) {
    std::map<int, double> mass;
    bool all_measured = true;
    for (const auto& l : step.layers)
        for (const auto& h : l.heads) {
            if (!h.spans.empty() && h.mass.size() != h.spans.size())
                all_measured = false;
            for (size_t i = 0; i < h.spans.size(); ++i)
                mass[h.spans[i]] += i < h.mass.size() ? h.mass[i] : 0.0;
        }
    double total = 0;
    for (const auto& [id, m] : mass)
        total += m;
    *measured = all_measured && total > 0;
    std::set<int> out;
    if (!*measured) {
        for (const auto& [id, m] : mass)
            out.insert(id);
        return out;
    }
    std::vector<std::pair<int, double>> order(mass.begin(), mass.end());
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    double held = 0;
    for (const auto& [id, m] : order) {
        out.insert(id);
        held += m;
        if (held >= total / 2)
            break;
    }
    return out;
}

bool same_step(const ZoomStep& a, const ZoomStep& b) {
    if (a.layers.size() != b.layers.size() || a.fast_tier_bytes != b.fast_tier_bytes ||
        a.host_tier_bytes != b.host_tier_bytes)
        return false;
    for (size_t l = 0; l < a.layers.size(); ++l) {
        const auto &x = a.layers[l], &y = b.layers[l];
        if (x.layer != y.layer || x.heads.size() != y.heads.size())
            return false;
        for (size_t h = 0; h < x.heads.size(); ++h)
            if (x.heads[h].spans != y.heads[h].spans ||
                x.heads[h].relevance != y.heads[h].relevance || x.heads[h].mass != y.heads[h].mass)
                return false;
    }
    return true;
}
} // namespace

class GuiLiveZoom : public QObject {
    Q_OBJECT
private slots:
    void carriedSpansHoldHalfTheMass();
    void streamedZoomGrowsStepByStep();
    void documentViewDrawsTheLiveZoom();
    void zoomIsDrawnWhileTheAnswerStreams();

private:
    /// The spans of a document as the engine builds them for `budget`, read apart from the
    /// window, as ranges of the shown text (plain text: no page markers), per (unit, index).
    std::map<std::pair<int, int>, Range> reference_spans(const Model& model, const QString& project,
                                                         int64_t document_id, double budget);
};

void GuiLiveZoom::carriedSpansHoldHalfTheMass() {
    // Summed: span 1 0.40, 7 0.20, 4 0.15, 2 0.07 of 0.82; 1 alone holds less than half.
    ZoomStep step;
    step.layers = {
        {5, {head({1, 2, 4}, {0.30f, 0.05f, 0.10f}), head({2, 7}, {0.02f, 0.20f})}},
        {11, {head({1, 4}, {0.10f, 0.05f}), head({}, {})}},
    };
    auto s = token_spans(step);
    QVERIFY(s.measured);
    QCOMPARE(s.counts, (std::map<int, int>{{1, 2}, {2, 2}, {4, 2}, {7, 1}}));
    QCOMPARE(s.carried, (std::set<int>{1, 7}));
    QCOMPARE(s.mass.size(), size_t{4});
    QVERIFY(std::abs(s.mass[1] - 0.40) < 1e-6);
    // One span that holds most of it carries it alone.
    step.layers[0].heads[0].mass = {0.90f, 0.01f, 0.01f};
    s = token_spans(step);
    QCOMPARE(s.carried, (std::set<int>{1}));
    // Ties go to the lower id: 3 and 6 hold half each, 3 is enough.
    ZoomStep tie;
    tie.layers = {{5, {head({3, 6}, {0.25f, 0.25f})}}};
    QCOMPARE(token_spans(tie).carried, (std::set<int>{3}));
    // A head with spans but no mass: not measured, every expanded span is drawn alike.
    step.layers[1].heads[0].mass.clear();
    s = token_spans(step);
    QVERIFY(!s.measured);
    QVERIFY(s.mass.empty());
    QCOMPARE(s.carried, (std::set<int>{1, 2, 4, 7}));
    // No mass anywhere (an old trace, the GPU backend), or none at all: the same.
    ZoomStep zero;
    zero.layers = {{5, {head({2, 9}, {0.0f, 0.0f})}}};
    QVERIFY(!token_spans(zero).measured);
    QCOMPARE(token_spans(zero).carried, (std::set<int>{2, 9}));
    const auto empty = token_spans(ZoomStep{});
    QVERIFY(empty.counts.empty() && empty.carried.empty() && !empty.measured);
    // The test's own rule agrees on these.
    bool measured = false;
    QCOMPARE(carried_by_rule(tie, &measured), (std::set<int>{3}));
    QVERIFY(measured);
}

void GuiLiveZoom::streamedZoomGrowsStepByStep() {
    StoredZoomTrace t;
    t.trace.n_spans = 10;
    t.sources = {{1, 0, 0, 6, 0}, {2, 0, 6, 4, 300}};
    AnswerZoom z(0, t);
    QCOMPARE(z.steps(), 0);
    QCOMPARE(z.rows(), 0);
    ZoomStep a;
    a.layers = {{5, {head({1, 7}, {0.1f, 0.2f}), head({7}, {0.3f})}},
                {11, {head({}, {}), head({2}, {0.4f})}}};
    a.fast_tier_bytes = 100;
    z.append_step(a);
    QCOMPARE(z.steps(), 1);
    QCOMPARE(z.layers(), (std::vector<int>{5, 11}));
    QCOMPARE(z.heads(), 2);
    QCOMPARE(z.cell(0, 0), 2);
    QCOMPARE(z.cell(2, 0), 0);
    QCOMPARE(z.span_counts(0), (std::map<int, int>{{1, 1}, {2, 1}, {7, 2}}));
    z.append_step(a, " word");
    QCOMPARE(z.steps(), 2);
    QCOMPARE(z.token_texts(), (QStringList{QString(), QStringLiteral(" word")}));
    QCOMPARE(z.token_starts(), (QList<int>{0, 0, 5}));
    SpanRef ref;
    QVERIFY(z.locate(7, &ref));
    QCOMPARE(ref.document_id, 2);
    QCOMPARE(ref.index, 1);
    // A step with other layers is refused and changes nothing.
    ZoomStep other = a;
    other.layers.pop_back();
    QVERIFY_THROWS_EXCEPTION(std::runtime_error, z.append_step(other));
    QCOMPARE(z.steps(), 2);
    QCOMPARE(z.token_texts().size(), 2);
}

void GuiLiveZoom::documentViewDrawsTheLiveZoom() {
    // "alpha beta gamma": spans 0, 1, 2 of section 0 at [0,5), [6,10), [11,16).
    const std::string text = "alpha beta gamma";
    auto shown = shown_text(text, {});
    DocumentView v;
    v.resize(400, 300);
    v.show_document(3, shown.text, std::make_shared<const TextPositions>(shown.positions));
    auto spans = std::make_shared<DocumentSpans>();
    spans->document_id = 3;
    spanscope::UnitSpans u;
    u.document_id = 3;
    u.spans = {{0, 5, 5, 3, 2.5f}, {6, 10, 4, 2, 1.25f}, {11, 16, 6, 4, 3.0f}};
    spans->units.push_back(u);
    v.set_spans(spans);
    QSignalSpy changed(&v, &DocumentView::zoom_changed);
    QCOMPARE(v.live_token(), -1);
    // Token 4 expanded spans 0 (carried the mass, 3 pairs) and 2 (1 pair); another section's
    // span is not drawn.
    v.set_live_zoom({{{0, 0}, {3, true}}, {{0, 2}, {1, false}}, {{1, 0}, {2, true}}}, 4, true,
                    QStringLiteral("token 4"));
    QCOMPARE(changed.count(), 1);
    QCOMPARE(v.live_token(), 4);
    QCOMPARE(v.zoom_marks().size(), 2);
    QCOMPARE(v.zoom_marks()[0].range, (Range{0, 5}));
    QVERIFY(v.zoom_marks()[0].carried);
    QCOMPARE(v.zoom_marks()[0].count, 3);
    QCOMPARE(v.zoom_marks()[1].range, (Range{11, 16}));
    QVERIFY(!v.zoom_marks()[1].carried);
    // Each span by its own selection: the zoomed ones in their live tint, the other as before.
    const auto untinted = v.extraSelections()[1].format.background();
    auto sel = v.extraSelections();
    QCOMPARE(sel.size(), 3);
    QCOMPARE(sel[0].format.background().color(), DocumentView::live_colour(true));
    QCOMPARE(sel[2].format.background().color(), DocumentView::live_colour(false));
    QVERIFY(sel[1].format.background().color() != DocumentView::live_colour(false));
    QVERIFY(DocumentView::live_colour(true) != DocumentView::live_colour(false));
    QVERIFY2(v.tooltip_at(1).contains(QStringLiteral("carried most of its attention")),
             qPrintable(v.tooltip_at(1)));
    QVERIFY2(v.tooltip_at(12).contains(QStringLiteral("carried little")),
             qPrintable(v.tooltip_at(12)));
    QVERIFY(!v.tooltip_at(7).contains(QStringLiteral("Zoom")));
    // New spans keep the live zoom on their ranges.
    v.set_spans(spans);
    QCOMPARE(v.live_token(), 4);
    QCOMPARE(v.zoom_marks().size(), 2);
    // Not measured: the tooltip says so.
    v.set_live_zoom({{{0, 1}, {2, true}}}, 5, false, QStringLiteral("token 5"));
    QVERIFY2(v.tooltip_at(7).contains(QStringLiteral("not measured")), qPrintable(v.tooltip_at(7)));
    // A saved answer's heat replaces it; clearing clears.
    v.set_zoom({{{0, 1}, 2}}, 4, QStringLiteral("for a token"));
    QCOMPARE(v.live_token(), -1);
    QVERIFY(!v.zoom_marks()[0].carried);
    QCOMPARE(v.extraSelections()[1].format.background().color(), DocumentView::heat_colour(2, 4));
    v.clear_zoom();
    QVERIFY(v.zoom_marks().isEmpty());
    QCOMPARE(v.extraSelections()[1].format.background(), untinted);
    QCOMPARE(changed.count(), 5);
}

std::map<std::pair<int, int>, Range> GuiLiveZoom::reference_spans(const Model& model,
                                                                  const QString& project_path,
                                                                  int64_t document_id,
                                                                  double budget) {
    auto project = Project::open(project_path.toStdString(), false);
    StateCache cache(*project, model, chunking_for(*project, model));
    SekvOptions o;
    o.budget = budget;
    const std::string text = project->document_text(document_id);
    const auto pos = [&](int64_t byte) {
        return static_cast<int>(QString::fromUtf8(text.data(), byte).size());
    };
    std::map<std::pair<int, int>, Range> out;
    for (const auto& u : document_sekv_spans(cache, document_id, o))
        for (size_t i = 0; i < u.spans.size(); ++i)
            if (u.spans[i].char_begin >= 0 && u.spans[i].char_end > u.spans[i].char_begin)
                out[{u.unit, static_cast<int>(i)}] = {pos(u.spans[i].char_begin),
                                                      pos(u.spans[i].char_end)};
    return out;
}

void GuiLiveZoom::zoomIsDrawnWhileTheAnswerStreams() {
    QStandardPaths::setTestModeEnabled(true);
    QString why;
    const QString model_path = real_model_path(&why);
    if (model_path.isEmpty())
        QSKIP(qPrintable("the real model is not installed: " + why));
    for (const auto& f : {kBsd, kRbash})
        QVERIFY2(QFile::exists(f), qPrintable(f + " is missing (see scripts/setup.sh)"));
    const auto model = Model::load(model_path.toStdString());
    QTemporaryDir dir;
    const QString project = dir.filePath(QStringLiteral("live.spanscope"));
    AppSettings s;
    s.model_path = model_path;
    s.threads = 2;
    s.generation.max_tokens = 12;
    s.memory.policy = QStringLiteral("sekv");
    s.memory.budget = 0.9; // the two short documents get spans at this budget (test_gui_sekv)
    MainWindow w(s, /*persist_settings=*/false);
    w.resize(1280, 800);
    w.show();
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QVERIFY(ready.wait(60000));
    QVERIFY2(ready[0][0].toBool(), qPrintable(w.banner_text()));
    QSignalSpy opened(&w, &MainWindow::project_ready);
    w.open_project(project, true);
    QVERIFY(opened.wait(30000));
    QSignalSpy ingested(&w, &MainWindow::ingest_done);
    w.add_documents({kBsd, kRbash});
    QVERIFY(ingested.wait(300000));
    QCOMPARE(ingested[0][0].toInt(), 2);
    auto* docs = w.document_model();
    const qint64 bsd = docs->row(docs->row(0).name == QStringLiteral("BSD") ? 0 : 1).id;
    w.show_document(bsd);
    auto* view = w.document_view();
    QTRY_VERIFY_WITH_TIMEOUT(view->document_id() == bsd && view->has_spans(), 60000);
    const auto spans = reference_spans(*model, project, bsd, s.memory.budget);
    QVERIFY(spans.size() >= 3);

    // Every change of the view's zoom: live ones with what was drawn and the step behind it,
    // and how much of the answer had streamed into the chat by then.
    struct Draw {
        int token = 0;
        QList<Mark> marks;
        ZoomStep step;
        QString streamed;
    };
    QList<Draw> draws;
    bool finished = false;
    int live_after_finish = 0;
    auto* chat = w.chat_model();
    QString streamed; // the answer's text as its pieces came
    const auto piece_conn =
        connect(chat, &QAbstractItemModel::dataChanged, this, [&](const QModelIndex& i) {
            if (chat->streaming() && i.row() == chat->rowCount() - 1)
                streamed = chat->messages().last().text;
        });
    const auto zoom_conn = connect(view, &DocumentView::zoom_changed, this, [&] {
        if (view->live_token() < 0)
            return;
        if (finished) {
            ++live_after_finish;
            return;
        }
        Draw d;
        d.token = view->live_token();
        for (const auto& m : view->zoom_marks())
            d.marks << Mark{m.range, m.count, m.carried};
        const auto z = w.streamed_zoom();
        if (z && d.token < z->steps())
            d.step = z->stored().trace.steps[static_cast<size_t>(d.token)];
        d.streamed = chat->messages().last().text;
        draws << d;
    });
    QSignalSpy loaded(&w, &MainWindow::zoom_loaded);
    QSignalSpy done(&w, &MainWindow::answer_done);
    connect(&w, &MainWindow::answer_done, this, [&] { finished = true; });
    GapMeter gaps; // what drawing each token costs the event loop (reported, not asserted)
    gaps.resume();
    w.ask(QStringLiteral("Who holds the copyright?"));
    QVERIFY(done.wait(120000));
    gaps.pause();
    disconnect(piece_conn);
    const auto a = done[0][0].value<AnswerStats>();
    QVERIFY2(!a.text.isEmpty(), qPrintable(w.banner_text()));
    QCOMPARE(a.policy, QStringLiteral("sekv"));
    QVERIFY(a.message_id > 0);
    QVERIFY(a.generated_tokens >= 2);

    // Drawn before the answer ended, and while it was still streaming: the first token's zoom
    // came before the rest of the answer's text.
    qInfo("%lld live zoom updates before the answer ended, %lld tokens; longest stall of the "
          "event loop meanwhile %.1f ms",
          static_cast<long long>(draws.size()), static_cast<long long>(a.generated_tokens),
          gaps.max_stall_ms());
    QVERIFY(!draws.isEmpty());
    QVERIFY2(draws.front().streamed.size() < streamed.size(),
             qPrintable(QStringLiteral("the first zoom was drawn with \"%1\" of \"%2\" streamed")
                            .arg(draws.front().streamed, streamed)));
    QCOMPARE(live_after_finish, 0);

    // One step per token, in order, each the step saved with the answer at that index.
    const auto streamed_zoom = w.streamed_zoom();
    QVERIFY(streamed_zoom);
    QVERIFY(!w.live_zoom_shown());
    StoredZoomTrace saved;
    {
        auto p = Project::open(project.toStdString(), false);
        const auto blob = p->zoom_trace(a.message_id);
        QVERIFY(blob.has_value());
        saved = decode_zoom_trace(*blob);
    }
    const auto& steps = saved.trace.steps;
    QCOMPARE(static_cast<qint64>(steps.size()), a.generated_tokens);
    QCOMPARE(streamed_zoom->steps(), static_cast<int>(steps.size()));
    QCOMPARE(streamed_zoom->stored().sources.size(), saved.sources.size());
    for (size_t i = 0; i < steps.size(); ++i)
        QVERIFY2(same_step(streamed_zoom->stored().trace.steps[i], steps[i]),
                 qPrintable(QStringLiteral("step %1").arg(i)));
    QCOMPARE(draws.size(), static_cast<qsizetype>(steps.size()));

    // Each draw shows exactly the spans its step expanded in the shown document, tinted by the
    // rule, and that step is the one saved at its index.
    int non_empty = 0, carried = 0, expanded = 0, measured_steps = 0;
    for (int k = 0; k < draws.size(); ++k) {
        const auto& d = draws[k];
        QCOMPARE(d.token, k);
        QVERIFY2(same_step(d.step, steps[static_cast<size_t>(d.token)]),
                 qPrintable(QStringLiteral("token %1").arg(d.token)));
        bool measured = false;
        const auto strong = carried_by_rule(d.step, &measured);
        measured_steps += measured;
        std::map<int, int> counts;
        for (const auto& l : d.step.layers)
            for (const auto& h : l.heads)
                for (const auto id : h.spans)
                    ++counts[id];
        QList<Mark> expected;
        for (const auto& [id, n] : counts)
            for (const auto& src : saved.sources)
                if (src.document_id == bsd && id >= src.first_span &&
                    id < src.first_span + src.n_spans) {
                    const auto it = spans.find({src.unit, id - src.first_span});
                    if (it != spans.end())
                        expected << Mark{it->second, n, strong.count(id) > 0};
                }
        std::sort(expected.begin(), expected.end(),
                  [](const Mark& x, const Mark& y) { return x.range.begin < y.range.begin; });
        QCOMPARE(d.marks.size(), expected.size());
        for (int m = 0; m < expected.size(); ++m) {
            QCOMPARE(d.marks[m].range, expected[m].range);
            QCOMPARE(d.marks[m].count, expected[m].count);
            QCOMPARE(d.marks[m].carried, expected[m].carried);
            (d.marks[m].carried ? carried : expanded) += 1;
        }
        non_empty += !d.marks.isEmpty();
    }
    qInfo("%d of %lld tokens with their attention mass measured; drawn in the document: %d "
          "spans that carried it, %d others expanded",
          measured_steps, static_cast<long long>(draws.size()), carried, expanded);
    QVERIFY(non_empty > 0);
    // On the CPU backend every SEKV head measures the mass of the spans it expanded: a step
    // with spans but no mass would mean the masses were lost on the way (streamed and saved
    // alike, which same_step alone would not see).
    int with_spans = 0;
    for (const auto& d : draws) {
        bool any = false;
        for (const auto& l : d.step.layers)
            for (const auto& h : l.heads)
                any = any || !h.spans.empty();
        with_spans += any;
    }
    QVERIFY(with_spans > 0);
    QCOMPARE(measured_steps, with_spans);

    // Once saved, the views are what they were before live zoom: the saved trace in the
    // inspector, no token drawn until one is clicked, and then its heat.
    QTRY_VERIFY_WITH_TIMEOUT(!loaded.isEmpty() && loaded.last()[0].toLongLong() == a.message_id,
                             10000);
    QCOMPARE(loaded.last()[1].toBool(), true);
    QVERIFY(w.inspector()->zoom());
    QCOMPARE(w.inspector()->zoom()->message_id(), a.message_id);
    QCOMPARE(w.inspector()->grid()->columns(), static_cast<int>(steps.size()));
    QCOMPARE(view->live_token(), -1);
    QVERIFY(view->zoom_marks().isEmpty());
    QCOMPARE(w.selected_token(), -1);
    QSignalSpy shown(&w, &MainWindow::zoom_shown);
    w.select_answer_token(a.message_id, 0);
    QCOMPARE(w.selected_token(), 0);
    QTRY_VERIFY_WITH_TIMEOUT(!shown.isEmpty(), 30000);
    QCOMPARE(view->live_token(), -1);
    for (const auto& m : view->zoom_marks())
        QVERIFY(!m.carried);
    disconnect(zoom_conn);
}

QTEST_MAIN(GuiLiveZoom)
#include "test_gui_live_zoom.moc"
