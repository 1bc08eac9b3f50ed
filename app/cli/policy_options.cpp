#include "app/cli/policy_options.h"

#include "app/cli/finite_check.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"

#include <charconv>
#include <iostream>

namespace spanscope::cli {

void add_backend_option(CLI::App& cmd, std::string& backend) {
    cmd.add_option("--backend", backend,
                   "Where the forward pass runs: cpu, or cuda (an NVIDIA GPU; the build must "
                   "have found the CUDA toolkit)")
        ->check(CLI::IsMember(backend_names()))
        ->capture_default_str();
}

void add_policy_options(CLI::App& cmd, PolicySettings& o) {
    cmd.add_option("--policy", o.policy,
                   "Memory policy of the global-attention layers: full (every token's keys and "
                   "values), sekv (spans at two resolutions, zoomed into per query), or a "
                   "baseline within the same budget: chunk_summary (sekv's spans as summary "
                   "rows, never expanded), snapkv, h2o, streaming (rows evicted for good)")
        ->check(CLI::IsMember(global_policies()))
        ->each([&o](const std::string&) { o.policy_given = true; })
        ->capture_default_str();
    cmd.add_option("--budget", o.budget,
                   "sekv and the baselines: fast-tier bytes of the documents as a fraction of "
                   "what full holds for the same layers")
        ->check(finite_number())
        ->check(CLI::Range(0.01, 1.0))
        ->capture_default_str();
    cmd.add_option("--expand-rate", o.expand_rate,
                   "sekv: fraction of spans each query head asks for (τ calibrated to it at each "
                   "query, or on the question with --tau-on-question, with either router unless "
                   "--learned-tau); the heads sharing a KV head expand the union of their "
                   "choices")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 1.0))
        ->each([&o](const std::string&) { o.expand_rate_given = true; })
        ->capture_default_str();
    cmd.add_option("--expand-rows", o.expand_rows,
                   "sekv: most rows a query and head reconstruct (0 = no limit)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
        ->capture_default_str();
    cmd.add_option("--alpha", o.alpha,
                   "sekv: anchors are tokens with surprisal above mean + "
                   "alpha * standard deviation")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 10.0))
        ->capture_default_str();
    cmd.add_option("--max-span", o.max_span, "sekv: longest span in tokens (longer runs are split)")
        ->check(CLI::Range(int64_t{7}, int64_t{4096}))
        ->capture_default_str();
    cmd.add_option("--rank-energy", o.rank_energy,
                   "sekv: each span's factors keep the fewest components holding this fraction "
                   "of its squared singular values (the energy gate; the trained rank gate "
                   "replaces it)")
        ->check(finite_number())
        ->check(CLI::Range(0.5, 1.0))
        ->capture_default_str();
    cmd.add_option("--factors", o.factors,
                   "sekv: how the host tier holds the right factors of each span: q8_0 (8-bit "
                   "blocks with a scale each 32 values, where the head dimension is a multiple of "
                   "32) or f16")
        ->check(CLI::IsMember({"q8_0", "f16"}))
        ->capture_default_str();
    cmd.add_option(
           "--sekv-layers", o.layers,
           "sekv and the baselines: the layers they serve (default: every global-attention layer; "
           "the later half of the layers where all are global, as in the Llama family)")
        ->delimiter(',');
    cmd.add_option("--router", o.router,
                   "sekv: the router, trained (W, thresholds and rank gates learned for the "
                   "model, from a parameter file) or training-free (thresholds calibrated to "
                   "--expand-rate); default: trained when a parameter file for the model is "
                   "installed, else training-free. oracle (a measurement for evaluations: it "
                   "answers, but reads every span at every query and so saves no work; with "
                   "--tau-per-query, cpu backend): each query head expands the spans of most "
                   "attention mass, scored against the keys rebuilt from every span's factors")
        ->check(CLI::IsMember({std::string(kRouterTrained), std::string(kRouterTrainingFree),
                               std::string(kRouterOracle)}));
    cmd.add_option("--zoom-params", o.router_params_file,
                   "sekv: the trained router's parameter file (default: <model name>.zoom.gguf "
                   "in the installed data, see README); it must be trained for the model")
        ->check(CLI::ExistingFile);
    cmd.add_flag("--learned-tau", o.learned_tau,
                 "sekv, trained router: decide with the thresholds learned in training instead "
                 "of calibrating τ to --expand-rate on the question (each query head alone, or "
                 "the KV group's union when trained with zoom-train --share-group)");
    cmd.add_flag("--tau-per-query,!--tau-on-question", o.tau_per_query,
                 "sekv: calibrate τ on each query's own relevances (every query head asks for "
                 "--expand-rate of the spans at each token; the default, but with --learned-tau "
                 "or --expand-rows), or with --tau-on-question once on the question's queries")
        ->each([&o](const std::string&) { o.tau_per_query_given = true; });
    cmd.add_flag("--full-rank", o.full_rank,
                 "sekv, trained router: keep each span's factors at the energy gate's rank, as "
                 "the training-free router does (every stored component at the default "
                 "energy), instead of the rank the trained gate chooses (the router alone)");
    cmd.add_option("--rerank", o.rerank,
                   "sekv, with --tau-per-query, either router (not the oracle), cpu backend: "
                   "two-stage routing (the default, where it applies). Each query head takes as "
                   "candidates the spans its router "
                   "ranks in the top N times its --expand-rate, scores them against the keys "
                   "rebuilt from their key factors, and expands as many of them, of the most "
                   "attention, as --expand-rate asks for (it reads about N times the key "
                   "factors of the spans it expands). N: 0 (off) or 2 to " +
                       std::to_string(kMaxRerank))
        ->check([](const std::string& v) -> std::string {
            int n = 0;
            const auto* end = v.data() + v.size();
            const auto [at, ec] = std::from_chars(v.data(), end, n);
            if (ec != std::errc() || at != end)
                return "'" + v + "' is not a whole number: give 0 (off) or 2 to " +
                       std::to_string(kMaxRerank);
            if (n < 0 || n > kMaxRerank)
                return std::to_string(n) + " is out of range: give 0 (off) or 2 to " +
                       std::to_string(kMaxRerank);
            return {};
        })
        ->each([&o](const std::string&) { o.rerank_given = true; })
        ->capture_default_str();
}

void print_note(const std::string& note) {
    std::cerr << "note: " << note << "\n";
}

void put_router_fields(nlohmann::json& j, const RouterChoice& router) {
    if (!router.mode.empty())
        j["router"] = router.mode;
    if (!router.mode.empty() && router.tau_per_query)
        j["tau"] = kTauPerQuery;
    else if (router.params)
        j["tau"] = router.learned_tau ? kTauLearned : kTauCalibrated;
    if (router.params) {
        j["zoom_digest"] = router.params->digest();
        if (router.full_rank)
            j["rank_gate"] = kRankGateEnergy;
    }
}

} // namespace spanscope::cli
