// How an evaluation's result line (JSON Lines, spanscope-lab eval) records the router's
// settings, and how the report reads them back: the "settings" string of a line and its "tau"
// and "rank_gate" fields (answering/router_choice.h names their values).
#pragma once

#include "answering/router_choice.h"

#include <string>

namespace spanscope {

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

} // namespace spanscope
