// Failures reach the user in words and lose nothing: a missing model, a project file that is
// not one, a question without a project or documents. No real model is needed.
#include "answering/policy_settings.h"
#include "engine/sekv/sekv_routing.h"
#include "gui_test_support.h"
#include "ui/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

using namespace spanscope::gui;

class GuiErrors : public QObject {
    Q_OBJECT
private slots:
    void initTestCase() { QStandardPaths::setTestModeEnabled(true); }
    void missingModelIsExplained();
    void notInstalledModelPointsToSettings();
    void junkProjectFileIsRefusedUntouched();
    void questionWithoutAProjectIsRefused();
    void settingsPersist();
    void formerDefaultsReadAsTodays();
};

void GuiErrors::missingModelIsExplained() {
    QTemporaryDir dir;
    AppSettings s;
    s.model_path = dir.filePath(QStringLiteral("no-such-model.gguf"));
    MainWindow w(s);
    w.show();
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QVERIFY(ready.wait(10000));
    QCOMPARE(ready[0][0].toBool(), false);
    QVERIFY2(w.banner_text().contains(QStringLiteral("no-such-model.gguf")),
             qPrintable(w.banner_text()));
    QVERIFY2(w.banner_text().contains(QStringLiteral("Settings")), qPrintable(w.banner_text()));
    QCOMPARE(w.findChild<QLabel*>(QStringLiteral("modelLabel"))->text(),
             QStringLiteral("No model"));

    // A project still opens; a document cannot be prefilled, and says why.
    QSignalSpy opened(&w, &MainWindow::project_ready);
    w.open_project(dir.filePath(QStringLiteral("p.spanscope")), true);
    QVERIFY(opened.wait(10000));
    QSignalSpy done(&w, &MainWindow::ingest_done);
    w.add_documents({QStringLiteral("/usr/share/common-licenses/BSD")});
    QVERIFY(done.wait(10000));
    QCOMPARE(done[0][1].toInt(), 1); // failed: no model to prefill with
    QVERIFY(w.document_model()->row(0).error.contains(QStringLiteral("no model")));
}

void GuiErrors::notInstalledModelPointsToSettings() {
    // The usual first run: nothing at the default locations.
    QTemporaryDir dir;
    qunsetenv("SPANSCOPE_MODEL");
    qputenv("XDG_DATA_HOME", dir.filePath(QStringLiteral("data")).toUtf8());
    qputenv("XDG_DATA_DIRS", dir.filePath(QStringLiteral("share")).toUtf8());
    MainWindow w(AppSettings{}, false);
    QSignalSpy ready(&w, &MainWindow::model_ready);
    QVERIFY(ready.wait(10000));
    QCOMPARE(ready[0][0].toBool(), false);
    const QString b = w.banner_text();
    QVERIFY2(b.contains(QStringLiteral("No model file was found")), qPrintable(b));
    QVERIFY2(b.contains(QStringLiteral("gemma-3-270m-q4_k_m.gguf")), qPrintable(b));
    QVERIFY2(b.contains(dir.filePath(QStringLiteral("data"))), qPrintable(b));
    QVERIFY2(b.contains(QStringLiteral("Settings")), qPrintable(b));
}

void GuiErrors::junkProjectFileIsRefusedUntouched() {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("junk.spanscope"));
    const QByteArray junk(8192, 'j');
    {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(junk);
    }
    AppSettings s;
    s.model_path = dir.filePath(QStringLiteral("none.gguf"));
    MainWindow w(s);
    QSignalSpy opened(&w, &MainWindow::project_ready);
    w.open_project(path, false);
    QVERIFY(opened.wait(10000));
    QCOMPARE(opened[0][0].toLongLong(), -1);
    QVERIFY2(w.banner_text().contains(QStringLiteral("junk.spanscope")),
             qPrintable(w.banner_text()));
    QVERIFY(w.project_path().isEmpty());
    QFile f(path);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), junk); // not a byte changed
}

