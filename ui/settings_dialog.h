// The Settings dialog: the model (a list of the default one and the files added,
// ui/model_list.h), engine threads, generation parameters, memory policy (full
// or sekv, with SEKV's fast-tier budget, expand rate, τ per question or per query, and router:
// trained from a parameter file or training-free), how documents are joined in context
// (LinearKV selector, recompute share, state initialiser of hybrid models), cache size limit.
#pragma once

#include "ui/app_settings.h"

#include <QDialog>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace spanscope::gui {

class ModelList;

class SettingsDialog : public QDialog {
    Q_OBJECT
public:
    SettingsDialog(const AppSettings& current, QWidget* parent = nullptr);
    /// The settings as edited (recent projects unchanged).
    AppSettings result_settings() const;

private:
    AppSettings base_;
    ModelList* models_ = nullptr;
    QSpinBox* threads_ = nullptr;
    QComboBox* backend_ = nullptr;
    QSpinBox* max_tokens_ = nullptr;
    QDoubleSpinBox* temperature_ = nullptr;
    QSpinBox* top_k_ = nullptr;
    QDoubleSpinBox* top_p_ = nullptr;
    QSpinBox* seed_ = nullptr;
    QComboBox* policy_ = nullptr;
    QDoubleSpinBox* budget_ = nullptr;
    QDoubleSpinBox* expand_rate_ = nullptr;
    QCheckBox* tau_per_query_ = nullptr;
    QSpinBox* rerank_ = nullptr;
    QComboBox* router_ = nullptr;
    QLineEdit* router_params_file_ = nullptr;
    QPushButton* router_params_browse_ = nullptr;
    QComboBox* selector_ = nullptr;
    QDoubleSpinBox* recompute_ = nullptr;
    QComboBox* state_init_ = nullptr;
    QDoubleSpinBox* cache_gib_ = nullptr;
};

} // namespace spanscope::gui
