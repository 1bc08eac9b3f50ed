// Which SEKV router a run uses (docs/sekv.md): trained (W, τ and the rank gates from a
// parameter file, zoom_params.h; τ calibrated on the question unless the learned one is asked
// for) or training-free (W = 0, τ calibrated, the energy gate), and
// where a model's parameter file is found. The default is trained when a file for the model
// (same fingerprint) is installed, else training-free; asking for trained without one is an
// error, never a silent fallback.
//
// A model file `<name>.gguf` has its parameters in `<name>.zoom.gguf`, looked for in
//   1. each XDG data directory (model_locator.h xdg_data_dirs) + /spanscope/zoom/,
//   2. the installed data directory compiled in (<prefix>/share/spanscope/zoom, where
//      packaging/CMakeLists.txt installs resources/zoom/*.gguf),
//   3. the source tree's resources/zoom/ compiled in (a build tree runs without installing).
// The first file trained for the model is taken; the others are passed over with a note.
#pragma once

#include "engine/sekv/zoom_params.h"

#include <memory>
#include <string>
#include <vector>

namespace spanscope {

/// The router modes, as the command line and Settings name them.
inline constexpr const char* kRouterTrained = "trained";
inline constexpr const char* kRouterTrainingFree = "training-free";
/// The attention-mass oracle of evaluations (sekv_routing.h SekvRouterOptions::oracle): the
/// spans of most attention mass, a reference for the other two, not a policy to answer with.
inline constexpr const char* kRouterOracle = "oracle";

/// How the trained router's τ is set, as result lines name it ("tau"): calibrated to the
/// expand rate on the question (the default), or the thresholds learned in training (deciding
/// as in training: each query head alone, or the KV group's union when ZoomParams::share_group).
inline constexpr const char* kTauCalibrated = "calibrated";
inline constexpr const char* kTauLearned = "learned";
/// τ calibrated on each query's own relevances (--tau-per-query), either router.
inline constexpr const char* kTauPerQuery = "per_query";
/// "rank_gate" of a trained router's line run with the energy gate (--full-rank).
inline constexpr const char* kRankGateEnergy = "energy";
/// The τ of a trained-router line without "tau": it was measured before the choice existed,
/// with the learned thresholds.
inline constexpr const char* kTauUnrecorded = kTauLearned;
/// The settings of an eval line (cmd_eval settings_of) with --tau-per-query and --full-rank.
inline constexpr const char* kSettingsTauPerQuery = " tau=per_query";
inline constexpr const char* kSettingsFullRank = " rank=full";
/// In the settings of an eval line measured with `--summary-weights uniform`
/// (SekvOptions::uniform_summary): its sekv and chunk_summary lines are their own configuration.
inline constexpr const char* kSettingsUniformSummary = " summary=uniform";
/// In the settings of an eval line measured with two-stage routing (`--rerank N`,
/// SekvRouterOptions::rerank), followed by N: its sekv lines are their own configuration.
inline constexpr const char* kSettingsRerank = " rerank=";

/// The τ rule of a sekv result line: kTauPerQuery when its settings hold kSettingsTauPerQuery
/// (lines measured before "tau" said so recorded kTauCalibrated or nothing), else its "tau"
/// (`tau`, "" when absent), else kTauUnrecorded for the trained router and "" for the
/// training-free one.
std::string result_line_tau(bool trained, const std::string& tau, const std::string& settings);
/// Whether a trained-router result line ran with the energy gate (--full-rank): its settings
/// hold kSettingsFullRank or its "rank_gate" is kRankGateEnergy (`rank_gate`, "" when absent;
/// the caller refuses other values).
bool result_line_full_rank(const std::string& rank_gate, const std::string& settings);
/// Whether an eval line's settings hold kSettingsUniformSummary.
bool result_line_uniform_summary(const std::string& settings);
/// The N of kSettingsRerank in an eval line's settings, 0 when absent. Throws
/// std::invalid_argument when N is not a number in [2, kMaxRerank] (sekv_routing.h).
int result_line_rerank(const std::string& settings);

/// "<model file name without .gguf>.zoom.gguf" for a model path.
std::string zoom_file_name(const std::string& model_path);

/// The paths looked at for the parameters of `model_path`, in order (see above).
std::vector<std::string> zoom_search_paths(const std::string& model_path);

/// The router a run uses.
struct RouterChoice {
    std::string mode; ///< kRouterTrained, kRouterTrainingFree or kRouterOracle
    std::shared_ptr<const ZoomParams> params; ///< trained: the parameters; else nullptr
    std::string path;                         ///< trained: the file they came from
    /// trained: τ is the learned threshold, each query head alone (SekvRouterOptions::
    /// learned_tau, share_group as ZoomParams::share_group), rather than calibrated to the expand
    /// rate on the question. choose_router leaves it false; the caller's option sets it.
    bool learned_tau = false;
    /// τ calibrated per query (--tau-per-query) and, trained, the rank gate set aside
    /// (--full-rank); the caller's options set them, for the result lines.
    bool tau_per_query = false, full_rank = false;
    /// Files passed over and why (another model, unreadable), for the user: the reason a
    /// default is training-free.
    std::vector<std::string> notes;
};

/// Choose the router. requested: "" (the default: trained when a file for the model is found),
/// kRouterTrained, kRouterTrainingFree or kRouterOracle. zoom_path: a parameter file to use (e.g.
/// --zoom-params); empty: searched (zoom_search_paths). fingerprint: the model's
/// (storage/model_fingerprint.h fingerprint_hex), every file is checked against it.
/// Throws std::invalid_argument for another mode, or a zoom_path with kRouterTrainingFree or
/// kRouterOracle;
/// ZoomParamsError when a given zoom_path cannot be used (load_zoom_params), or when trained is
/// asked for and no file for the model is found (the message lists where it looked and why
/// each file found was passed over).
RouterChoice choose_router(const std::string& requested, const std::string& zoom_path,
                           const std::string& model_path, const std::string& fingerprint);

} // namespace spanscope