void GuiErrors::questionWithoutAProjectIsRefused() {
    QTemporaryDir dir;
    AppSettings s;
    s.model_path = dir.filePath(QStringLiteral("none.gguf"));
    MainWindow w(s);
    QSignalSpy failed(&w, &MainWindow::answer_error);
    w.ask(QStringLiteral("  \n "));
    QCOMPARE(failed.count(), 1); // a blank question is refused, in words, not ignored
    QVERIFY(failed.takeFirst()[0].toString().contains(QStringLiteral("empty")));
    w.ask(QStringLiteral("anything?"));
    QCOMPARE(failed.count(), 1);
    QVERIFY(failed[0][0].toString().contains(QStringLiteral("project")));
    QVERIFY(!w.answering());
    // The question stays in the box to be sent later.
    QCOMPARE(w.findChild<QPlainTextEdit*>(QStringLiteral("questionInput"))->toPlainText(),
             QStringLiteral("anything?"));
}

void GuiErrors::settingsPersist() {
    AppSettings s;
    s.model_path = QStringLiteral("/models/x.gguf");
    s.threads = 3;
    s.generation.max_tokens = 77;
    s.generation.temperature = 0.7;
    s.cache_limit_bytes = qint64{3} << 30;
    s.memory.policy = QStringLiteral("sekv");
    s.memory.budget = 0.25;
    s.memory.expand_rate = 0.2;
    s.memory.tau_per_query = false; // τ on the question and one stage: the dialog turns them on
    s.memory.rerank = 0;
    s.save();
    s.remember_project(QStringLiteral("/p/a.spanscope"));
    s.remember_project(QStringLiteral("/p/b.spanscope"));
    s.remember_project(QStringLiteral("/p/a.spanscope"));
    const AppSettings r = AppSettings::load();
    QCOMPARE(r.model_path, s.model_path);
    QCOMPARE(r.threads, 3);
    QCOMPARE(r.generation.max_tokens, 77);
    QCOMPARE(r.generation.temperature, 0.7);
    QCOMPARE(r.cache_limit_bytes, qint64{3} << 30);
    QCOMPARE(r.memory, s.memory);
    QCOMPARE(r.memory.router, QString()); // automatic unless chosen
    // The SEKV router and its parameter file persist; an unknown router reads as automatic.
    {
        AppSettings t = r;
        t.memory.router = QStringLiteral("trained");
        t.memory.router_params_file = QStringLiteral("/z/model.zoom.gguf");
        t.memory.tau_per_query = true;
        t.memory.expand_rate = 0.00625;
        t.save();
        QCOMPARE(AppSettings::load().memory, t.memory);
        QSettings().setValue("memory/sekv_router", QStringLiteral("oracle"));
        QCOMPARE(AppSettings::load().memory.router, QString());
        r.save();
        QCOMPARE(AppSettings::load().memory, r.memory);
    }
    // The dialog's router: trained takes a file, training-free keeps none; both calibrate τ
    // to the expand rate.
    {
        AppSettings d = r;
        d.memory.router = QStringLiteral("trained");
        d.memory.router_params_file = QStringLiteral("/z/model.zoom.gguf");
        SettingsDialog dialog(d);
        auto* router = dialog.findChild<QComboBox*>(QStringLiteral("sekvRouter"));
        auto* file = dialog.findChild<QLineEdit*>(QStringLiteral("routerParamsFile"));
        auto* rate = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("sekvExpandRate"));
        QVERIFY(router && file && rate);
        QCOMPARE(router->currentData().toString(), QStringLiteral("trained"));
        QCOMPARE(file->text(), d.memory.router_params_file);
        QVERIFY(file->isEnabled());
        QVERIFY(rate->isEnabled());
        QCOMPARE(dialog.result_settings().memory, d.memory);
        // τ per query, and a rate as low as those the trained router was measured at (0.625 %).
        auto* per_query = dialog.findChild<QCheckBox*>(QStringLiteral("sekvTauPerQuery"));
        QVERIFY(per_query && per_query->isEnabled() && !per_query->isChecked());
        per_query->setChecked(true);
        QCOMPARE(rate->cleanText(), QLocale().toString(20)); // no trailing zeros
        rate->setValue(0.625);
        QCOMPARE(rate->cleanText(), QLocale().toString(0.625));
        QVERIFY(dialog.result_settings().memory.tau_per_query);
        QCOMPARE(dialog.result_settings().memory.expand_rate, 0.00625);
        per_query->setChecked(false);
        rate->setValue(100 * d.memory.expand_rate);
        QCOMPARE(dialog.result_settings().memory, d.memory);
        router->setCurrentIndex(router->findData(QStringLiteral("training-free")));
        QVERIFY(!file->isEnabled());
        QVERIFY(rate->isEnabled());
        QCOMPARE(dialog.result_settings().memory.router, QStringLiteral("training-free"));
        QCOMPARE(dialog.result_settings().memory.router_params_file, QString());
        router->setCurrentIndex(router->findData(QString()));
        QVERIFY(file->isEnabled() && rate->isEnabled());
        QCOMPARE(dialog.result_settings().memory.router, QString());
        file->setText(QStringLiteral("  /y/other.zoom.gguf "));
        QCOMPARE(dialog.result_settings().memory.router_params_file,
                 QStringLiteral("/y/other.zoom.gguf"));
        // Under full none of it applies.
        dialog.findChild<QComboBox*>(QStringLiteral("memoryPolicy"))->setCurrentIndex(0);
        QVERIFY(!router->isEnabled() && !file->isEnabled() && !per_query->isEnabled());
    }
    // Two-stage routing: its N is kept as chosen, an N the engine would refuse (1, negative,
    // above kMaxRerank, not a number) reads as off; it applies under sekv with τ per query on
    // the CPU only.
    {
        AppSettings t = r;
        t.memory.tau_per_query = true;
        t.memory.rerank = 4;
        t.save();
        QCOMPARE(AppSettings::load().memory, t.memory);
        QCOMPARE(t.memory.rerank_in_effect(QStringLiteral("cpu")), 4);
        QCOMPARE(t.memory.rerank_in_effect(QStringLiteral("cuda")), 0);
        for (const QVariant& bad :
             {QVariant(1), QVariant(-3), QVariant(spanscope::kMaxRerank + 1), QVariant("abc")}) {
            QSettings().setValue("memory/sekv_rerank", bad);
            QCOMPARE(AppSettings::load().memory.rerank, 0);
        }
        QSettings().setValue("memory/sekv_rerank", 8);
        QSettings().setValue("memory/sekv_tau_per_query", false);
        const MemorySettings off = AppSettings::load().memory;
        QCOMPARE(off.rerank, 8);
        QCOMPARE(off.rerank_in_effect(QStringLiteral("cpu")), 0);
        MemorySettings full = t.memory;
        full.policy = QStringLiteral("full");
        QCOMPARE(full.rerank_in_effect(QStringLiteral("cpu")), 0);
        // What the answering service is handed: under full none of SEKV's settings (kept in
        // Settings, greyed out; the service refuses router settings without SEKV), under sekv
        // the two-stage routing in effect and the parameter file in effect.
        full.router = QString::fromLatin1(spanscope::kRouterTrained);
        full.router_params_file = QStringLiteral("/z/m.zoom.gguf");
        full.budget = 0.5;
        const spanscope::PolicySettings under_full = full.policy_settings(QStringLiteral("cpu"));
        QCOMPARE(under_full.budget, 0.5);
        QCOMPARE(under_full.policy, std::string("full"));
        QVERIFY(!under_full.tau_per_query);
        QCOMPARE(under_full.rerank, 0);
        QVERIFY(under_full.router.empty() && under_full.router_params_file.empty());
        MemorySettings sekv = t.memory;
        sekv.router = QString::fromLatin1(spanscope::kRouterTrainingFree);
        sekv.router_params_file = QStringLiteral("/z/m.zoom.gguf");
        const spanscope::PolicySettings on_cpu = sekv.policy_settings(QStringLiteral("cpu"));
        QCOMPARE(on_cpu.policy, std::string("sekv"));
        QVERIFY(on_cpu.tau_per_query);
        QCOMPARE(on_cpu.rerank, 4);
        QCOMPARE(on_cpu.router, std::string(spanscope::kRouterTrainingFree));
        QVERIFY(on_cpu.router_params_file.empty());
        QCOMPARE(sekv.policy_settings(QStringLiteral("cuda")).rerank, 0);
        sekv.router = QString::fromLatin1(spanscope::kRouterTrained);
        QCOMPARE(sekv.policy_settings(QStringLiteral("cpu")).router_params_file,
                 std::string("/z/m.zoom.gguf"));
        r.save();
    }
    // The dialog's two-stage routing: editable under sekv with τ per query on the CPU; "off" is
    // 0; the N shown is the N kept, as for the other SEKV settings under full.
    {
        AppSettings d = r;
        d.memory.tau_per_query = true;
        d.memory.rerank = 8;
        SettingsDialog dialog(d);
        auto* rerank = dialog.findChild<QSpinBox*>(QStringLiteral("sekvRerank"));
        auto* per_query = dialog.findChild<QCheckBox*>(QStringLiteral("sekvTauPerQuery"));
        auto* backend = dialog.findChild<QComboBox*>(QStringLiteral("backend"));
        QVERIFY(rerank && per_query && backend);
        QVERIFY(rerank->isEnabled());
        QCOMPARE(rerank->value(), 8);
        QCOMPARE(dialog.result_settings().memory, d.memory);
        rerank->setValue(1);
        QCOMPARE(rerank->text(), QStringLiteral("off"));
        QCOMPARE(dialog.result_settings().memory.rerank, 0);
        rerank->setValue(4);
        QCOMPARE(dialog.result_settings().memory.rerank, 4);
        per_query->setChecked(false);
        QVERIFY(!rerank->isEnabled());
        QCOMPARE(dialog.result_settings().memory.rerank, 4);
        per_query->setChecked(true);
        QVERIFY(rerank->isEnabled());
        backend->setCurrentIndex(backend->findData(QStringLiteral("cuda")));
        QVERIFY(!rerank->isEnabled());
        backend->setCurrentIndex(backend->findData(QStringLiteral("cpu")));
        QVERIFY(rerank->isEnabled());
        dialog.findChild<QComboBox*>(QStringLiteral("memoryPolicy"))->setCurrentIndex(0);
        QVERIFY(!rerank->isEnabled());
        QCOMPARE(dialog.result_settings().memory.rerank, 4);
        // An N kept while τ per query is off comes back unchanged.
        AppSettings e = r;
        e.memory.rerank = 4;
        QCOMPARE(SettingsDialog(e).result_settings().memory, e.memory);
    }
    // The spans shown depend on the router (its rank gates build them).
    {
        MemorySettings a = r.memory, b = r.memory;
        b.router = QStringLiteral("trained");
        QVERIFY(a.spans_key() != b.spans_key());
        b = a;
        b.router_params_file = QStringLiteral("/z/m.zoom.gguf");
        QVERIFY(a.spans_key() != b.spans_key());
    }
    // The dialog: the policy chosen; SEKV's settings only apply to sekv, kept exactly when
    // untouched.
    {
        AppSettings d = r;
        d.memory.budget = 0.333;
        SettingsDialog dialog(d);
        auto* policy = dialog.findChild<QComboBox*>(QStringLiteral("memoryPolicy"));
        auto* budget = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("sekvBudget"));
        QCOMPARE(policy->currentData().toString(), QStringLiteral("sekv"));
        QVERIFY(budget->isEnabled());
        QCOMPARE(dialog.result_settings().memory, d.memory);
        budget->setValue(50);
        QCOMPARE(dialog.result_settings().memory.budget, 0.5);
        // The expand rate too, finer than the spin box's thousandth of a percent.
        AppSettings e = r;
        e.memory.policy = QStringLiteral("sekv");
        e.memory.expand_rate = 0.000012345;
        QCOMPARE(SettingsDialog(e).result_settings().memory.expand_rate, 0.000012345);
        // Joining documents: recompute needs the full policy; sekv joins without.
        auto* selector = dialog.findChild<QComboBox*>(QStringLiteral("reuseSelector"));
        auto* recompute = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("reuseRecompute"));
        QVERIFY(!selector->isEnabled());
        QCOMPARE(selector->currentData().toString(), QStringLiteral("none"));
        policy->setCurrentIndex(0);
        QVERIFY(!budget->isEnabled());
        QCOMPARE(dialog.result_settings().memory.policy, QStringLiteral("full"));
        QVERIFY(selector->isEnabled());
        QVERIFY(!recompute->isEnabled()); // only epic recomputes a share
        selector->setCurrentIndex(selector->findData(QStringLiteral("epic")));
        QVERIFY(recompute->isEnabled());
        recompute->setValue(20);
        QCOMPARE(dialog.result_settings().reuse.selector, QStringLiteral("epic"));
        QCOMPARE(dialog.result_settings().reuse.recompute, 0.2);
        auto* init = dialog.findChild<QComboBox*>(QStringLiteral("reuseStateInit"));
        QCOMPARE(init->currentData().toString(), QStringLiteral("single-block"));
        init->setCurrentIndex(init->findData(QStringLiteral("zero")));
        QCOMPARE(dialog.result_settings().reuse.state_init, QStringLiteral("zero"));
        policy->setCurrentIndex(1); // back to sekv: the selector falls back to none
        QCOMPARE(dialog.result_settings().reuse.selector, QStringLiteral("none"));
    }
    // The selector and share persist; an unknown selector in the file falls back to none.
    {
        AppSettings e = r;
        e.memory.policy = QStringLiteral("full");
        e.reuse.selector = QStringLiteral("epic");
        e.reuse.recompute = 0.1;
        e.reuse.state_init = QStringLiteral("exact");
        e.save();
        QCOMPARE(AppSettings::load().reuse, e.reuse);
        QSettings().setValue("reuse/selector", QStringLiteral("cacheblend"));
        QCOMPARE(AppSettings::load().reuse.selector, QStringLiteral("none"));
    }
    QCOMPARE(r.recent_projects,
             (QStringList{QStringLiteral("/p/a.spanscope"), QStringLiteral("/p/b.spanscope")}));
    // Test mode keeps this away from the user's own settings.
    QVERIFY(QSettings().fileName().contains(QStringLiteral(".qttest")));
    QSettings().clear();
}

