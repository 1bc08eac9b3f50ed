// What the window does with a project when Settings switches the model, on two tiny model files
// the test writes (tests/unit/tiny_model.h; no real model needed): a chat continued under the
// other model starts its history afresh and says so once, and the status bar, the banner and
// the document rows describe the new model, its recompute included.
#include "storage/project.h"
#include "test_support.h"
#include "tiny_model.h"
#include "ui/app_settings.h"
#include "ui/chat_export.h"
#include "ui/document_view.h"
#include "ui/main_window.h"

#include <QFile>
#include <QLabel>
#include <QListView>
#include <QLocale>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

using namespace spanscope;
using namespace spanscope::gui;

namespace {

constexpr int kLayers = 4, kHeadDim = 32;
// Two models with other key/value heads (so another cost per token) and other weights.
constexpr int kHeadsKvA = 2, kHeadsKvB = 1;

test::TinyGemma3Config tiny(int heads_kv, uint64_t seed, const std::string& name) {
    test::TinyGemma3Config c;
    c.n_layer = kLayers;
    c.n_head_kv = heads_kv;
    c.head_dim = kHeadDim;
    c.n_ctx = 1024;
    c.seed = seed;
    c.name = name;
    return c;
}

/// A key and a value row of heads_kv × kHeadDim f16 values per layer.
qint64 kv_bytes_per_token(int heads_kv) {
    return qint64{kLayers} * 2 * heads_kv * kHeadDim * 2;
}

/// A saved message's statistics.
nlohmann::json stats_of(const MessageRecord& m) {
    return nlohmann::json::parse(m.stats_json);
}

/// The chat view's note lines.
QStringList notes_of(const ChatModel& chat) {
    QStringList notes;
    for (const auto& m : chat.messages())
        if (m.note)
            notes << m.text;
    return notes;
}

} // namespace

class GuiModelSwitch : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void aContinuedChatStartsItsHistoryAfresh();
    void answersSavedWithoutAModelCountAsTheCurrentOnes();
    void theStatusDescribesTheNewModel();
    void anotherModelsZoomIsNotDrawnAndNamesTheModel();

private:
    QString path(const QString& name) const { return dir_.filePath(name); }
    /// A window on model_a_ (the full policy unless another is given, 4-token greedy answers)
    /// with a project holding the note; false (and the reason in `why`) when something fails.
    bool open_window(std::unique_ptr<MainWindow>& w, const QString& project, QString* why,
                     const QString& policy = QStringLiteral("full"));
    /// Ask in the window's current chat and wait for the answer.
    static bool ask(MainWindow& w, const QString& question, AnswerStats* stats, QString* why);
    /// Settings ▸ `model`, OK; waits until the model is loaded and the project read again.
    static bool switch_to(MainWindow& w, const QString& model, QString* why);
    QTemporaryDir dir_;
    QString model_a_, model_b_, note_;
};

void GuiModelSwitch::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    model_a_ = path(QStringLiteral("tiny-a.gguf"));
    model_b_ = path(QStringLiteral("tiny-b.gguf"));
    test::write_tiny_gemma3(model_a_.toStdString(), tiny(kHeadsKvA, 1, "tiny model A"));
    test::write_tiny_gemma3(model_b_.toStdString(), tiny(kHeadsKvB, 2, "tiny model B"));
    note_ = path(QStringLiteral("note.txt"));
    QFile f(note_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("The lighthouse on the north cape was built in 1874 and painted red and white. "
            "Its keeper kept a log of every ship that passed.\n");
}

bool GuiModelSwitch::open_window(std::unique_ptr<MainWindow>& w, const QString& project,
                                 QString* why, const QString& policy) {
    AppSettings s;
    s.model_path = model_a_;
    s.model_files = {model_a_, model_b_};
    s.threads = 1;
    s.generation.max_tokens = 4;
    s.memory.policy = policy;
    w = std::make_unique<MainWindow>(s, /*persist_settings=*/false);
    QSignalSpy ready(w.get(), &MainWindow::model_ready);
    if (!ready.wait(30000) || !ready[0][0].toBool()) {
        *why = QStringLiteral("model A did not load: ") + w->banner_text();
        return false;
    }
    QSignalSpy opened(w.get(), &MainWindow::project_ready);
    w->open_project(project, true);
    if (!opened.wait(30000)) {
        *why = QStringLiteral("the project did not open");
        return false;
    }
    QSignalSpy ingested(w.get(), &MainWindow::ingest_done);
    w->add_documents({note_});
    if (!ingested.wait(60000) || ingested[0][0].toInt() != 1) {
        *why = QStringLiteral("the note was not added: ") + w->banner_text();
        return false;
    }
    return true;
}

