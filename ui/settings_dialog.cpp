#include "ui/settings_dialog.h"

#include "engine/model/backend.h"
#include "engine/sekv/sekv_routing.h"
#include "ui/model_list.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QThread>

#include <cmath>

namespace spanscope::gui {

namespace {
/// A spin box of percentages shown without trailing zeros ("0.625", "20").
class PercentSpinBox : public QDoubleSpinBox {
public:
    using QDoubleSpinBox::QDoubleSpinBox;
    QString textFromValue(double value) const override { return trimmed_number(value, decimals()); }
};
} // namespace

SettingsDialog::SettingsDialog(const AppSettings& current, QWidget* parent)
    : QDialog(parent), base_(current) {
    setWindowTitle(tr("Settings"));
    auto* form = new QFormLayout(this);

    models_ = new ModelList(current.model_path, current.model_files);
    models_->setToolTip(tr("The model answers are computed with: select a row. A project's "
                           "documents read with another model are read again when a question "
                           "needs them."));
    form->addRow(tr("Model"), models_);

    threads_ = new QSpinBox;
    threads_->setRange(0, 256);
    threads_->setSpecialValueText(tr("all %1 cores").arg(QThread::idealThreadCount()));
    threads_->setValue(current.threads);
    form->addRow(tr("Engine threads"), threads_);

    backend_ = new QComboBox;
    backend_->setObjectName(QStringLiteral("backend"));
    for (const Backend b : {Backend::Cpu, Backend::Cuda}) {
        const BackendStatus st = backend_status(b);
        const QString name = QString::fromLatin1(backend_name(b));
        backend_->addItem(QStringLiteral("%1 — %2").arg(name, QString::fromStdString(st.detail)),
                          name);
    }
    backend_->setCurrentIndex(qMax(0, backend_->findData(current.backend)));
    backend_->setToolTip(tr("Where the model runs: the CPU, or an NVIDIA GPU through CUDA (the "
                            "build must have found the CUDA toolkit, and the machine must have "
                            "a GPU and its driver)."));
    form->addRow(tr("Backend"), backend_);

    max_tokens_ = new QSpinBox;
    max_tokens_->setRange(1, 4096);
    max_tokens_->setValue(current.generation.max_tokens);
    max_tokens_->setSuffix(tr(" tokens"));
    form->addRow(tr("Longest answer"), max_tokens_);

    temperature_ = new QDoubleSpinBox;
    temperature_->setRange(0, 5);
    temperature_->setSingleStep(0.1);
    temperature_->setSpecialValueText(tr("0 (greedy)"));
    temperature_->setValue(current.generation.temperature);
    form->addRow(tr("Temperature"), temperature_);

    top_k_ = new QSpinBox;
    top_k_->setRange(0, 1000);
    top_k_->setSpecialValueText(tr("off"));
    top_k_->setValue(current.generation.top_k);
    form->addRow(tr("Top-k"), top_k_);

    top_p_ = new QDoubleSpinBox;
    top_p_->setRange(0.01, 1);
    top_p_->setSingleStep(0.05);
    top_p_->setValue(current.generation.top_p);
    form->addRow(tr("Top-p"), top_p_);

    seed_ = new QSpinBox;
    seed_->setRange(0, 2147483647);
    seed_->setValue(static_cast<int>(qMin<quint64>(current.generation.seed, 2147483647)));
    form->addRow(tr("Seed"), seed_);

    policy_ = new QComboBox;
    policy_->setObjectName(QStringLiteral("memoryPolicy"));
    policy_->addItem(tr("full — every token's keys and values"), QStringLiteral("full"));
    policy_->addItem(tr("sekv — spans at two resolutions, zoomed into per query"),
                     QStringLiteral("sekv"));
    policy_->setCurrentIndex(current.memory.sekv() ? 1 : 0);
    policy_->setToolTip(tr("How the model's memory holds the documents. sekv serves the "
                           "global-attention layers with full-head RoPE of a model that also has "
                           "sliding-window or recurrent ones (Gemma 3, the hybrids) and the "
                           "later half of a model whose layers are all global (the Llama "
                           "family); it shows its spans in the document view and each "
                           "answer's zoom in the inspector."));
    form->addRow(tr("Memory policy"), policy_);

    budget_ = new QDoubleSpinBox;
    budget_->setObjectName(QStringLiteral("sekvBudget"));
    budget_->setRange(1, 100);
    budget_->setDecimals(0);
    budget_->setSuffix(tr(" % of full"));
    budget_->setValue(100 * current.memory.budget);
    budget_->setToolTip(tr("sekv: the fast tier's bytes as a fraction of what full holds for the "
                           "layers sekv serves (the others hold what full holds); spans are "
                           "made longer until it fits"));
    form->addRow(tr("SEKV fast-tier budget"), budget_);

    expand_rate_ = new PercentSpinBox;
    expand_rate_->setObjectName(QStringLiteral("sekvExpandRate"));
    expand_rate_->setRange(0, 100);
    // Three decimals: the rates measured for the trained router are as low as 0.625 %.
    expand_rate_->setDecimals(3);
    expand_rate_->setSuffix(tr(" % of spans"));
    expand_rate_->setValue(100 * current.memory.expand_rate);
    expand_rate_->setToolTip(tr("sekv: the share of spans a query zooms into (the router's "
                                "threshold is calibrated to it on the question, or on each "
                                "query below)"));
    form->addRow(tr("SEKV expand rate"), expand_rate_);

    tau_per_query_ = new QCheckBox(tr("Apply the expand rate to each query (τ per query)"));
    tau_per_query_->setObjectName(QStringLiteral("sekvTauPerQuery"));
    tau_per_query_->setChecked(current.memory.tau_per_query);
    tau_per_query_->setToolTip(tr("sekv: each query head's threshold is set on its own "
                                  "relevances, so every answer token's heads zoom into at least "
                                  "the expand rate's share of the spans (the heads sharing a "
                                  "KV head take the union); off: one threshold per head, set on "
                                  "the question. The trained router was evaluated with it on."));
    form->addRow(QString(), tau_per_query_);

    // Two-stage routing (SekvRouterOptions::rerank): 1 reads "off" and means 0, as N = 1 would
    // re-rank nothing.
    rerank_ = new QSpinBox;
    rerank_->setObjectName(QStringLiteral("sekvRerank"));
    rerank_->setRange(1, kMaxRerank);
    rerank_->setSpecialValueText(tr("off"));
    rerank_->setSuffix(tr(" candidates per expanded span"));
    rerank_->setValue(qMax(1, current.memory.rerank));
    rerank_->setToolTip(tr("Needs the sekv policy, τ per query ticked and the CPU backend. Each "
                           "query head takes this many times its share of spans as candidates "
                           "from its router, scores them against their keys rebuilt from the "
                           "slower tier, and zooms into those of most attention. More faithful "
                           "to full attention at low expand rates (4 was measured at 0.625 %: "
                           "docs/sekv.md, \"Two-stage routing\"); no more fast-tier memory, "
                           "and it reads the candidates' key factors at every answer token. "
                           "Once N times the expand rate reaches every span, a larger N "
                           "changes nothing."));
    form->addRow(tr("SEKV two-stage routing"), rerank_);

    router_ = new QComboBox;
    router_->setObjectName(QStringLiteral("sekvRouter"));
    router_->addItem(tr("automatic — trained when a parameter file for the model is installed"),
                     QString());
    router_->addItem(
        tr("trained — a relevance correction learned for the model (a parameter file)"),
        QString::fromLatin1(kRouterTrained));
    router_->addItem(tr("training-free — the summary keys' dot product alone"),
                     QString::fromLatin1(kRouterTrainingFree));
    router_->setCurrentIndex(qMax(0, router_->findData(current.memory.router)));
    router_->setToolTip(tr("sekv: how a query picks the spans it zooms into. The trained router "
                           "adds projections and rank gates learned for the model (the model's "
                           ".zoom.gguf file) to the training-free relevance; asking for it "
                           "without one is an error. Both calibrate their thresholds to the "
                           "expand rate. The answer's statistics name the router used."));
    form->addRow(tr("SEKV router"), router_);

    router_params_file_ = new QLineEdit(current.memory.router_params_file);
    router_params_file_->setObjectName(QStringLiteral("routerParamsFile"));
    router_params_file_->setPlaceholderText(tr("(the installed one for the model)"));
    router_params_browse_ = new QPushButton(tr("Browse…"));
    connect(router_params_browse_, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Zoom parameter file"), QString(),
                                                       tr("Zoom parameters (*.zoom.gguf *.gguf)"));
        if (!f.isEmpty())
            router_params_file_->setText(f);
    });
    auto* params_row = new QHBoxLayout;
    params_row->addWidget(router_params_file_, 1);
    params_row->addWidget(router_params_browse_);
    form->addRow(tr("SEKV parameter file (empty: default)"), params_row);

    selector_ = new QComboBox;
    selector_->setObjectName(QStringLiteral("reuseSelector"));
    selector_->addItem(tr("none — stored keys and values, moved to their new positions"),
                       QStringLiteral("none"));
    selector_->addItem(tr("epic — recompute the first tokens of each later document"),
                       QStringLiteral("epic"));
    selector_->addItem(tr("full — recompute everything (as slow as reading anew)"),
                       QStringLiteral("full"));
    selector_->setCurrentIndex(qMax(0, selector_->findData(current.reuse.selector)));
    selector_->setToolTip(tr("Each document was read on its own; with several in context, the "
                             "later ones never saw the earlier ones. A selector recomputes some "
                             "of their tokens with the documents before them in context. Needs "
                             "the full memory policy."));
    form->addRow(tr("Joining documents"), selector_);

    recompute_ = new QDoubleSpinBox;
    recompute_->setObjectName(QStringLiteral("reuseRecompute"));
    recompute_->setRange(1, 100);
    recompute_->setDecimals(0);
    recompute_->setSuffix(tr(" % of the context"));
    recompute_->setValue(100 * current.reuse.recompute);
    recompute_->setToolTip(tr("epic: the share of the context's tokens recomputed, spread over "
                              "the starts of the documents after the first"));
    form->addRow(tr("Tokens recomputed"), recompute_);

    state_init_ = new QComboBox;
    state_init_->setObjectName(QStringLiteral("reuseStateInit"));
    state_init_->addItem(tr("single-block — the last document's state"),
                         QStringLiteral("single-block"));
    state_init_->addItem(tr("exact — every document's state composed (Mamba-2 models)"),
                         QStringLiteral("exact"));
    state_init_->addItem(tr("zero — as if the documents were not there"), QStringLiteral("zero"));
    state_init_->setCurrentIndex(qMax(0, state_init_->findData(current.reuse.state_init)));
    state_init_->setToolTip(tr("Hybrid models (Mamba-2 or Gated DeltaNet layers beside "
                               "attention): the state their recurrent layers start from after "
                               "documents that were each read on their own"));
    form->addRow(tr("Recurrent state (hybrid models)"), state_init_);

    const auto enable = [this] {
        const bool sekv = policy_->currentData().toString() == QLatin1String("sekv");
        const QString router = router_->currentData().toString();
        budget_->setEnabled(sekv);
        // Either router's τ is calibrated to the expand rate, on the question or on each query.
        expand_rate_->setEnabled(sekv);
        tau_per_query_->setEnabled(sekv);
        // The GPU memory serves one stage only (DeviceSekvMemory refuses two-stage routing).
        MemorySettings m;
        m.policy = policy_->currentData().toString();
        m.tau_per_query = tau_per_query_->isChecked();
        m.router = router;
        rerank_->setEnabled(m.two_stage_applies(backend_->currentData().toString()));
        router_->setEnabled(sekv);
        router_params_file_->setEnabled(sekv && m.takes_router_params_file());
        router_params_browse_->setEnabled(router_params_file_->isEnabled());
        // SEKV joins documents without recompute (its spans are moved, not recomputed).
        if (sekv)
            selector_->setCurrentIndex(selector_->findData(QStringLiteral("none")));
        selector_->setEnabled(!sekv);
        recompute_->setEnabled(!sekv &&
                               selector_->currentData().toString() == QLatin1String("epic"));
    };
    connect(selector_, &QComboBox::currentIndexChanged, this, enable);
    connect(policy_, &QComboBox::currentIndexChanged, this, enable);
    connect(router_, &QComboBox::currentIndexChanged, this, enable);
    connect(tau_per_query_, &QCheckBox::toggled, this, enable);
    connect(backend_, &QComboBox::currentIndexChanged, this, enable);
    enable();

    cache_gib_ = new QDoubleSpinBox;
    cache_gib_->setRange(0, 4096);
    cache_gib_->setDecimals(1);
    cache_gib_->setSuffix(tr(" GiB"));
    cache_gib_->setValue(static_cast<double>(current.cache_limit_bytes) / (1 << 30));
    form->addRow(tr("Chunk state cache limit (this project)"), cache_gib_);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    form->addRow(buttons);
}

