// The chat format of a model: how its prompts mark turns, decided once from the model file
// (tokenizer.chat_template, the architecture, the vocabulary) and carried to every prompt
// (prompt.h), document unit (chunking.h) and answer (engine/session/session.h).
//
// Formats and the public templates they follow (tests/reference/make_chat_fixtures.py renders
// each with jinja2; tests/unit/test_chat_format.cpp compares our prompts with it):
//   Completion  base models: no template, a plain completion prompt ("Question: …\nAnswer:").
//   Gemma       <start_of_turn>user\n … <end_of_turn>\n<start_of_turn>model\n (Gemma 3's
//               template; no system role: a system text joins the first user turn).
//   Llama3      <|start_header_id|>ROLE<|end_header_id|>\n\n … <|eot_id|> (Meta-Llama-3-8B-
//               Instruct's template).
//   ChatML      <|im_start|>ROLE\n … <|im_end|>\n (Qwen 2 / 2.5 / 3, SmolLM2).
//   Mistral     [INST] … [/INST]ANSWER</s> (Mistral-7B-Instruct-v0.2's template; no system
//               role). [INST] and [/INST] are control tokens in newer vocabularies and plain
//               text in older ones; both are served.
#pragma once

#include "engine/text/tokenizer.h"

#include <array>
#include <string_view>

namespace spanscope {

struct ModelInfo;

enum class ChatFormat { Completion, Gemma, Llama3, ChatML, Mistral };

/// Lower-case name of a format ("completion", "gemma", "llama3", "chatml", "mistral"), as
/// messages and the model fingerprint's chunking key spell it.
const char* chat_format_name(ChatFormat format);

/// The template text around each role's turn. Every string is template text: the control
/// tokens it spells (`tokens`, and `soft_tokens` where the vocabulary has them) become those
/// tokens, the rest is encoded as text together with the turn's content (as a rendered template
/// is tokenised whole). Completion's markup is all empty.
struct ChatMarkup {
    std::string_view system_open, system_close; ///< both empty: no system role
    std::string_view user_open, user_close;
    std::string_view assistant_open, assistant_close;
    std::array<std::string_view, 4> tokens;      ///< required control tokens ("" unused)
    std::array<std::string_view, 2> soft_tokens; ///< tokens if the vocabulary has them, else text
    bool has_system_role() const { return !system_open.empty(); }
};

/// The markup of `format` (a static table: the reference is valid for the program's life).
const ChatMarkup& chat_markup(ChatFormat format);

/// The format of a model's prompts. Not instruction-tuned (info.instruction_tuned false: no
/// tokenizer.chat_template, and no name hint of an architecture that knows one): Completion.
/// Otherwise by the markers of info.chat_template, first match: "<start_of_turn>" Gemma,
/// "<|start_header_id|>" Llama3, "<|im_start|>" ChatML, "[INST]" Mistral; an instruction-tuned
/// model without a template (gemma3 names an "-it" model so) takes its architecture's format
/// (gemma3: Gemma). Throws ModelError naming what was found when the template is none of these
/// (its architecture and the special-looking markers of the template, or its first characters),
/// or when the vocabulary lacks a control token the format needs (named), or lacks BOS while
/// tokenizer.ggml.add_bos_token asks for it.
ChatFormat chat_format_of(const ModelInfo& info, const Tokenizer& tok);

} // namespace spanscope