bool GuiModelSwitch::ask(MainWindow& w, const QString& question, AnswerStats* stats, QString* why) {
    QSignalSpy answered(&w, &MainWindow::answer_done);
    QSignalSpy failed(&w, &MainWindow::answer_error);
    w.ask(question);
    if (!answered.wait(60000)) {
        *why = failed.isEmpty() ? QStringLiteral("no answer to '%1'").arg(question)
                                : failed[0][0].toString();
        return false;
    }
    *stats = answered[0][0].value<AnswerStats>();
    return true;
}

bool GuiModelSwitch::switch_to(MainWindow& w, const QString& model, QString* why) {
    AppSettings other = w.settings();
    other.model_path = model;
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QSignalSpy opened(&w, &MainWindow::project_ready);
    w.apply_settings(other);
    if (!ready.wait(30000) || !ready[0][0].toBool()) {
        *why = QStringLiteral("the model did not load: ") + w.banner_text();
        return false;
    }
    // The engine thread reopens the project right after the load: its signal may have come
    // while the test waited for the model.
    if (opened.isEmpty() && !opened.wait(30000)) {
        *why = QStringLiteral("the project was not read again");
        return false;
    }
    return true;
}

void GuiModelSwitch::aContinuedChatStartsItsHistoryAfresh() {
    QTemporaryDir work;
    const QString project = work.filePath(QStringLiteral("p.spanscope"));
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, project, &why), qPrintable(why));

    // Model A answers the chat's first question.
    AnswerStats a1;
    QVERIFY2(ask(*w, QStringLiteral("When was the lighthouse built?"), &a1, &why), qPrintable(why));
    const qint64 chat = a1.chat_id;
    QVERIFY(chat > 0);
    {
        auto p = Project::open(project.toStdString(), false);
        const auto m = p->messages(chat);
        QCOMPARE(m.size(), size_t{2});
        // The premise: a turn with text, which a continued chat would send as history.
        QVERIFY2(!m[1].text.empty(), "model A's answer has no text: nothing to send as history");
        QCOMPARE(stats_of(m[1]).value("model_file", ""), std::string("tiny-a.gguf"));
    }

    // Switched to model B, the same chat goes on.
    QVERIFY2(switch_to(*w, model_b_, &why), qPrintable(why));
    QCOMPARE(w->chat_model()->chat_id(), chat);
    const QString q2 = QStringLiteral("Who kept a log?");
    AnswerStats a2;
    QVERIFY2(ask(*w, q2, &a2, &why), qPrintable(why));
    QCOMPARE(a2.chat_id, chat);
    // The chat view says so once, on a line before the question asked of model B.
    const auto& rows = w->chat_model()->messages();
    QCOMPARE(rows.size(), 5);
    QVERIFY(rows[2].note);
    QCOMPARE(rows[3].text, q2);
    QCOMPARE(notes_of(*w->chat_model()),
             QStringList{QStringLiteral("Continued with tiny-b.gguf: none of the turns above is "
                                        "sent to it as history (the last were answered by "
                                        "tiny-a.gguf).")});
    qInfo("chat note: %s", qPrintable(rows[2].text));

    // The same question in a new chat, under model B: the prompt the continued chat must have
    // sent (no earlier turn in it).
    w->new_chat();
    AnswerStats fresh;
    QVERIFY2(ask(*w, q2, &fresh, &why), qPrintable(why));
    QVERIFY(fresh.chat_id != chat);
    {
        auto p = Project::open(project.toStdString(), false);
        const auto m = p->messages(chat);
        QCOMPARE(m.size(), size_t{4});
        const auto s = stats_of(m[3]);
        const auto continued_prompt = s.value("prompt_tokens", int64_t{0});
        const auto fresh_prompt =
            stats_of(p->messages(fresh.chat_id)[1]).value("prompt_tokens", int64_t{0});
        qInfo("model B's prompt: %lld tokens in the continued chat, %lld in a new one",
              static_cast<long long>(continued_prompt), static_cast<long long>(fresh_prompt));
        QVERIFY(fresh_prompt > 0);
        QCOMPARE(continued_prompt, fresh_prompt);
        // The answer's statistics say so, and name its model.
        QCOMPARE(s.value("history_turns", -1), 0);
        QCOMPARE(s.value("history_left_out", -1), 1);
        QCOMPARE(s.value("model_file", ""), std::string("tiny-b.gguf"));
    }

    // Back in the continued chat (read from the project): the note is where it was, once; and
    // model B's own turn is its history now.
    auto* list = w->findChild<QListView*>(QStringLiteral("chatList"));
    QVERIFY(list);
    const int r = w->chat_list_model()->row_of_id(chat);
    QVERIFY(r >= 0);
    list->setCurrentIndex(w->chat_list_model()->index(r));
    QVERIFY(QTest::qWaitFor(
        [&] {
            return w->chat_model()->chat_id() == chat && w->chat_model()->messages().size() == 5;
        },
        10000));
    QVERIFY(w->chat_model()->messages()[2].note);
    QCOMPARE(notes_of(*w->chat_model()).size(), 1);
    QVERIFY(chat_markdown(QStringLiteral("t"), w->chat_model()->messages())
                .contains(QStringLiteral("\n_Continued with tiny-b.gguf: ")));
    AnswerStats a3;
    QVERIFY2(ask(*w, QStringLiteral("What colour is the lighthouse?"), &a3, &why), qPrintable(why));
    {
        auto p = Project::open(project.toStdString(), false);
        const auto m = p->messages(chat);
        QCOMPARE(m.size(), size_t{6});
        QVERIFY2(!m[3].text.empty(), "model B's first answer has no text");
        const auto s = stats_of(m[5]);
        QCOMPARE(s.value("history_turns", -1), 1);
        QCOMPARE(s.value("history_left_out", -1), 1);
    }
    QCOMPARE(notes_of(*w->chat_model()).size(), 1);

    // Switched back to model A: the history starts afresh again, and a second note says so.
    QVERIFY2(switch_to(*w, model_a_, &why), qPrintable(why));
    AnswerStats a4;
    QVERIFY2(ask(*w, QStringLiteral("What did the keeper log?"), &a4, &why), qPrintable(why));
    const QStringList notes = notes_of(*w->chat_model());
    QCOMPARE(notes.size(), 2);
    QVERIFY2(notes[1].startsWith(QStringLiteral("Continued with tiny-a.gguf: none of the turns "
                                                "above is sent to it as history (the last were "
                                                "answered by tiny-b.gguf)")),
             qPrintable(notes[1]));
    auto p = Project::open(project.toStdString(), false);
    const auto m = p->messages(chat);
    QCOMPARE(m.size(), size_t{8});
    int answered = 0; // the earlier turns with an answer: none sent
    for (size_t i = 1; i < 7; i += 2)
        answered += m[i].text.empty() ? 0 : 1;
    QCOMPARE(stats_of(m[7]).value("history_turns", -1), 0);
    QCOMPARE(stats_of(m[7]).value("history_left_out", -1), answered);
}