AppSettings SettingsDialog::result_settings() const {
    AppSettings s = base_;
    s.model_path = models_->chosen_path();
    s.model_files = models_->files();
    s.threads = threads_->value();
    s.backend = backend_->currentData().toString();
    s.generation.max_tokens = max_tokens_->value();
    s.generation.temperature = temperature_->value();
    s.generation.top_k = top_k_->value();
    s.generation.top_p = top_p_->value();
    s.generation.seed = static_cast<quint64>(seed_->value());
    s.memory.policy = policy_->currentData().toString();
    // Unchanged in the dialog: keep the exact value (the spin boxes round: the budget to a
    // percent, the rate to a thousandth of one).
    if (std::abs(budget_->value() - 100 * base_.memory.budget) >= 0.5)
        s.memory.budget = budget_->value() / 100;
    if (std::abs(expand_rate_->value() - 100 * base_.memory.expand_rate) >= 0.0005)
        s.memory.expand_rate = expand_rate_->value() / 100;
    s.memory.tau_per_query = tau_per_query_->isChecked();
    // Kept as shown, as the other SEKV settings are under full; it applies where
    // MemorySettings::rerank_in_effect says so.
    s.memory.rerank = rerank_->value() >= 2 ? rerank_->value() : 0;
    s.memory.router = router_->currentData().toString();
    s.memory.router_params_file = router_params_file_->text().trimmed();
    if (!s.memory.takes_router_params_file())
        s.memory.router_params_file.clear();
    s.reuse.selector = selector_->currentData().toString();
    s.reuse.state_init = state_init_->currentData().toString();
    if (std::abs(recompute_->value() - 100 * base_.reuse.recompute) >= 0.5)
        s.reuse.recompute = recompute_->value() / 100;
    const qint64 bytes = std::llround(cache_gib_->value() * (1 << 30));
    // Unchanged in the dialog: keep the exact byte count (the spin box rounds).
    if (std::llabs(bytes - base_.cache_limit_bytes) > (1 << 30) / 20)
        s.cache_limit_bytes = bytes;
    return s;
}

} // namespace spanscope::gui
