// Settings' model list and switching models, on tiny model files the test writes itself
// (tests/unit/tiny_model.h): no real model needed. The default model is the one
// $SPANSCOPE_MODEL names (model_locator.h), here a tiny Gemma 3 file. Files are described in
// the background: the tests wait for the rows to be read, and hold a file's description back
// (ModelList's describer) to see a row that is still being read.
#include "engine/gguf/gguf_writer.h"
#include "test_support.h"
#include "tiny_model.h"
#include "ui/app_settings.h"
#include "ui/main_window.h"
#include "ui/model_list.h"
#include "ui/settings_dialog.h"

#include <QDir>
#include <QFile>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSemaphore>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QThreadPool>
#include <QtTest>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

using namespace spanscope;
using namespace spanscope::gui;

namespace {

constexpr int kKvHeads = 2, kHeadDim = 32, kLayers = 4;

test::TinyGemma3Config tiny(const std::string& arch, uint64_t seed) {
    test::TinyGemma3Config c;
    c.architecture = arch;
    c.n_layer = kLayers;
    c.n_head_kv = kKvHeads;
    c.head_dim = kHeadDim;
    c.n_ctx = 1024;
    c.seed = seed;
    if (arch == "llama")
        c.sliding_window = c.n_ctx; // no narrower window: every layer global
    return c;
}

/// Wait (processing events) until every row of `list` has its description; false after 10 s.
bool wait_described(const ModelList* list) {
    return QTest::qWaitFor([list] { return list->reading() == 0; }, 10000);
}

} // namespace

class GuiModelList : public QObject {
    Q_OBJECT
private slots:
    void initTestCase();
    void addSelectAndSave();
    void unusableFilesCannotBeChosen();
    void rowsAreReadInTheBackground();
    void aLateDescriptionOfARemovedRowIsDropped();
    void settingsBeforeTheListKeepTheirModel();
    void realSmolLM2Row();
    void switchingModelsSaysSoAndRecomputes();
    void aModelThatFailsSaysWhyAndWhatToDo();
    void installedFilesAreListed();

private:
    QString path(const QString& name) const { return dir_.filePath(name); }
    static ModelListModel* list_model(QWidget& w) {
        auto* view = w.findChild<QTableView*>(QStringLiteral("modelList"));
        return view ? qobject_cast<ModelListModel*>(view->model()) : nullptr;
    }
    /// The dialog's model list, its rows, its view and its Remove button.
    struct ListParts {
        ModelList* list;
        ModelListModel* model;
        QTableView* view;
        QPushButton* remove;
        bool found() const { return list && model && view && remove; }
    };
    static ListParts list_parts(SettingsDialog& d) {
        return {d.findChild<ModelList*>(), list_model(d),
                d.findChild<QTableView*>(QStringLiteral("modelList")),
                d.findChild<QPushButton*>(QStringLiteral("modelRemove"))};
    }
    QTemporaryDir dir_;
    QString gemma_, gemma_other_, llama_, phi3_, junk_, template_;
    QString models_dir_;              ///< the models folder of the test's XDG data directory
    std::optional<std::string> smol_; ///< the real SmolLM2 file, found before the folders move
};

