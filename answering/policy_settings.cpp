#include "answering/policy_settings.h"

#include "engine/model/model.h"
#include "storage/model_fingerprint.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

bool two_stage_routing_applies(std::string_view policy, bool tau_per_query,
                               std::string_view backend) {
    return policy == "sekv" && tau_per_query && backend != "cuda";
}

namespace {

/// The router's checks (see policy_setup) for the choice `c` made for `s` on `backend`.
void check_router(const PolicySettings& s, const RouterChoice& c, std::string_view backend) {
    if (c.mode == kRouterOracle && !s.tau_per_query)
        throw std::invalid_argument("--router oracle expands, per query head, as many spans as "
                                    "--tau-per-query asks for: give --tau-per-query");
    if (c.mode == kRouterOracle && (s.learned_tau || s.full_rank))
        throw std::invalid_argument(std::string(s.learned_tau ? "--learned-tau" : "--full-rank") +
                                    " is the trained router's: not with --router oracle");
    if (s.learned_tau && !c.params)
        throw std::invalid_argument(
            s.router.empty()
                ? "--learned-tau: no parameter file for the model was found, so the router is "
                  "training-free and has no learned thresholds; give --zoom-params FILE"
                : "--learned-tau: the training-free router has no learned thresholds (its τ is "
                  "calibrated to --expand-rate)");
    if (s.learned_tau && s.expand_rate_given)
        throw std::invalid_argument("--expand-rate calibrates τ; with --learned-tau the trained "
                                    "router (" +
                                    c.path + ") decides with its learned thresholds");
    if (s.full_rank && !c.params)
        throw std::invalid_argument(
            s.router.empty()
                ? "--full-rank: no parameter file for the model was found, so the router is "
                  "training-free and keeps every span's factors at the energy gate's rank "
                  "already; give --zoom-params FILE"
                : "--full-rank: the training-free router keeps every span's factors at the "
                  "energy gate's rank already; it applies to the trained router");
    if (s.rerank == 1)
        throw std::invalid_argument("--rerank 1 would take as candidates only the spans it "
                                    "expands: give 0 (off) or at least 2");
    if (s.rerank > 0 && !s.tau_per_query)
        throw std::invalid_argument("--rerank takes each query head's candidates by τ per "
                                    "query: give --tau-per-query");
    if (s.rerank > 0 && c.mode == kRouterOracle)
        throw std::invalid_argument("--rerank: the oracle router scores every span's keys "
                                    "already: drop --rerank or choose another --router");
    // The run checked here is a sekv one, whatever the settings' own policy (an evaluation keeps
    // its list of policies apart and asks with policy_setup_for_runs).
    if (s.rerank > 0 && !two_stage_routing_applies("sekv", s.tau_per_query, backend))
        throw std::invalid_argument("--rerank: two-stage routing reads the candidates' key "
                                    "factors on the host; use the cpu backend");
    if (s.tau_per_query && s.expand_rows > 0)
        throw std::invalid_argument("--tau-per-query calibrates τ at each query; --expand-rows "
                                    "caps the rows of each query head instead: give one of them");
    if (s.learned_tau && s.tau_per_query)
        throw std::invalid_argument("--tau-per-query calibrates τ at each query; with "
                                    "--learned-tau the trained router decides with its learned "
                                    "thresholds");
    if (s.learned_tau && s.expand_rows > 0 && c.params && c.params->share_group)
        throw std::invalid_argument("--learned-tau: " + c.path +
                                    " was trained with the KV group's union (zoom-train "
                                    "--share-group), and a row budget (--expand-rows) decides "
                                    "each query head alone: give one of them");
}

} // namespace

PolicySettings with_defaults_resolved(PolicySettings s, std::string_view backend) {
    if (!s.tau_per_query_given && (s.learned_tau || s.expand_rows > 0))
        s.tau_per_query = false;
    if (!s.rerank_given &&
        (!two_stage_routing_applies("sekv", s.tau_per_query, backend) || s.router == kRouterOracle))
        s.rerank = 0;
    return s;
}

namespace {

/// `s` as a full-memory run: the SEKV settings it carried, defaults or given, are dropped; the
/// given ones are named in `dropped` (by their spanscope-cli flags).
PolicySettings as_full_run(PolicySettings s, std::vector<std::string>& dropped) {
    const PolicySettings d;
    if (!s.router.empty())
        dropped.push_back("--router");
    if (!s.router_params_file.empty())
        dropped.push_back("--zoom-params");
    if (s.learned_tau)
        dropped.push_back("--learned-tau");
    if (s.tau_per_query_given)
        dropped.push_back(s.tau_per_query ? "--tau-per-query" : "--tau-on-question");
    if (s.full_rank)
        dropped.push_back("--full-rank");
    if (s.rerank_given)
        dropped.push_back("--rerank");
    if (s.expand_rate_given)
        dropped.push_back("--expand-rate");
    s.policy = "full";
    s.router.clear();
    s.router_params_file.clear();
    s.learned_tau = s.full_rank = false;
    s.tau_per_query = s.tau_per_query_given = false;
    s.rerank = 0;
    s.rerank_given = false;
    s.expand_rate = d.expand_rate;
    s.expand_rate_given = false;
    return s;
}

} // namespace

