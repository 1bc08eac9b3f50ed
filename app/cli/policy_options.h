// The cache-policy options shared by the commands that answer (ask, bench, niah, eval): the
// policy of the global-attention layers and SEKV's settings (docs/architecture.md, Memory, §3.4),
// its router included (trained or training-free, zoom_locator.h).
#pragma once

#include "engine/sekv/zoom_locator.h"
#include "engine/session/session.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace spanscope {
class Model;
}

namespace spanscope::cli {

struct PolicyOptions {
    std::string policy = "full"; ///< one of global_policies() (model.h)
    double budget = 0.35;        ///< sekv and the baselines: fast-tier bytes as a fraction of full
    double expand_rate = 0.2;    ///< sekv: target fraction of spans a query zooms into
    bool expand_rate_given = false; ///< --expand-rate was on the command line
    int64_t expand_rows = 0;        ///< sekv: most reconstructed rows per query and head (0: none)
    double alpha = 1.0;             ///< sekv: anchor threshold μ + α·σ
    int64_t max_span = 32;          ///< sekv: longest span (tokens)
    std::vector<int> layers;        ///< sekv: layers it serves (default: the global layers)
    /// sekv: "trained", "training-free", "oracle" (evaluations' upper bound, with
    /// --tau-per-query), or "" (trained when a parameter file for the model is found, else
    /// training-free).
    std::string router;
    std::string zoom_params;  ///< sekv: the trained router's parameter file ("": searched)
    bool learned_tau = false; ///< sekv, trained router: its learned thresholds, not calibrated
    /// sekv: τ calibrated on each query's own relevances (SekvRouterOptions::tau_per_query).
    bool tau_per_query = false;
    /// sekv, trained router: factors at full rank (the energy gate), not the trained rank gate.
    bool full_rank = false;
    /// sekv: two-stage routing's candidates per expanded span (SekvRouterOptions::rerank; 0: off).
    int rerank = 0;
};

/// --policy, --budget, --expand-rate, --expand-rows, --alpha, --max-span, --sekv-layers,
/// --router, --zoom-params, --learned-tau, --tau-per-query, --full-rank, --rerank.
void add_policy_options(CLI::App& cmd, PolicyOptions& o);

/// --backend: where the forward pass runs, cpu or cuda (backend.h).
void add_backend_option(CLI::App& cmd, std::string& backend);

/// The session options for these choices (the router aside: apply_router).
void apply_policy(const PolicyOptions& o, SessionOptions& so);

/// The router of the sekv policy for `model` (zoom_locator.h choose_router), put into `so`
/// (use_router). Returns the choice; its mode is "" when `routes` is false. Throws
/// std::invalid_argument for --router, --zoom-params, --learned-tau, --tau-per-query or
/// --full-rank without a sekv run, --learned-tau or --full-rank with the training-free router,
/// --tau-per-query with --expand-rows, --expand-rate or --tau-per-query with --learned-tau (the
/// learned thresholds do not read them), and --learned-tau with --expand-rows for a file trained
/// with the KV group's union (a row budget decides per head); otherwise as choose_router. Files
/// passed over are reported on stderr as notes.
RouterChoice apply_router(const PolicyOptions& o, const Model& model, bool routes,
                          SessionOptions& so);

/// Put a router choice into session options: so.sekv.zoom its parameters (or none), and with
/// learned_tau the learned thresholds decide as in training (so.sekv.router.learned_tau;
/// share_group as the file's ZoomParams::share_group: each query head alone or the KV group's
/// union).
void use_router(const RouterChoice& router, SessionOptions& so);

/// The router fields of a result line: "router" (its mode, when it has one) and, with the
/// trained router, "zoom_digest" (ZoomParams::digest), "tau" (kTauLearned or kTauCalibrated:
/// how its τ was set) and with --full-rank "rank_gate" (kRankGateEnergy); with --tau-per-query
/// "tau" is kTauPerQuery for either router (without it the training-free router's τ is
/// calibrated on the question and no "tau" is written).
void put_router_fields(nlohmann::json& j, const RouterChoice& router);

} // namespace spanscope::cli
