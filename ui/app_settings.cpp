#include "ui/app_settings.h"

#include "answering/project_answer.h"
#include "engine/sekv/sekv_routing.h"

#include <QSettings>
#include <QStandardPaths>

namespace spanscope::gui {

namespace {
// 2: SEKV is the default memory policy (issue 48); 1 (no key): the settings of the versions
// before, whose defaults were full, 20 % of the spans per head, τ on the question, one stage.
constexpr int kSettingsVersion = 2;

// Whether `s`, saved before the version key, holds exactly the memory defaults of then: saved
// as they came (every project opened saved all settings), not chosen.
bool holds_version1_memory_defaults(const QSettings& s) {
    return s.value("settings/version", 1).toInt() < 2 &&
           s.value("memory/policy").toString() == QLatin1String("full") &&
           qAbs(s.value("memory/sekv_expand_rate", 0.2).toDouble() - 0.2) < 1e-9 &&
           !s.value("memory/sekv_tau_per_query", false).toBool() &&
           s.value("memory/sekv_rerank", 0).toInt() == 0;
}
} // namespace

QString AppSettings::model_failure_advice() const {
    if (!model_override.isEmpty())
        return QStringLiteral("This run's --model chose it: choose another model file in File ▸ "
                              "Settings (it replaces --model at once), or start without --model "
                              "to use the one chosen there.");
    if (!model_path.isEmpty())
        return QStringLiteral("Choose another model file in File ▸ Settings.");
    if (!qEnvironmentVariableIsEmpty("SPANSCOPE_MODEL"))
        return QStringLiteral("$SPANSCOPE_MODEL chose it: set it to another file, or unset it "
                              "to use the default model; or choose a file in File ▸ Settings.");
    return QStringLiteral("Choose another model file in File ▸ Settings, or install the default "
                          "one again with `bash scripts/setup.sh model`.");
}

AppSettings AppSettings::load() {
    QSettings s;
    AppSettings a;
    a.model_path = s.value("engine/model").toString();
    // A key added to version 2 without changing what the others mean: absent, the list starts
    // with the file chosen before it existed (empty path: the default model, never listed).
    for (const QString& f : s.value("engine/model_files").toStringList())
        if (!f.isEmpty() && !a.model_files.contains(f))
            a.model_files << f;
    if (!a.model_path.isEmpty() && !a.model_files.contains(a.model_path))
        a.model_files << a.model_path;
    a.threads = qBound(0, s.value("engine/threads", 0).toInt(), 256);
    if (s.value("engine/backend").toString() == QLatin1String("cuda"))
        a.backend = QStringLiteral("cuda");
    a.generation.max_tokens = qBound(1, s.value("generation/max_tokens", 128).toInt(), 4096);
    a.generation.temperature = qBound(0.0, s.value("generation/temperature", 0.0).toDouble(), 5.0);
    a.generation.top_k = qBound(0, s.value("generation/top_k", 40).toInt(), 1000);
    a.generation.top_p = qBound(0.0, s.value("generation/top_p", 0.95).toDouble(), 1.0);
    a.generation.seed = s.value("generation/seed", 0).toULongLong();
    if (holds_version1_memory_defaults(s)) {
        a.upgrade_note = QStringLiteral(
            "Memory: this version answers with SEKV by default (spans and their zoom shown; "
            "1.25 % of the spans per head, two-stage routing). The settings saved before held "
            "the former defaults (full memory) and now read as the new ones; Settings ▸ "
            "Memory policy: full brings full memory back.");
    } else {
        const QString policy = s.value("memory/policy", a.memory.policy).toString();
        if (policy == QLatin1String("full") || policy == QLatin1String("sekv"))
            a.memory.policy = policy;
        a.memory.expand_rate =
            qBound(0.0, s.value("memory/sekv_expand_rate", a.memory.expand_rate).toDouble(), 1.0);
        a.memory.tau_per_query =
            s.value("memory/sekv_tau_per_query", a.memory.tau_per_query).toBool();
        // Two-stage routing: an N the engine would refuse reads as off (where it applies:
        // MemorySettings::rerank_in_effect).
        const int rerank = s.value("memory/sekv_rerank", a.memory.rerank).toInt();
        a.memory.rerank = rerank >= 2 && rerank <= kMaxRerank ? rerank : 0;
    }
    a.memory.budget = qBound(0.01, s.value("memory/sekv_budget", a.memory.budget).toDouble(), 1.0);
    const QString router = s.value("memory/sekv_router").toString();
    if (router == QLatin1String(kRouterTrained) || router == QLatin1String(kRouterTrainingFree))
        a.memory.router = router;
    a.memory.router_params_file = s.value("memory/sekv_zoom_params").toString();
    const QString selector = s.value("reuse/selector", a.reuse.selector).toString();
    if (spanscope::project_selector_problem(selector.toStdString()).empty())
        a.reuse.selector = selector;
    // epic and full recompute with the full memory policy only (sekv joins without).
    if (a.memory.sekv())
        a.reuse.selector = QStringLiteral("none");
    a.reuse.recompute = qBound(0.01, s.value("reuse/recompute", a.reuse.recompute).toDouble(), 1.0);
    const QString init = s.value("reuse/state_init", a.reuse.state_init).toString();
    if (init == QLatin1String("single-block") || init == QLatin1String("exact") ||
        init == QLatin1String("zero"))
        a.reuse.state_init = init;
    a.cache_limit_bytes =
        qMax<qint64>(0, s.value("cache/limit_bytes", a.cache_limit_bytes).toLongLong());
    a.recent_projects = s.value("projects/recent").toStringList();
    return a;
}

void AppSettings::save() const {
    QSettings s;
    s.setValue("settings/version", kSettingsVersion);
    s.setValue("engine/model", model_path);
    s.setValue("engine/model_files", model_files);
    s.setValue("engine/threads", threads);
    s.setValue("engine/backend", backend);
    s.setValue("generation/max_tokens", generation.max_tokens);
    s.setValue("generation/temperature", generation.temperature);
    s.setValue("generation/top_k", generation.top_k);
    s.setValue("generation/top_p", generation.top_p);
    s.setValue("generation/seed", generation.seed);
    s.setValue("memory/policy", memory.policy);
    s.setValue("memory/sekv_budget", memory.budget);
    s.setValue("memory/sekv_expand_rate", memory.expand_rate);
    s.setValue("memory/sekv_tau_per_query", memory.tau_per_query);
    s.setValue("memory/sekv_rerank", memory.rerank);
    s.setValue("memory/sekv_router", memory.router);
    s.setValue("memory/sekv_zoom_params", memory.router_params_file);
    s.setValue("reuse/selector", reuse.selector);
    s.setValue("reuse/recompute", reuse.recompute);
    s.setValue("reuse/state_init", reuse.state_init);
    s.setValue("cache/limit_bytes", cache_limit_bytes);
    s.setValue("projects/recent", recent_projects);
}

void AppSettings::remember_project(const QString& path) {
    recent_projects.removeAll(path);
    recent_projects.prepend(path);
    while (recent_projects.size() > 8)
        recent_projects.removeLast();
    save();
}

QString default_project_dir() {
    // AppDataLocation is $XDG_DATA_HOME/<organization>/<application>; the command line uses
    // $XDG_DATA_HOME/spanscope/projects, and so do we.
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) +
           "/spanscope/projects";
}

} // namespace spanscope::gui