void GuiModelList::initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    gemma_ = path(QStringLiteral("tiny-gemma3.gguf"));
    gemma_other_ = path(QStringLiteral("tiny-gemma3-other.gguf"));
    llama_ = path(QStringLiteral("tiny-llama.gguf"));
    phi3_ = path(QStringLiteral("phi3.gguf"));
    junk_ = path(QStringLiteral("notes.gguf"));
    template_ = path(QStringLiteral("unknown-template.gguf"));
    test::write_tiny_gemma3(gemma_.toStdString(), tiny("gemma3", 1));
    test::write_tiny_gemma3(gemma_other_.toStdString(), tiny("gemma3", 2)); // other weights
    test::write_tiny_gemma3(llama_.toStdString(), tiny("llama", 3));
    GgufWriter w;
    w.set_string("general.architecture", "phi3");
    w.set_uint32("phi3.context_length", 4096);
    w.set_uint32("phi3.block_count", 32);
    w.write(phi3_.toStdString());
    { // the tiny Llama file with a chat template none of the formats: refused by its header
        const auto in = GgufFile::open(llama_.toStdString());
        GgufWriter t;
        for (const auto& [key, value] : in->metadata())
            t.set_value(key, value);
        t.set_string("tokenizer.chat_template", "{% for m in messages %}<|user|>{% endfor %}");
        for (const auto& x : in->tensors())
            t.add_tensor(x.name, x.type, x.ne, std::vector<uint8_t>(x.data, x.data + x.nbytes));
        t.write(template_.toStdString());
    }
    QFile junk(junk_);
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("not a model\n");
    junk.close();
    // The default model (locate_model("")): the tiny Gemma 3.
    qputenv("SPANSCOPE_MODEL", gemma_.toUtf8());
    // The models folders the list reads (xdg_data_dirs): the test's own, empty until a test
    // installs a file there; the real models installed on this machine are not listed.
    smol_ = test::smollm2_model_path();
    models_dir_ = path(QStringLiteral("data/spanscope/models"));
    QVERIFY(QDir().mkpath(models_dir_));
    QVERIFY(QDir().mkpath(path(QStringLiteral("no-data"))));
    qputenv("XDG_DATA_HOME", path(QStringLiteral("data")).toUtf8());
    qputenv("XDG_DATA_DIRS", path(QStringLiteral("no-data")).toUtf8());
    QSettings().clear();
}