std::string full_memory_reason(const PolicySettings& s, const Model& model,
                               std::string_view selector) {
    if (s.policy_given || s.policy != "sekv")
        return {};
    if (!selector.empty() && selector != "none")
        return "the " + std::string(selector) +
               " selector recomputes rows of the full policy (SEKV joins documents without "
               "recompute: the selector none keeps it)";
    if (s.layers.empty() && sekv_layers(model.info(), SekvOptions{}).empty())
        return "the model has no layer SEKV serves (a global attention layer with full-head "
               "RoPE)";
    return {};
}

PolicySetup policy_setup(const PolicySettings& settings, const Model& model, int threads,
                         const NoteSink& on_note, std::string_view selector) {
    // The default policy is sekv where it can serve the answer; where it cannot (a model
    // without a layer for it, a selector that recomputes rows of full), the answer uses full
    // and SEKV's settings are left out rather than refused. Only here: an evaluation names its
    // policies itself (policy_setup_for_runs).
    const std::string reason = full_memory_reason(settings, model, selector);
    if (!reason.empty()) {
        std::vector<std::string> dropped;
        const PolicySettings full = as_full_run(settings, dropped);
        if (on_note) {
            std::string note = reason + ": answering with full memory";
            for (size_t i = 0; i < dropped.size(); ++i)
                note += (i == 0 ? " (not used: " : ", ") + dropped[i];
            on_note(dropped.empty() ? note : note + ")");
        }
        return policy_setup_for_runs(full, model, threads, false, on_note);
    }
    return policy_setup_for_runs(settings, model, threads, settings.policy == "sekv", on_note);
}

PolicySetup policy_setup_for_runs(const PolicySettings& given, const Model& model, int threads,
                                  bool routes, const NoteSink& on_note) {
    const PolicySettings s = with_defaults_resolved(given, model.backend());
    PolicySetup out;
    auto& so = out.options;
    so.threads = threads;
    so.global_policy = s.policy;
    so.sekv.budget = s.budget;
    so.sekv.router.expand_rate = s.expand_rate;
    so.sekv.router.budget_rows = s.expand_rows;
    so.sekv.router.tau_per_query = s.tau_per_query;
    so.sekv.router.rerank = s.rerank;
    so.sekv.trained_rank_gate = !s.full_rank;
    so.sekv.segmentation.alpha = s.alpha;
    so.sekv.segmentation.max_span = s.max_span;
    so.sekv.rank.energy = s.rank_energy;
    if (s.factors != "q8_0" && s.factors != "f16")
        throw std::invalid_argument("--factors must be q8_0 or f16, not " + s.factors);
    so.sekv.rank.right_type = s.factors == "f16" ? TensorType::F16 : TensorType::Q8_0;
    so.sekv.layers = s.layers;
    so.eviction.budget = s.budget;
    if (!routes) {
        // The routing defaults are sekv's; only what was given is refused.
        if (!s.router.empty() || !s.router_params_file.empty() || s.learned_tau ||
            (s.tau_per_query_given && s.tau_per_query) || s.full_rank ||
            (s.rerank_given && s.rerank != 0))
            throw std::invalid_argument("--router, --zoom-params, --learned-tau, "
                                        "--tau-per-query, --full-rank and --rerank apply to the "
                                        "sekv policy: add --policy sekv");
        so.sekv.router.tau_per_query = false;
        so.sekv.router.rerank = 0;
        return out;
    }
    auto c = choose_router(s.router, s.router_params_file, model.path(),
                           fingerprint_hex(model_fingerprint(model)));
    if (on_note)
        for (const auto& n : c.notes)
            on_note(n);
    check_router(s, c, model.backend());
    c.learned_tau = s.learned_tau;
    c.tau_per_query = s.tau_per_query;
    c.full_rank = s.full_rank;
    so.sekv.router_params = c.params;
    so.sekv.router.learned_tau = c.params && c.learned_tau;
    so.sekv.router.oracle = c.mode == kRouterOracle;
    if (so.sekv.router.learned_tau) // as trained: each query head alone or the group's union
        so.sekv.router.share_group = c.params->share_group;
    out.router = std::move(c);
    return out;
}

} // namespace spanscope
