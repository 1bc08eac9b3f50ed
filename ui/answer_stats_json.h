// An answer's statistics as the project saves them with its message (project_answer.h
// answer_stats_json and ask_project's additions), read back into AnswerStats: one reader for
// the answer that just finished and for the answers of a chat loaded from the project.
#pragma once

#include "ui/gui_types.h"

#include <nlohmann/json.hpp>

namespace spanscope::gui {

/// The fields of `stats` that AnswerStats shows (ms, tokens, tokens/s, bytes as stored); a
/// missing or mistyped field stays at its default (0 or empty). Never throws.
AnswerStats answer_stats_from_json(const nlohmann::json& stats);

} // namespace spanscope::gui
