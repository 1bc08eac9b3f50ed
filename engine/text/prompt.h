// Prompts for document question answering, in the model's chat format (chat_format.h).
//
// Chat formats: one user turn holds the documents, then "Answer the question using the
// documents above.\n" and the question; the model's turn follows. In Gemma's format:
//   <bos><start_of_turn>user\n{documents}Answer the question using the documents above.\n
//   {question}<end_of_turn>\n<start_of_turn>model\n
// Formats with a system role (Llama 3, ChatML) open with a system turn holding
// kDocumentSystemText (their templates add a default system turn of their own otherwise);
// Gemma and Mistral have none (a system text joins the first user turn).
// Base model (Completion): a plain completion prompt ending in "Answer:"; generation stops at the
// end of the answer's paragraph, or where the model starts a new question or turn
// (completion_answer_done), the longest answer bounding it.
// BOS: exactly one where the vocabulary asks for it (Tokenizer::add_bos), none otherwise,
// whatever the texts contain (tests/README.md, failure mode 17): document and question text is
// tokenised as plain text, so "<bos>" or "<|im_start|>" inside a document is just text.
// Pieces: a prompt is encoded in parts (the documents' prefix, each document unit's header,
// chunks and trailer, the question), and the parts' ids concatenated equal llama.cpp's
// tokenisation of the rendered prompt (parse_special, BOS added), also with a space prefix
// (Llama 2, Mistral 7B): each part says where it starts (TextStart, tokenizer.h), and the parts
// meet where no vocabulary piece spans the cut (a line end, a control token).
// tests/unit/test_spm_space_prefix.cpp holds them to llama.cpp's ids.
#pragma once

#include "engine/text/chat_format.h"
#include "engine/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spanscope {

struct PromptDocument {
    std::string name; ///< shown to the model as the document's title (e.g. its file name)
    std::string text; ///< UTF-8
};

/// The system turn's text in the formats with a system role.
inline constexpr std::string_view kDocumentSystemText =
    "You answer questions about the documents the user gives you.";

struct Prompt {
    std::vector<int32_t> tokens; ///< BOS first where Tokenizer::add_bos() says so, exactly once
    /// tokens[0, prefix_len) depend only on the documents (tokenised separately from the
    /// question), so their K/V can be reused for another question about the same documents.
    int64_t prefix_len = 0;
    ChatFormat format = ChatFormat::Completion;
};

/// Build the question prompt in `format`: [BOS], the system turn (formats with a system role:
/// `system`, or kDocumentSystemText when empty), the user turn with every document
/// ("Document: NAME\n\n" + text + "\n\n", or "\n" after a text that ends in one; a `system`
/// text joins its start in formats without a system role) — the prefix — then the question and
/// the model's turn opener. Completion: [BOS] [system "\n\n"] documents, then
/// "Question: Q\nAnswer:". Throws std::invalid_argument on invalid UTF-8, or when the vocabulary
/// lacks a control token the format needs or BOS where add_bos asks for one.
Prompt build_question_prompt(const Tokenizer& tok, ChatFormat format,
                             const std::vector<PromptDocument>& docs, const std::string& question,
                             const std::string& system = "");

/// Tokens that open a document unit (chunking.h): [BOS where add_bos], in a chat format the
/// system turn (kDocumentSystemText, formats with a system role) and the user turn's opener
/// (<start_of_turn>user\n, <|start_header_id|>user<|end_header_id|>\n\n, <|im_start|>user\n,
/// [INST] + space), then "Document: NAME\n\n" — "Document: NAME (part K of N)\n\n" when the
/// document is split into parts > 1 sections (part is 1-based). Without BOS a unit starts with
/// the turn markup, or with "Document:" for Completion. Throws std::invalid_argument when the
/// vocabulary lacks BOS (while add_bos asks for it) or a control token of the format.
std::vector<int32_t> document_unit_header(const Tokenizer& tok, ChatFormat format,
                                          const std::string& name, int part, int parts);
/// Tokens that close a unit's text: "\n\n", or "\n" when the text already ends in a newline.
/// `start`: what the unit's text ends in (Tokenizer::start_after of its tokens; ordinary text
/// unless the vocabulary has user-defined pieces).
std::vector<int32_t> document_unit_trailer(const Tokenizer& tok, bool text_ends_in_newline,
                                           TextStart start = TextStart::Continues);
/// Gemma's change of turn: <end_of_turn>, "\n", <start_of_turn>, then `next` encoded (the next
/// turn's role line and whatever follows it in the same encoding, e.g. "user\n" or "model\n" +
/// an answer). Throws std::invalid_argument when the vocabulary lacks the turn tokens.
std::vector<int32_t> turn_break(const Tokenizer& tok, const std::string& next);
/// After an answer, the next question as the rendered prompt has it: the markup that closes the
/// model's turn and opens the next user turn (Gemma turn_break("user\n"); Llama 3
/// <|eot_id|><|start_header_id|>user<|end_header_id|>\n\n; ChatML <|im_end|>\n<|im_start|>user\n;
/// Mistral </s>[INST] + space) and question_tokens' text (instruction, question, the model's
/// turn opener) encoded as one piece, as llama.cpp tokenises the whole prompt — Mistral's
/// "[INST] " space joins the question's text; Completion "\nQuestion: Q\nAnswer:" continuing
/// the answer; Gemma as turn_break("user\n") followed by question_tokens. Throws
/// std::invalid_argument on invalid UTF-8 or a missing control token.
std::vector<int32_t> follow_up_question_tokens(const Tokenizer& tok, ChatFormat format,
                                               const std::string& question);
/// The prompt's part after the document units (it continues after their trailer): the question
/// and the answer cue.
/// Completion: "Question: Q\nAnswer:"; chat formats: "Answer the question using the documents
/// above.\nQ", the user turn's end and the model's turn opener (Gemma:
/// "...Q<end_of_turn>\n<start_of_turn>model\n"). Throws std::invalid_argument on invalid UTF-8
/// or a missing control token.
/// history: earlier (question, answer) pairs of the same chat, oldest first; they come before
/// the question in the same format ("Question: q\nAnswer: a\n" / user and model turns).
std::vector<int32_t>
question_tokens(const Tokenizer& tok, ChatFormat format, const std::string& question,
                const std::vector<std::pair<std::string, std::string>>& history = {});

/// Whether generation should stop given the answer text so far (UTF-8). Completion only (chat
/// formats end at their end-of-turn token): the answer ends at its first blank line (a line of
/// spaces, tabs or nothing) after some text, or where a line after the first starts with
/// "Question:" or a turn marker (<start_of_turn>, <|im_start|>, <|start_header_id|>, [INST]).
bool completion_answer_done(ChatFormat format, const std::string& answer_so_far);
/// How completion_answer_done decided: "end_of_paragraph" (blank line), "next_question" (a
/// question or turn marker), or "" when the answer goes on.
std::string completion_stop_reason(ChatFormat format, const std::string& answer_so_far);
/// Bytes of `answer_so_far` that are surely part of the answer, for streaming: all of it in a
/// chat format; in Completion, up to the stop, else all but a last line that may still become a
/// blank line or a stop marker (with the newline before it). Never decreases as text is appended.
size_t answer_shown_length(ChatFormat format, const std::string& answer_so_far);

/// The answer as shown: Completion's text cut where completion_answer_done stopped, then in
/// every format stripped of surrounding spaces, tabs and line ends.
std::string clean_answer(ChatFormat format, const std::string& answer);

} // namespace spanscope