void GuiModelSwitch::answersSavedWithoutAModelCountAsTheCurrentOnes() {
    // A chat saved before answers recorded their model: its turns are this model's history.
    QTemporaryDir work;
    const QString project = work.filePath(QStringLiteral("old.spanscope"));
    int64_t chat = 0;
    {
        auto p = Project::open(project.toStdString(), true);
        chat = p->create_chat("an old chat");
        p->add_message(chat, "user", "Where is the lighthouse?");
        p->add_message(chat, "assistant", "On the north cape.",
                       R"({"stop_reason": "eog", "ttft_ms": 12.0, "prompt_tokens": 40})");
    }
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, project, &why), qPrintable(why));
    QVERIFY(QTest::qWaitFor([&] { return w->chat_list_model()->row_of_id(chat) >= 0; }, 10000));
    auto* list = w->findChild<QListView*>(QStringLiteral("chatList"));
    list->setCurrentIndex(w->chat_list_model()->index(w->chat_list_model()->row_of_id(chat)));
    QVERIFY(QTest::qWaitFor([&] { return w->chat_model()->messages().size() == 2; }, 10000));
    AnswerStats a;
    QVERIFY2(ask(*w, QStringLiteral("When was it built?"), &a, &why), qPrintable(why));
    QCOMPARE(a.chat_id, chat);
    QVERIFY(notes_of(*w->chat_model()).isEmpty());
    auto p = Project::open(project.toStdString(), false);
    const auto s = stats_of(p->messages(chat)[3]);
    QCOMPARE(s.value("history_turns", -1), 1);
    QCOMPARE(s.value("history_left_out", -1), 0);
}

