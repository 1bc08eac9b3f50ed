// Which SEKV router a run uses (docs/sekv.md): trained (W, τ and the rank gates from a
// parameter file, router_params.h; τ calibrated on the question unless the learned one is asked
// for) or training-free (W = 0, τ calibrated, the energy gate), and
// where a model's parameter file is found. The default is trained when a file for the model
// (same fingerprint) is installed, else training-free; asking for trained without one is an
// error, never a silent fallback.
//
// A model file `<name>.gguf` has its parameters in `<name>.zoom.gguf`, looked for in
//   1. each XDG data directory (engine/model/model_locator.h xdg_data_dirs) + /spanscope/zoom/,
//   2. the installed data directory compiled in (<prefix>/share/spanscope/zoom, where
//      packaging/CMakeLists.txt installs resources/zoom/*.gguf; answering/CMakeLists.txt sets it),
//   3. the source tree's resources/zoom/ compiled in (a build tree runs without installing).
// The first file trained for the model is taken; the others are passed over with a note.
#pragma once

#include "engine/sekv/router_params.h"
#include "engine/sekv/sekv_routing.h"

#include <memory>
#include <string>
#include <vector>

namespace spanscope {

/// How the trained router's τ is set, as result lines name it ("tau"): calibrated to the
/// expand rate on the question (the default), or the thresholds learned in training (deciding
/// as in training: each query head alone, or the KV group's union when RouterParams::share_group).
inline constexpr const char* kTauCalibrated = "calibrated";
inline constexpr const char* kTauLearned = "learned";
/// τ calibrated on each query's own relevances (--tau-per-query), either router.
inline constexpr const char* kTauPerQuery = "per_query";
/// "rank_gate" of a trained router's line run with the energy gate (--full-rank).
inline constexpr const char* kRankGateEnergy = "energy";
/// "<model file name without .gguf>.zoom.gguf" for a model path.
std::string router_file_name(const std::string& model_path);

/// The paths looked at for the parameters of `model_path`, in order (see above).
std::vector<std::string> router_search_paths(const std::string& model_path);

/// The router a run uses.
struct RouterChoice {
    std::string mode; ///< kRouterTrained, kRouterTrainingFree or kRouterOracle
    std::shared_ptr<const RouterParams> params; ///< trained: the parameters; else nullptr
    std::string path;                           ///< trained: the file they came from
    /// trained: τ is the learned threshold, each query head alone (SekvRouterOptions::
    /// learned_tau, share_group as RouterParams::share_group), rather than calibrated to the expand
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
/// kRouterTrained, kRouterTrainingFree or kRouterOracle. params_path: a parameter file to use (e.g.
/// --zoom-params); empty: searched (router_search_paths). fingerprint: the model's
/// (storage/model_fingerprint.h fingerprint_hex), every file is checked against it.
/// Throws std::invalid_argument for another mode, or a params_path with kRouterTrainingFree or
/// kRouterOracle;
/// RouterParamsError when a given params_path cannot be used (load_router_params), or when trained
/// is asked for and no file for the model is found (the message lists where it looked and why each
/// file found was passed over).
RouterChoice choose_router(const std::string& requested, const std::string& params_path,
                           const std::string& model_path, const std::string& fingerprint);

} // namespace spanscope
