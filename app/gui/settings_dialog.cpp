#include "settings_dialog.h"

#include "model_locator.h"

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

SettingsDialog::SettingsDialog(const AppSettings& current, QWidget* parent)
    : QDialog(parent), base_(current) {
    setWindowTitle(tr("Settings"));
    auto* form = new QFormLayout(this);

    model_ = new QLineEdit(current.model_path);
    model_->setObjectName(QStringLiteral("modelPath"));
    model_->setPlaceholderText(QString::fromStdString(
        locate_model("").path.empty() ? std::string("(not installed)") : locate_model("").path));
    auto* browse = new QPushButton(tr("Browse…"));
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString f = QFileDialog::getOpenFileName(this, tr("Model file"), QString(),
                                                       tr("GGUF models (*.gguf)"));
        if (!f.isEmpty())
            model_->setText(f);
    });
    auto* row = new QHBoxLayout;
    row->addWidget(model_, 1);
    row->addWidget(browse);
    form->addRow(tr("Model file (empty: default)"), row);

    threads_ = new QSpinBox;
    threads_->setRange(0, 256);
    threads_->setSpecialValueText(tr("all %1 cores").arg(QThread::idealThreadCount()));
    threads_->setValue(current.threads);
    form->addRow(tr("Engine threads"), threads_);

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
    s.model_path = model_->text().trimmed();
    s.threads = threads_->value();
    s.generation.max_tokens = max_tokens_->value();
    s.generation.temperature = temperature_->value();
    s.generation.top_k = top_k_->value();
    s.generation.top_p = top_p_->value();
    s.generation.seed = static_cast<quint64>(seed_->value());
    const qint64 bytes = std::llround(cache_gib_->value() * (1 << 30));
    // Unchanged in the dialog: keep the exact byte count (the spin box rounds).
    if (std::llabs(bytes - base_.cache_limit_bytes) > (1 << 30) / 20)
        s.cache_limit_bytes = bytes;
    return s;
}

} // namespace spanscope::gui