void GuiModelSwitch::theStatusDescribesTheNewModel() {
    QTemporaryDir work;
    const QString project = work.filePath(QStringLiteral("s.spanscope"));
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, project, &why), qPrintable(why));
    auto* model = w->findChild<QLabel*>(QStringLiteral("modelLabel"));
    auto* memory = w->findChild<QLabel*>(QStringLiteral("memoryLabel"));
    auto* stats = w->findChild<QLabel*>(QStringLiteral("statsLabel"));
    QVERIFY(model && memory && stats);
    const QLocale l;
    const QString kv_a = l.toString(kv_bytes_per_token(kHeadsKvA)) + QStringLiteral(" B/token");
    const QString kv_b = l.toString(kv_bytes_per_token(kHeadsKvB)) + QStringLiteral(" B/token");
    QVERIFY2(model->text().contains(kv_a), qPrintable(model->text()));
    AnswerStats a1;
    QVERIFY2(ask(*w, QStringLiteral("When was the lighthouse built?"), &a1, &why), qPrintable(why));
    QVERIFY2(memory->text().contains(QStringLiteral("KV cache")), qPrintable(memory->text()));
    QVERIFY(!stats->text().isEmpty());
    int64_t chunks = 0; // the note's chunks, stored for model A
    {
        auto p = Project::open(project.toStdString(), false);
        const auto info = p->info();
        QCOMPARE(info.models.size(), size_t{1});
        chunks = info.models[0].chunks;
    }
    QVERIFY(chunks > 0);

    QVERIFY2(switch_to(*w, model_b_, &why), qPrintable(why));
    qInfo("after the switch: %s | %s | %s", qPrintable(model->text()), qPrintable(w->cache_text()),
          qPrintable(w->banner_text()));
    // The model, at its cost per token; nothing of model A's last answer.
    QVERIFY2(model->text().contains(QStringLiteral("tiny-b.gguf")) &&
                 model->text().contains(kv_b) && !model->text().contains(kv_a),
             qPrintable(model->text()));
    QVERIFY2(!memory->text().contains(QStringLiteral("KV cache")), qPrintable(memory->text()));
    QCOMPARE(stats->text(), QString());
    // What is stored for it: nothing yet (both models cut the note alike: one tokenizer).
    QCOMPARE(w->cache_text(), QStringLiteral("0 of %1 chunks stored for this model").arg(chunks));
    QVERIFY2(w->banner_text().contains(QStringLiteral("1 of the project's 1 document(s)")),
             qPrintable(w->banner_text()));
    QCOMPARE(w->document_model()->row(0).status, DocumentRow::Status::Unprefilled);

    // The answer computes the note's states for model B: its row says so meanwhile.
    QStringList shown, status_said;
    auto* message = w->findChild<QLabel*>(QStringLiteral("messageLabel"));
    QVERIFY(message);
    connect(w->document_model(), &QAbstractItemModel::dataChanged, this, [&] {
        shown << w->document_model()->index(0).data(DocumentListModel::StatusTextRole).toString();
        status_said << message->text();
    });
    AnswerStats a2;
    QVERIFY2(ask(*w, QStringLiteral("Who kept a log?"), &a2, &why), qPrintable(why));
    qInfo("the row during the answer: %s", qPrintable(shown.join(QStringLiteral(" | "))));
    QVERIFY2(!shown.isEmpty() && shown.first().startsWith(QStringLiteral("prefilling 0/")),
             qPrintable(shown.join(QStringLiteral(" | "))));
    QCOMPARE(w->document_model()->row(0).status, DocumentRow::Status::Ready);
    int64_t stored_b = 0;
    {
        auto p = Project::open(project.toStdString(), false);
        for (const auto& m : p->info().models)
            if (m.name == "tiny model B")
                stored_b = m.chunks;
    }
    QCOMPARE(stored_b, chunks);
    QCOMPARE(w->cache_text(),
             QStringLiteral("%1 %2 stored for this model")
                 .arg(stored_b)
                 .arg(stored_b == 1 ? QStringLiteral("chunk") : QStringLiteral("chunks")));
    // While the states were computed the status line said what the answer waited for; the
    // answer came, the note went.
    const QString waiting = QStringLiteral(
        "1 of the 1 sections used has no stored states for this model (read with another model, "
        "evicted, or never finished): computing ");
    QVERIFY2(std::any_of(status_said.begin(), status_said.end(),
                         [&](const QString& t) { return t.startsWith(waiting); }),
             qPrintable(status_said.join(QStringLiteral(" | "))));
    QVERIFY2(!message->text().contains(QStringLiteral("no stored states")),
             qPrintable(message->text()));
    QVERIFY2(!w->banner_text().contains(QStringLiteral("no stored states")),
             qPrintable(w->banner_text()));
    // Every document has its states now: the banner that said otherwise is gone.
    QVERIFY2(!w->banner_text().contains(QStringLiteral("without stored states")),
             qPrintable(w->banner_text()));
    QVERIFY2(memory->text().contains(QStringLiteral("KV cache")), qPrintable(memory->text()));
}