// Settings saved before SEKV became the default (no version key) that hold exactly the former
// defaults read as today's, said once in the banner; a choice of then is kept, and so is full
// saved by this version.
void GuiErrors::formerDefaultsReadAsTodays() {
    QSettings().clear();
    const auto write_version1 = [](const QString& policy, double rate) {
        QSettings q;
        q.clear();
        q.setValue("memory/policy", policy);
        q.setValue("memory/sekv_budget", 0.35);
        q.setValue("memory/sekv_expand_rate", rate);
        q.setValue("engine/threads", 2);
    };
    const MemorySettings today;
    write_version1(QStringLiteral("full"), 0.2);
    const AppSettings upgraded = AppSettings::load();
    QCOMPARE(upgraded.memory, today);
    QCOMPARE(upgraded.threads, 2);
    QVERIFY(upgraded.upgrade_note.contains(QStringLiteral("SEKV")));
    {
        QTemporaryDir dir;
        AppSettings s = upgraded;
        s.model_path = dir.filePath(QStringLiteral("none.gguf"));
        MainWindow w(s);
        QVERIFY2(w.banner_text().contains(QStringLiteral("SEKV by default")),
                 qPrintable(w.banner_text()));
    }
    const AppSettings again = AppSettings::load(); // the window saved them: said once
    QVERIFY(again.upgrade_note.isEmpty());
    QCOMPARE(again.memory, today);
    // Chosen then (another rate, or sekv): kept as saved, nothing said.
    write_version1(QStringLiteral("full"), 0.05);
    const AppSettings chosen = AppSettings::load();
    QCOMPARE(chosen.memory.policy, QStringLiteral("full"));
    QCOMPARE(chosen.memory.expand_rate, 0.05);
    QVERIFY(chosen.upgrade_note.isEmpty());
    write_version1(QStringLiteral("sekv"), 0.2);
    QCOMPARE(AppSettings::load().memory.expand_rate, 0.2);
    // full saved by this version is a choice.
    AppSettings full;
    full.memory.policy = QStringLiteral("full");
    full.save();
    QCOMPARE(AppSettings::load().memory.policy, QStringLiteral("full"));
    QVERIFY(AppSettings::load().upgrade_note.isEmpty());
    QSettings().clear();
}

QTEST_MAIN(GuiErrors)
#include "test_gui_errors.moc"
