// The desktop application's settings, kept with QSettings (~/.config/Spanscope/spanscope.conf;
// tests enable QStandardPaths' test mode, which moves them aside).
#pragma once

#include "ui/gui_types.h"

#include <QString>
#include <QStringList>

namespace spanscope::gui {

struct AppSettings {
    QString model_path; ///< empty: the default model location (model_locator.h)
    /// The model files the user added to Settings' model list (paths, in the order added;
    /// the default model is never among them). Kept under "engine/model_files"; settings
    /// saved before the list read with model_path, when one was chosen, as its one entry.
    QStringList model_files;
    /// --model for this run only: used instead of model_path, never saved.
    QString model_override;
    /// The model file to load: the override, else model_path.
    QString effective_model() const {
        return model_override.isEmpty() ? model_path : model_override;
    }
    /// What the user can do when effective_model() cannot be loaded, in one sentence: another
    /// file in Settings or no --model (an override), another file in Settings (a chosen
    /// file), another $SPANSCOPE_MODEL or none (the variable chose it), or another file or the
    /// default model installed again (the default location).
    QString model_failure_advice() const;
    int threads = 0; ///< engine threads; 0: all cores
    /// Where the forward pass runs: "cpu" or "cuda" (backend.h); a backend that cannot run
    /// here fails the model's load with the reason.
    QString backend = QStringLiteral("cpu");
    GenerationSettings generation;
    MemorySettings memory;
    ReuseSettings reuse;
    /// The chunk-state cache limit shown in Settings (bytes): read from a project as it opens,
    /// written to it when changed; new projects start at the store's default (8 GiB).
    qint64 cache_limit_bytes = qint64{8} << 30;
    QStringList recent_projects; ///< most recent first, at most 8
    /// Said once, as the window opens, when load() read the memory settings that a version
    /// before SEKV became the default saved as its own defaults (full, 20 % per head, τ on the
    /// question, one stage) as today's defaults instead; empty otherwise.
    QString upgrade_note;

    /// Read from QSettings; a value out of its range reads as its default. Settings saved
    /// before the "settings/version" key (version 1) whose memory settings are exactly that
    /// version's defaults get today's (upgrade_note says so); any other choice is kept.
    static AppSettings load();
    /// Write every setting and the version of their meaning (2: SEKV the default).
    void save() const;
    /// Put `path` first in recent_projects (and save).
    void remember_project(const QString& path);
};

/// Where projects are created by default: QStandardPaths::GenericDataLocation
/// + "/spanscope/projects" ($XDG_DATA_HOME/spanscope/projects, as for spanscope-cli).
QString default_project_dir();

} // namespace spanscope::gui