// A word of model A's SEKV answer clicked after the switch to model B: its zoom numbers model
// A's spans, not the ones shown, so it is not drawn, and the bar names model A.
void GuiModelSwitch::anotherModelsZoomIsNotDrawnAndNamesTheModel() {
    QTemporaryDir work;
    const QString project = work.filePath(QStringLiteral("z.spanscope"));
    std::unique_ptr<MainWindow> w;
    QString why;
    QVERIFY2(open_window(w, project, &why, QStringLiteral("sekv")), qPrintable(why));
    AnswerStats a1;
    QVERIFY2(ask(*w, QStringLiteral("When was the lighthouse built?"), &a1, &why), qPrintable(why));
    QCOMPARE(a1.policy, QStringLiteral("sekv"));
    QVERIFY(a1.message_id > 0);
    auto* label = w->findChild<QLabel*>(QStringLiteral("zoomLabel"));
    QVERIFY(label);
    const QString other = QStringLiteral("made with the model tiny-a.gguf, not the one loaded");
    // Under model A its zoom is model A's own: applied to the note's spans, the bar describing
    // the token ("Token 0 … zoomed into N spans").
    w->select_answer_token(a1.message_id, 0);
    QVERIFY2(QTest::qWaitFor([&] { return label->text().startsWith(QStringLiteral("Token 0 ")); },
                             10000),
             qPrintable(label->text()));

    QVERIFY2(switch_to(*w, model_b_, &why), qPrintable(why));
    w->select_answer_token(a1.message_id, 0);
    QVERIFY2(QTest::qWaitFor([&] { return label->text().contains(other); }, 10000),
             qPrintable(label->text()));
    QVERIFY(w->document_view()->zoom_marks().isEmpty());

    // Back on model A, the answer selected is model A's again: its zoom applies without
    // another click.
    QVERIFY2(switch_to(*w, model_a_, &why), qPrintable(why));
    QVERIFY2(QTest::qWaitFor([&] { return label->text().startsWith(QStringLiteral("Token 0 ")); },
                             10000),
             qPrintable(label->text()));
}

QTEST_MAIN(GuiModelSwitch)
#include "test_gui_model_switch.moc"