void GuiModelList::addSelectAndSave() {
    AppSettings s; // the default model, no file added
    SettingsDialog dialog(s);
    auto* list = dialog.findChild<ModelList*>();
    QVERIFY(list);
    ModelListModel* m = list_model(dialog);
    QVERIFY(m);
    QCOMPARE(m->rowCount(), 1);
    QVERIFY(m->row(0).is_default);
    QVERIFY(wait_described(list));
    QCOMPARE(m->data(m->index(0, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("gemma3"));
    QCOMPARE(list->chosen_path(), QString()); // the default
    auto* remove = dialog.findChild<QPushButton*>(QStringLiteral("modelRemove"));
    QVERIFY(remove && dialog.findChild<QPushButton*>(QStringLiteral("modelAdd")));
    QVERIFY(!remove->isEnabled()); // the default model cannot be removed

    // Add… once its file dialog has returned the tiny Llama file.
    const int r = list->add_file(llama_);
    QCOMPARE(r, 1);
    QVERIFY(wait_described(list));
    QCOMPARE(m->data(m->index(r, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("llama"));
    // Every layer global: a key and a value row of kKvHeads × kHeadDim f16 values per layer.
    const qint64 kv = qint64{kLayers} * 2 * kKvHeads * kHeadDim * 2;
    QCOMPARE(m->data(m->index(r, ModelListModel::KvBytes), ModelListModel::kValueRole).toLongLong(),
             kv);
    QVERIFY(m->data(m->index(r, ModelListModel::KvBytes), Qt::DisplayRole)
                .toString()
                .contains(QLocale().toString(kv)));
    QCOMPARE(m->data(m->index(r, ModelListModel::Context), ModelListModel::kValueRole).toLongLong(),
             1024);
    QCOMPARE(m->data(m->index(r, ModelListModel::Size), ModelListModel::kValueRole).toLongLong(),
             QFileInfo(llama_).size());
    // The Gemma 3 default counts its sliding layers (every 2nd of 4 is global) and says what
    // a token costs past the window.
    QCOMPARE(m->data(m->index(0, ModelListModel::KvBytes), ModelListModel::kValueRole).toLongLong(),
             kv);
    QVERIFY(m->data(m->index(0, ModelListModel::Notes), Qt::DisplayRole)
                .toString()
                .contains(QLocale().toString(kv / 2)));
    QCOMPARE(list->chosen_path(), llama_); // added and selected
    QVERIFY(remove->isEnabled());

    // Adding it again lists it once.
    QCOMPARE(list->add_file(llama_), 1);
    QCOMPARE(m->rowCount(), 2);

    const AppSettings chosen = dialog.result_settings();
    QCOMPARE(chosen.model_path, llama_);
    QCOMPARE(chosen.model_files, QStringList{llama_});
    chosen.save();
    const AppSettings back = AppSettings::load();
    QCOMPARE(back.model_path, llama_);
    QCOMPARE(back.model_files, QStringList{llama_});

    // Opened again: the file listed and chosen; selecting the default row goes back to it.
    SettingsDialog again(back);
    auto* list2 = again.findChild<ModelList*>();
    ModelListModel* m2 = list_model(again);
    QCOMPARE(m2->rowCount(), 2);
    QCOMPARE(list2->chosen_path(), llama_); // while its row is read, too
    QVERIFY(wait_described(list2));
    QCOMPARE(list2->chosen_path(), llama_);
    auto* view = again.findChild<QTableView*>(QStringLiteral("modelList"));
    view->selectRow(0);
    QCOMPARE(again.result_settings().model_path, QString());
    QCOMPARE(again.result_settings().model_files, QStringList{llama_}); // still listed
    QSettings().clear();
}

void GuiModelList::unusableFilesCannotBeChosen() {
    AppSettings s;
    s.model_path = llama_;
    s.model_files = {llama_};
    SettingsDialog dialog(s);
    const ListParts parts = list_parts(dialog);
    QVERIFY(parts.found());
    auto [list, m, view, remove] = parts;
    QVERIFY(wait_described(list));

    const int r = list->add_file(phi3_);
    QVERIFY(wait_described(list));
    const QString reason = m->data(m->index(r, ModelListModel::Notes), Qt::DisplayRole).toString();
    QVERIFY2(reason.startsWith(QStringLiteral("unsupported model architecture 'phi3' (supported: "
                                              "gemma3, llama")),
             qPrintable(reason));
    QVERIFY(!reason.contains(QLatin1Char('\n')));
    QCOMPARE(m->data(m->index(r, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("phi3"));
    QVERIFY(!(m->flags(m->index(r, 0)) & Qt::ItemIsSelectable));
    QCOMPARE(list->chosen_path(), llama_); // adding it chose nothing
    // Selecting it (as a click would) leaves the choice as it was.
    view->selectionModel()->select(m->index(r, 0),
                                   QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    QCOMPARE(list->chosen_path(), llama_);
    QCOMPARE(view->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(view->selectionModel()->selectedRows().front().row(), 1);

    // Refused by its chat template, after its hyper-parameters were read: the line loading it
    // would give, and its figures.
    const int t = list->add_file(template_);
    QVERIFY(wait_described(list));
    const QString line = m->data(m->index(t, ModelListModel::Notes), Qt::DisplayRole).toString();
    QVERIFY2(line.startsWith(QStringLiteral("the model's chat template (llama, markers <|user|>)")),
             qPrintable(line));
    QVERIFY(!(m->flags(m->index(t, 0)) & Qt::ItemIsSelectable));
    QCOMPARE(m->data(m->index(t, ModelListModel::KvBytes), ModelListModel::kValueRole).toLongLong(),
             qint64{kLayers} * 2 * kKvHeads * kHeadDim * 2);
    QCOMPARE(list->chosen_path(), llama_);
    remove->click(); // the current row: the file just added
    QCOMPARE(m->row_of_path(template_), -1);

    const int j = list->add_file(junk_);
    QVERIFY(wait_described(list));
    const QString why = m->data(m->index(j, ModelListModel::Notes), Qt::DisplayRole).toString();
    QVERIFY2(why.startsWith(QStringLiteral("not a valid GGUF file")), qPrintable(why));
    QCOMPARE(list->chosen_path(), llama_);

    // The current row (the file just added) can still be removed.
    QVERIFY(remove->isEnabled());
    remove->click();
    QCOMPARE(m->rowCount(), 3);
    QCOMPARE(m->row_of_path(junk_), -1);
    QCOMPARE(list->chosen_path(), llama_);
    const AppSettings out = dialog.result_settings();
    QCOMPARE(out.model_path, llama_);
    QCOMPARE(out.model_files, (QStringList{llama_, phi3_}));

    // A chosen file that cannot be used now (gone, or unsupported) stays chosen: nothing lost.
    AppSettings gone;
    gone.model_path = path(QStringLiteral("moved-away.gguf"));
    SettingsDialog d2(gone);
    ModelListModel* m3 = list_model(d2);
    QVERIFY(wait_described(d2.findChild<ModelList*>()));
    const int g = m3->row_of_path(gone.model_path);
    QVERIFY(g > 0);
    QVERIFY(m3->data(m3->index(g, ModelListModel::Notes), Qt::DisplayRole)
                .toString()
                .startsWith(QStringLiteral("cannot open")));
    QCOMPARE(d2.result_settings().model_path, gone.model_path);
}

void GuiModelList::rowsAreReadInTheBackground() {
    // A slow file: its description waits for the gate (5 s at most), the others pass.
    auto gate = std::make_shared<QSemaphore>(0);
    const std::string slow = gemma_other_.toStdString();
    const auto describe = [gate, slow](const std::string& p) {
        if (p == slow)
            gate->tryAcquire(1, 5000);
        return describe_model_file(p);
    };
    // Described on the GUI thread, the list would open with every row read (after the gate's
    // 5 s); it opens with every row reading (below).
    ModelList list(QString(), {llama_, gemma_other_}, nullptr, describe);
    ModelListModel* m = list.model();
    QSignalSpy described(&list, &ModelList::described);
    QCOMPARE(m->rowCount(), 3);
    const int slow_row = m->row_of_path(gemma_other_);
    QCOMPARE(slow_row, 2);
    // Every row starts reading: its notes say so, it cannot be chosen yet.
    QCOMPARE(list.reading(), 3);
    for (int r = 0; r < 3; ++r) {
        QCOMPARE(m->data(m->index(r, ModelListModel::Notes), Qt::DisplayRole).toString(),
                 QStringLiteral("reading…"));
        QVERIFY(!(m->flags(m->index(r, 0)) & Qt::ItemIsSelectable));
    }
    QCOMPARE(list.chosen_path(), QString()); // the default, chosen once read
    // The fast rows are read while the slow one is held; the default row is then chosen.
    QVERIFY(QTest::qWaitFor([&] { return list.reading() == 1; }, 10000));
    QCOMPARE(described.size(), 2);
    QCOMPARE(m->data(m->index(1, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("llama"));
    QCOMPARE(list.view()->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(list.view()->selectionModel()->selectedRows().front().row(), 0);
    QCOMPARE(m->data(m->index(slow_row, ModelListModel::Notes), Qt::DisplayRole).toString(),
             QStringLiteral("reading…"));
    QCOMPARE(m->data(m->index(slow_row, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("—"));
    QVERIFY(!m->row(slow_row).described);
    // Released: the row turns from reading… to its description, and can be chosen.
    gate->release();
    QVERIFY(wait_described(&list));
    QCOMPARE(described.size(), 3);
    QCOMPARE(described.last().at(0).toInt(), slow_row);
    QCOMPARE(m->data(m->index(slow_row, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("gemma3"));
    QVERIFY(m->flags(m->index(slow_row, 0)) & Qt::ItemIsSelectable);
    list.view()->selectRow(slow_row);
    QCOMPARE(list.chosen_path(), gemma_other_);
}

void GuiModelList::aLateDescriptionOfARemovedRowIsDropped() {
    // The llama file's description is held until the test lets it go; it then arrives after its
    // row was removed and another file took that position.
    auto gate = std::make_shared<QSemaphore>(0);
    auto held_done = std::make_shared<std::atomic<bool>>(false);
    const std::string held = llama_.toStdString();
    const auto describe = [gate, held_done, held](const std::string& p) {
        if (p != held)
            return describe_model_file(p);
        gate->tryAcquire(1, 5000);
        ModelSummary s = describe_model_file(p);
        held_done->store(true);
        return s;
    };
    ModelList list(QString(), {}, nullptr, describe);
    ModelListModel* m = list.model();
    QVERIFY(wait_described(&list));
    const int r = list.add_file(llama_);
    QCOMPARE(r, 1);
    QCOMPARE(list.view()->currentIndex().row(), r);
    list.remove_current();
    QCOMPARE(m->rowCount(), 1);
    QCOMPARE(list.add_file(gemma_other_), r); // the same position, another file
    QVERIFY(wait_described(&list));
    QCOMPARE(list.chosen_path(), gemma_other_); // added, read, chosen
    gate->release();
    QVERIFY(QTest::qWaitFor([&] { return held_done->load(); }, 10000));
    // The worker's result crosses to the GUI thread: every description has finished, and the
    // events that carry results are delivered.
    QVERIFY(QThreadPool::globalInstance()->waitForDone(10000));
    for (int i = 0; i < 3; ++i)
        QCoreApplication::processEvents();
    QCOMPARE(m->rowCount(), 2);
    QCOMPARE(m->row(r).path, gemma_other_);
    QCOMPARE(m->row(r).summary.path, gemma_other_.toStdString());
    QCOMPARE(m->data(m->index(r, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("gemma3"));
    QCOMPARE(list.chosen_path(), gemma_other_);
}

void GuiModelList::settingsBeforeTheListKeepTheirModel() {
    // Saved before the list existed: a model file chosen, no "engine/model_files".
    QSettings().clear();
    {
        QSettings q;
        q.setValue("engine/model", llama_);
        q.setValue("engine/threads", 2);
    }
    const AppSettings a = AppSettings::load();
    QCOMPARE(a.model_path, llama_);
    QCOMPARE(a.model_files, QStringList{llama_});
    QCOMPARE(a.threads, 2);
    SettingsDialog dialog(a);
    QCOMPARE(dialog.findChild<ModelList*>()->chosen_path(), llama_);
    QCOMPARE(dialog.result_settings().model_files, QStringList{llama_});
    QSettings().clear();
}

void GuiModelList::realSmolLM2Row() {
    const auto& smol = smol_;
    if (!smol)
        QSKIP("SmolLM2-135M-Instruct.Q4_1.gguf is not installed (bash scripts/setup.sh model, or "
              "set SPANSCOPE_SMOLLM2_MODEL)");
    SettingsDialog dialog{AppSettings{}};
    auto* list = dialog.findChild<ModelList*>();
    ModelListModel* m = list_model(dialog);
    const int r = list->add_file(QString::fromStdString(*smol));
    QVERIFY(wait_described(list));
    QCOMPARE(m->data(m->index(r, ModelListModel::Architecture), Qt::DisplayRole).toString(),
             QStringLiteral("llama"));
    // SmolLM2-135M's published shape: 30 layers, 3 key/value heads of 64, no window.
    QCOMPARE(m->data(m->index(r, ModelListModel::KvBytes), ModelListModel::kValueRole).toLongLong(),
             qint64{30} * 3 * 64 * 2 * 2);
    QCOMPARE(dialog.result_settings().model_path, QString::fromStdString(*smol));
}

void GuiModelList::switchingModelsSaysSoAndRecomputes() {
    QTemporaryDir work;
    const QString doc = work.filePath(QStringLiteral("note.txt"));
    {
        QFile f(doc);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("The lighthouse on the north cape was built in 1874 and painted red and white. "
                "Its keeper kept a log of every ship that passed.\n");
    }
    AppSettings s;
    s.model_path = gemma_;
    s.threads = 1;
    s.generation.max_tokens = 4;
    s.memory.policy = QStringLiteral("full");
    MainWindow w(s, /*persist_settings=*/false);
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QVERIFY(ready.wait(30000));
    QVERIFY2(ready[0][0].toBool(), qPrintable(w.banner_text()));
    QSignalSpy opened(&w, &MainWindow::project_ready);
    w.open_project(work.filePath(QStringLiteral("p.spanscope")), true);
    QVERIFY(opened.wait(30000));
    QSignalSpy ingested(&w, &MainWindow::ingest_done);
    w.add_documents({doc});
    QVERIFY(ingested.wait(60000));
    QCOMPARE(ingested[0][0].toInt(), 1);
    QCOMPARE(w.document_model()->row(0).status, DocumentRow::Status::Ready);

    // Settings ▸ the other model, OK: the path a switch from the list takes.
    AppSettings other = w.settings();
    other.model_path = gemma_other_;
    other.model_files = {gemma_other_};
    ready.clear();
    opened.clear();
    w.apply_settings(other);
    QVERIFY(ready.wait(30000));
    QVERIFY2(ready[0][0].toBool(), qPrintable(w.banner_text()));
    auto* message = w.findChild<QLabel*>(QStringLiteral("messageLabel"));
    QVERIFY(message);
    QVERIFY2(message->text().contains(QStringLiteral("Switched to the model tiny-gemma3-other")),
             qPrintable(message->text()));
    // The engine thread reopens the project right after the load: its signal may already have
    // arrived while the test waited for the model (wait() would then wait for another one).
    QVERIFY(!opened.isEmpty() || opened.wait(30000));
    QVERIFY2(w.banner_text().contains(QStringLiteral("1 of the project's 1 document(s)")) &&
                 w.banner_text().contains(QStringLiteral("read with another model")),
             qPrintable(w.banner_text()));
    QCOMPARE(w.document_model()->row(0).status, DocumentRow::Status::Unprefilled);
    qInfo("status: %s", qPrintable(message->text()));
    qInfo("banner: %s", qPrintable(w.banner_text()));

    // Asked about, the document is read again with the new model, then reused.
    QSignalSpy answered(&w, &MainWindow::answer_done);
    QSignalSpy failed(&w, &MainWindow::answer_error);
    w.ask(QStringLiteral("When was the lighthouse built?"));
    QVERIFY2(answered.wait(60000),
             failed.isEmpty() ? "timeout" : qPrintable(failed[0][0].toString()));
    const AnswerStats first = answered[0][0].value<AnswerStats>();
    QCOMPARE(first.tokens_reused, 0);
    QVERIFY(first.tokens_computed > 0);
    // The states that answer stored for the new model show in the document's row.
    QCOMPARE(w.document_model()->row(0).status, DocumentRow::Status::Ready);
    answered.clear();
    w.ask(QStringLiteral("Who kept a log?"));
    QVERIFY2(answered.wait(60000),
             failed.isEmpty() ? "timeout" : qPrintable(failed[0][0].toString()));
    const AnswerStats second = answered[0][0].value<AnswerStats>();
    qInfo("after the switch: first question %lld tokens reused / %lld computed, second %lld / %lld",
          static_cast<long long>(first.tokens_reused),
          static_cast<long long>(first.tokens_computed),
          static_cast<long long>(second.tokens_reused),
          static_cast<long long>(second.tokens_computed));
    QVERIFY(second.tokens_reused > 0);
}

// A --model file that cannot be loaded: the banner gives the reason and the way out of
// *this* choice (another --model, or none), not the default model's install; a question
// answers with the same reason; the project's rows say no model is loaded, not that they
// await this one.
void GuiModelList::aModelThatFailsSaysWhyAndWhatToDo() {
    QTemporaryDir work;
    const QString project = work.filePath(QStringLiteral("p.spanscope"));
    const QString doc = work.filePath(QStringLiteral("note.txt"));
    {
        QFile f(doc);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("The lighthouse on the north cape was built in 1874.\n");
    }
    AppSettings s;
    s.model_path = gemma_;
    s.threads = 1;
    {
        MainWindow w(s, /*persist_settings=*/false);
        QSignalSpy ready(&w, &MainWindow::model_ready);
        QVERIFY(ready.wait(30000));
        QSignalSpy opened(&w, &MainWindow::project_ready);
        w.open_project(project, true);
        QVERIFY(opened.wait(30000));
        QSignalSpy ingested(&w, &MainWindow::ingest_done);
        w.add_documents({doc});
        QVERIFY(ingested.wait(60000));
    }
    for (const QString& bad : {phi3_, junk_}) {
        AppSettings o = s;
        o.model_override = bad;
        MainWindow w(o, /*persist_settings=*/false);
        QSignalSpy ready(&w, &MainWindow::model_ready);
        QVERIFY(ready.wait(30000));
        QVERIFY(!ready[0][0].toBool());
        const QString banner = w.banner_text();
        QVERIFY2(banner.contains(bad) && banner.contains(QStringLiteral("--model")) &&
                     !banner.contains(QStringLiteral("setup.sh")),
                 qPrintable(banner));
        if (bad == phi3_)
            QVERIFY2(banner.contains(QStringLiteral("unsupported model architecture 'phi3'")),
                     qPrintable(banner));
        QSignalSpy opened(&w, &MainWindow::project_ready);
        w.open_project(project, false);
        QVERIFY(opened.wait(30000));
        QCOMPARE(w.document_model()->rowCount(), 1);
        QCOMPARE(w.document_model()->row(0).status, DocumentRow::Status::NoModel);
        QSignalSpy failed(&w, &MainWindow::answer_error);
        w.ask(QStringLiteral("When was the lighthouse built?"));
        QVERIFY(failed.wait(30000));
        const QString why = failed[0][0].toString();
        QVERIFY2(why.startsWith(QStringLiteral("No model is loaded. ")) && why.contains(bad) &&
                     why.contains(QStringLiteral("--model")),
                 qPrintable(why));
    }
    // Chosen in Settings, the way out is another file there.
    AppSettings c = s;
    c.model_path = junk_;
    MainWindow w(c, /*persist_settings=*/false);
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QVERIFY(ready.wait(30000));
    QVERIFY(!ready[0][0].toBool());
    QVERIFY2(w.banner_text().contains(QStringLiteral("Choose another model file in File ▸ "
                                                     "Settings.")) &&
                 !w.banner_text().contains(QStringLiteral("--model")),
             qPrintable(w.banner_text()));
}

// A model file installed in a models folder beside the default one (as the set-up installs
// SmolLM2) is listed without being added, can be chosen, and is neither saved among the added
// files nor removable.
void GuiModelList::installedFilesAreListed() {
    const QString installed = QDir(models_dir_).filePath(QStringLiteral("extra-llama.gguf"));
    QVERIFY(QFile::copy(llama_, installed));
    // Gone again whatever the test's outcome: the other tests list the folder too.
    const std::unique_ptr<const QString, void (*)(const QString*)> remove_after(
        &installed, [](const QString* f) { QFile::remove(*f); });
    AppSettings s;
    SettingsDialog dialog(s);
    const ListParts parts = list_parts(dialog);
    QVERIFY(parts.found());
    auto [list, m, view, remove] = parts;
    QVERIFY(wait_described(list));
    QCOMPARE(m->rowCount(), 2);
    QVERIFY(m->row(0).is_default);
    QCOMPARE(m->row(1).path, installed);
    QVERIFY(m->row(1).installed);
    QCOMPARE(m->data(m->index(1, ModelListModel::Name), Qt::DisplayRole).toString(),
             QStringLiteral("extra-llama.gguf (installed)"));
    // Every layer of the tiny Llama is global: the notes say what that means for the cost.
    QVERIFY2(m->data(m->index(1, ModelListModel::Notes), Qt::DisplayRole)
                 .toString()
                 .startsWith(
                     QStringLiteral("every one of its %1 layers keeps every token").arg(kLayers)),
             qPrintable(m->data(m->index(1, ModelListModel::Notes), Qt::DisplayRole).toString()));
    QCOMPARE(list->files(), QStringList());
    view->selectionModel()->select(m->index(1, 0),
                                   QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    view->selectionModel()->setCurrentIndex(m->index(1, 0), QItemSelectionModel::NoUpdate);
    QCOMPARE(list->chosen_path(), installed);
    QVERIFY(!remove->isEnabled());
    list->remove_current();
    QCOMPARE(m->rowCount(), 2);
    const AppSettings out = dialog.result_settings();
    QCOMPARE(out.model_path, installed);
    QVERIFY(out.model_files.isEmpty());
    // Added by hand as well, it is listed once.
    QCOMPARE(list->add_file(installed), 1);
    QCOMPARE(m->rowCount(), 2);
}

QTEST_MAIN(GuiModelList)
#include "test_gui_model_list.moc"
