// The memory policy's settings as a user gives them — spanscope-cli's and spanscope-lab's flags,
// the desktop application's Settings — and the one place that checks them and turns them into
// the engine's session options, the SEKV router included (docs/architecture.md, Memory).
#pragma once

#include "answering/router_choice.h"
#include "engine/session/session.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace spanscope {

class Model;

/// What a user chooses of the global-attention layers' memory. Messages about a bad
/// combination name each setting by its spanscope-cli flag (in parentheses below).
///
/// The defaults are SEKV's measured configuration (docs/sekv.md, "Defaults"): sekv at a 35 %
/// fast-tier budget, right factors in Q8_0, τ per query at 1.25 % of the spans per query head,
/// two-stage routing with 4 candidates per expanded span. A default that a given setting rules
/// out gives way (with_defaults_resolved); a given one is checked.
struct PolicySettings {
    std::string policy = "sekv"; ///< --policy: one of global_policies() (model.h)
    bool policy_given = false;   ///< --policy was given (not the default)
    double budget = 0.35; ///< --budget: sekv and the baselines: fast-tier bytes, fraction of full
    double expand_rate =
        0.0125; ///< --expand-rate: sekv: fraction of spans each query head asks for
    bool expand_rate_given = false; ///< --expand-rate was given (not the default)
    int64_t expand_rows = 0; ///< --expand-rows: sekv: most rows per query and head (0: no limit)
    double alpha = 1.0;      ///< --alpha: sekv: anchor threshold μ + α·σ of the surprisal
    int64_t max_span = 32;   ///< --max-span: sekv: longest span (tokens)
    /// --rank-energy: sekv: the energy gate keeps the fewest components of a span's spectrum
    /// holding this fraction of Σσ² (SpanRankOptions::energy; (0, 1])
    double rank_energy = 0.999;
    /// --factors: sekv: how the right factors are held, "q8_0" (Q8_0 where the head dimension
    /// allows, else f16) or "f16" (span_factors.h)
    std::string factors = "q8_0";
    std::vector<int> layers; ///< --sekv-layers: the layers served (default: sekv_layers(), model.h)
    /// --router: kRouterTrained, kRouterTrainingFree, kRouterOracle (evaluations' upper bound,
    /// with tau_per_query), or "" (trained when a parameter file for the model is found, else
    /// training-free).
    std::string router;
    std::string router_params_file; ///< --zoom-params: the trained router's file ("": searched)
    bool learned_tau = false;       ///< --learned-tau: trained router: its learned thresholds
    /// --tau-per-query (--tau-on-question: false): τ calibrated on each query's relevances
    bool tau_per_query = true;
    bool tau_per_query_given = false; ///< --tau-per-query or --tau-on-question was given
    bool full_rank = false;           ///< --full-rank: trained router: the energy gate's rank
    /// --rerank: two-stage routing's candidates per expanded span (SekvRouterOptions::rerank;
    /// 0: off, else 2 to kMaxRerank).
    int rerank = 4;
    bool rerank_given = false; ///< --rerank was given (not the default)
};

/// `s` with the defaults that its given settings rule out given way, on `backend` (a backend
/// name, engine/model/backend.h): τ per query (a default) yields to --learned-tau and
/// --expand-rows, which decide on the question; two-stage routing (a default) yields where it
/// does not apply (τ on the question, the cuda backend) and to the oracle router. Given settings
/// are kept as given (policy_setup checks them).
PolicySettings with_defaults_resolved(PolicySettings s, std::string_view backend);

/// Whether two-stage routing applies: under sekv with τ per query (the router refuses it
/// without), on the CPU (the GPU memory refuses it, engine/cuda/cuda_sekv_memory.h). `backend` is a
/// backend name (engine/model/backend.h).
bool two_stage_routing_applies(std::string_view policy, bool tau_per_query,
                               std::string_view backend);

/// Session options for one set of settings, with the router they chose.
struct PolicySetup {
    SessionOptions options; ///< threads, the policy, SEKV's settings and router; n_ctx 0
    RouterChoice router;    ///< its mode is "" when nothing routes
};

/// Receives, for the user, each parameter file the router search passed over and why
/// (RouterChoice::notes), before the settings are checked.
using NoteSink = std::function<void(const std::string&)>;

/// Why the default policy (sekv, not given) gives way to full for `model` and the LinearKV
/// `selector` that joins the documents ("" or "none": no selector): a selector that
/// recomputes rows of full, or a model without a layer SEKV serves. "" when sekv serves, or
/// when the policy was given (a given sekv is kept, and refused where it cannot serve).
std::string full_memory_reason(const PolicySettings& settings, const Model& model,
                               std::string_view selector = "none");

/// Check `settings` and turn them into session options for `model` with `threads` threads
/// (<= 0: all cores); a SEKV run routes, any other refuses the router settings. Where
/// full_memory_reason(settings, model, selector) is not empty the run is full: the note says
/// why and names the SEKV settings given that it leaves out (they are not refused). Throws
/// std::invalid_argument for router settings without a SEKV run, --learned-tau or --full-rank
/// with the training-free router or the oracle, the oracle without --tau-per-query, --rerank 1,
/// --rerank without --tau-per-query, with the oracle or on the cuda backend, --tau-per-query with
/// --expand-rows or
/// --learned-tau, --expand-rate with --learned-tau, and --learned-tau with --expand-rows for a
/// file trained with the KV group's union; otherwise as choose_router (RouterParamsError for an
/// unusable parameter file).
PolicySetup policy_setup(const PolicySettings& settings, const Model& model, int threads,
                         const NoteSink& on_note = {}, std::string_view selector = "none");
/// As policy_setup, for runs of several policies (an evaluation's): `routes` says whether a
/// SEKV run is among them; the settings' own policy does not decide it.
PolicySetup policy_setup_for_runs(const PolicySettings& settings, const Model& model, int threads,
                                  bool routes, const NoteSink& on_note = {});

} // namespace spanscope
