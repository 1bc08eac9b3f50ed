// The cache-policy options shared by the commands that answer (ask, bench, niah): the policy of
// the global-attention layers and SEKV's settings (DESIGN.md §3.3, §3.4).
#pragma once

#include "session.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace spanscope::cli {

struct PolicyOptions {
    std::string policy = "full"; ///< one of global_policies() (model.h)
    double budget = 0.35;        ///< sekv and the baselines: fast-tier bytes as a fraction of full
    double expand_rate = 0.2;    ///< sekv: target fraction of spans a query zooms into
    int64_t expand_rows = 0;     ///< sekv: most reconstructed rows per query and head (0: none)
    double alpha = 1.0;          ///< sekv: anchor threshold μ + α·σ
    int64_t max_span = 32;       ///< sekv: longest span (tokens)
    std::vector<int> layers;     ///< sekv: layers it serves (default: the global layers)
};

/// --policy, --budget, --expand-rate, --expand-rows, --alpha, --sekv-layers.
void add_policy_options(CLI::App& cmd, PolicyOptions& o);

/// The session options for these choices.
void apply_policy(const PolicyOptions& o, SessionOptions& so);

} // namespace spanscope::cli
