// Prompts for document question answering.
//
// Instruction-tuned Gemma: the turn format of the Gemma chat template
//   <bos><start_of_turn>user\n{documents}\n\n{question}<end_of_turn>\n<start_of_turn>model\n
// (Gemma has no system role; a system text joins the first user turn.)
// Base model: a plain completion prompt ending in "Answer:"; generation stops at the end of the
// answer's first line (base models otherwise continue with the next question).
// Exactly one BOS, whatever the texts contain (KNOWN-FAILURES 17): document and question text
// is tokenised as plain text, so "<bos>" inside a document is just text.
#pragma once

#include "tokenizer.h"

#include <cstdint>
#include <string>
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

/// Whether generation should stop given the answer text so far (base-model completion stops at
/// the end of the first non-empty line).
bool completion_answer_done(PromptStyle style, const std::string& answer_so_far);

/// Strip what the stop rule left around the answer (trailing newline, surrounding spaces).
std::string clean_answer(const std::string& answer);

} // namespace spanscope
