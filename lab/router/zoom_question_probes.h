// Question probes for SEKV's zoom recordings (issue 8): a document recorded in the form the
// evaluation asks about it, with questions after it whose answers are runs of the document.
// The copy probes (zoom_recall_probes, zoom_recorder.h) give queries that read a passage again;
// these give the queries of a question asked after the document, as `eval` and `ask` ask it:
// the document in its unit (document_unit_header, the text, document_unit_trailer; prompt.h),
// then question turns (question_tokens), each answered, teacher forced, with the run of the
// document its question points at.
#pragma once

#include "engine/text/chat_format.h"
#include "engine/text/tokenizer.h"
#include "lab/router/zoom_recorder.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spanscope {

/// Tokens of the document quoted in a question: the cue before the run its answer copies.
constexpr int32_t kZoomQuestionCueTokens = 12;

/// The question asked for a run: "Which words follow \"CUE\" in the document?", CUE the
/// cue's text with its white space runs made single spaces and trimmed (quotes inside it are
/// left as they are; a cue of white space only gives two quotes with nothing between).
std::string zoom_probe_question(const std::string& cue);

/// A document with its question probes, as recorded.
struct ZoomQuestionProbes {
    std::vector<int32_t> tokens;        ///< [≤ max_tokens]: the unit, then the question turns
    int64_t document_end = 0;           ///< tokens[0, document_end): the document's unit
    std::vector<int32_t> run_starts;    ///< [recall_probes]: each answered run (or fact) begins
    std::vector<int32_t> answer_starts; ///< [recall_probes]: first position of each answer
};

/// The probes of the longest beginning of a text that fit max_tokens: build(n) for n = `n0`
/// tokens of the text, then n cut by what the whole is over max_tokens (the probes' lengths may
/// move with n, so a few passes, at most 32). Throws std::invalid_argument with too_short(n)
/// when n falls below min_n, or saying that `what` do not fit after 32 passes.
ZoomQuestionProbes fit_zoom_probes(int64_t n0, int64_t min_n, int64_t max_tokens,
                                   const std::function<ZoomQuestionProbes(int64_t)>& build,
                                   const std::function<std::string(int64_t)>& too_short,
                                   const std::string& what);

/// The tokens recorded for a document with question probes (settings.probe_form = Question,
/// recall_probes = N ≥ 1 questions, probe_tokens = L tokens per answer):
///   document_unit_header(name, part 1 of 1) · text (cut) · document_unit_trailer,
///   then for i = 0..N−1: [the end of the previous answer's turn: "<end_of_turn>\n
///   <start_of_turn>user\n" in the turn format, "\n" in completion] ·
///   question_tokens(zoom_probe_question(cue_i)) · run_i,
/// where run_i is the L tokens of the text starting at c + ⌊(i + ½) · (n − c − L) / N⌋ (n: the
/// text's tokens kept, c = kZoomQuestionCueTokens; evenly spaced depths, in order) and cue_i is
/// the decoded c tokens before it (characters cut by the tokens at its ends dropped). Every
/// turn is a question_tokens of its own, so each repeats the instruction `ask` puts in the first
/// turn only. The text is cut (its end) until the whole fits max_tokens.
/// Throws std::invalid_argument for settings out of range, settings without question probes,
/// invalid UTF-8 in the text or the name, a vocabulary without the turn tokens of `format`
/// (chat_format.h), a text too short for the questions (fewer than c + 2 · L tokens kept),
/// or questions that do not fit max_tokens however the text is cut.
ZoomQuestionProbes zoom_question_probes(const Tokenizer& tok, ChatFormat format,
                                        const std::string& name, const std::string& text,
                                        const ZoomRecordSettings& settings);

} // namespace spanscope
