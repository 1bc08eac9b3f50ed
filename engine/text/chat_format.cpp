#include "engine/text/chat_format.h"

#include "engine/model/model.h"

#include <string>

namespace spanscope {

namespace {

// Template texts from the public templates named in chat_format.h.
constexpr ChatMarkup kCompletion{};
constexpr ChatMarkup kGemma{"",
                            "",
                            "<start_of_turn>user\n",
                            "<end_of_turn>\n",
                            "<start_of_turn>model\n",
                            "<end_of_turn>\n",
                            {"<start_of_turn>", "<end_of_turn>", "", ""},
                            {"", ""}};
constexpr ChatMarkup kLlama3{"<|start_header_id|>system<|end_header_id|>\n\n",
                             "<|eot_id|>",
                             "<|start_header_id|>user<|end_header_id|>\n\n",
                             "<|eot_id|>",
                             "<|start_header_id|>assistant<|end_header_id|>\n\n",
                             "<|eot_id|>",
                             {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", ""},
                             {"", ""}};
constexpr ChatMarkup kChatML{"<|im_start|>system\n",
                             "<|im_end|>\n",
                             "<|im_start|>user\n",
                             "<|im_end|>\n",
                             "<|im_start|>assistant\n",
                             "<|im_end|>\n",
                             {"<|im_start|>", "<|im_end|>", "", ""},
                             {"", ""}};
constexpr ChatMarkup kMistral{
    "", "", "[INST] ", " [/INST]", "", "</s>", {"</s>", "", "", ""}, {"[INST]", "[/INST]"}};

// The markers that name a template's family, in the order they are tried.
struct Marker {
    std::string_view text;
    ChatFormat format;
};
constexpr Marker kMarkers[] = {{"<start_of_turn>", ChatFormat::Gemma},
                               {"<|start_header_id|>", ChatFormat::Llama3},
                               {"<|im_start|>", ChatFormat::ChatML},
                               {"[INST]", ChatFormat::Mistral}};

// What a template that is none of ours looks like: its special-looking markers ("<|…|>",
// "<…>" without spaces), else its first characters.
std::string describe_template(const std::string& t) {
    std::string found;
    int n = 0;
    for (size_t i = t.find('<'); i != std::string::npos && n < 4; i = t.find('<', i + 1)) {
        const size_t e = t.find('>', i);
        if (e == std::string::npos || e - i > 40)
            continue;
        const std::string m = t.substr(i, e - i + 1);
        if (m.find_first_of(" \n'\"{}%") != std::string::npos || m.size() < 3 ||
            found.find(m) != std::string::npos)
            continue;
        found += (n++ ? ", " : "") + m;
    }
    if (!found.empty())
        return "markers " + found;
    std::string head = t.substr(0, 60);
    for (char& c : head)
        if (c == '\n')
            c = ' ';
    return "a template starting \"" + head + (t.size() > 60 ? "…" : "") + "\"";
}

} // namespace

const char* chat_format_name(ChatFormat format) {
    switch (format) {
    case ChatFormat::Completion:
        return "completion";
    case ChatFormat::Gemma:
        return "gemma";
    case ChatFormat::Llama3:
        return "llama3";
    case ChatFormat::ChatML:
        return "chatml";
    case ChatFormat::Mistral:
        return "mistral";
    }
    return "?";
}

const ChatMarkup& chat_markup(ChatFormat format) {
    switch (format) {
    case ChatFormat::Gemma:
        return kGemma;
    case ChatFormat::Llama3:
        return kLlama3;
    case ChatFormat::ChatML:
        return kChatML;
    case ChatFormat::Mistral:
        return kMistral;
    case ChatFormat::Completion:
        break;
    }
    return kCompletion;
}

ChatFormat chat_format_of(const ModelInfo& info, const Tokenizer& tok) {
    if (tok.add_bos() && tok.bos() < 0)
        throw ModelError("the vocabulary asks for a BOS token (tokenizer.ggml.add_bos_token) "
                         "but has none");
    if (!info.instruction_tuned)
        return ChatFormat::Completion;
    ChatFormat format = ChatFormat::Completion;
    bool found = false;
    for (const auto& m : kMarkers)
        if (info.chat_template.find(m.text) != std::string::npos) {
            format = m.format;
            found = true;
            break;
        }
    if (!found && info.chat_template.empty() && info.architecture == "gemma3") {
        format = ChatFormat::Gemma;
        found = true;
    }
    if (!found) {
        if (info.chat_template.empty())
            throw ModelError("the " + info.architecture +
                             " model is instruction-tuned but its file has no chat template "
                             "(tokenizer.chat_template) to say how its turns are marked");
        throw ModelError("the model's chat template (" + info.architecture + ", " +
                         describe_template(info.chat_template) +
                         ") is none of the formats Spanscope supports: Gemma (<start_of_turn>), "
                         "Llama 3 (<|start_header_id|>), ChatML (<|im_start|>), Mistral "
                         "([INST])");
    }
    for (const auto piece : chat_markup(format).tokens)
        if (!piece.empty() && tok.find(piece) < 0)
            throw ModelError(std::string("the chat template is in the ") +
                             chat_format_name(format) + " format but the vocabulary lacks " +
                             std::string(piece));
    return format;
}

} // namespace spanscope
