// The memory-policy flags shared by the commands that answer (ask, bench, niah, eval): the
// policy of the global-attention layers and SEKV's settings (docs/architecture.md, Memory), its
// router included. What they mean and which combinations hold is answering/policy_settings.h's.
#pragma once

#include "answering/policy_settings.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace spanscope::cli {

/// --policy, --budget, --expand-rate, --expand-rows, --alpha, --max-span, --sekv-layers,
/// --router, --zoom-params, --learned-tau, --tau-per-query, --full-rank, --rerank.
void add_policy_options(CLI::App& cmd, PolicySettings& o);

/// --backend: where the forward pass runs, cpu or cuda (backend.h).
void add_backend_option(CLI::App& cmd, std::string& backend);

/// Print a note about the settings to stderr ("note: …"; policy_setup's on_note).
void print_note(const std::string& note);

/// The router fields of a result line: "router" (its mode, when it has one) and, with the
/// trained router, "zoom_digest" (RouterParams::digest), "tau" (kTauLearned or kTauCalibrated:
/// how its τ was set) and with --full-rank "rank_gate" (kRankGateEnergy); with --tau-per-query
/// "tau" is kTauPerQuery for either router (without it the training-free router's τ is
/// calibrated on the question and no "tau" is written).
void put_router_fields(nlohmann::json& j, const RouterChoice& router);

} // namespace spanscope::cli
