// Prompts for document question answering.
//
// Instruction-tuned Gemma: the turn format of the Gemma chat template
//   <bos><start_of_turn>user\n{documents}\n\n{question}<end_of_turn>\n<start_of_turn>model\n
// (Gemma has no system role; a system text joins the first user turn.)
// Base model: a plain completion prompt ending in "Answer:"; generation stops at the end of the
// answer's first line (base models otherwise continue with the next question).
// Exactly one BOS, whatever the texts contain (tests/README.md, failure mode 17): document and
// question text is tokenised as plain text, so "<bos>" inside a document is just text.
#pragma once

#include "engine/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spanscope {

struct PromptDocument {
    std::string name; ///< shown to the model as the document's title (e.g. its file name)
    std::string text; ///< UTF-8
};

enum class PromptStyle { Completion, GemmaChat };

struct Prompt {
    std::vector<int32_t> tokens; ///< starts with exactly one BOS
    /// tokens[0, prefix_len) depend only on the documents (tokenised separately from the
    /// question), so their K/V can be reused for another question about the same documents.
    int64_t prefix_len = 0;
    PromptStyle style = PromptStyle::Completion;
};

/// Build the question prompt. Throws std::invalid_argument on invalid UTF-8.
Prompt build_question_prompt(const Tokenizer& tok, bool instruction_tuned,
                             const std::vector<PromptDocument>& docs, const std::string& question,
                             const std::string& system = "");

/// Tokens that open a document unit (chunking.h): BOS, in the turn format <start_of_turn> and
/// "user\n", then "Document: NAME\n\n" — "Document: NAME (part K of N)\n\n" when the document
/// is split into parts > 1 sections (part is 1-based). Throws std::invalid_argument when the
/// vocabulary lacks BOS or the turn tokens.
std::vector<int32_t> document_unit_header(const Tokenizer& tok, bool instruction_tuned,
                                          const std::string& name, int part, int parts);
/// Tokens that close a unit's text: "\n\n", or "\n" when the text already ends in a newline.
std::vector<int32_t> document_unit_trailer(const Tokenizer& tok, bool text_ends_in_newline);
/// The turn format's change of turn: <end_of_turn>, "\n", <start_of_turn>, then `next` encoded
/// (the next turn's role line and whatever follows it in the same encoding, e.g. "user\n" or
/// "model\n" + an answer). Throws std::invalid_argument when the vocabulary lacks the turn
/// tokens.
std::vector<int32_t> turn_break(const Tokenizer& tok, const std::string& next);
/// The prompt's part after the document units: the question and the answer cue.
/// Completion: "Question: Q\nAnswer:"; turn format: "Answer the question using the documents
/// above.\nQ<end_of_turn>\n<start_of_turn>model\n". Throws std::invalid_argument on invalid
/// UTF-8.
/// history: earlier (question, answer) pairs of the same chat, oldest first; they come before
/// the question in the same format ("Question: q\nAnswer: a\n" / user and model turns).
std::vector<int32_t>
question_tokens(const Tokenizer& tok, bool instruction_tuned, const std::string& question,
                const std::vector<std::pair<std::string, std::string>>& history = {});

/// Whether generation should stop given the answer text so far (base-model completion stops at
/// the end of the first non-empty line).
bool completion_answer_done(PromptStyle style, const std::string& answer_so_far);

/// Strip what the stop rule left around the answer (trailing newline, surrounding spaces).
std::string clean_answer(const std::string& answer);

} // namespace spanscope
