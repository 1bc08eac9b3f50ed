#include "engine/text/prompt.h"

#include <stdexcept>

namespace spanscope {

namespace {
std::string documents_block(const std::vector<PromptDocument>& docs) {
    std::string s;
    for (const auto& d : docs) {
        s += "Document: " + d.name + "\n\n";
        s += d.text;
        if (s.empty() || s.back() != '\n')
            s += "\n";
        s += "\n";
    }
    return s;
}
} // namespace

Prompt build_question_prompt(const Tokenizer& tok, bool instruction_tuned,
                             const std::vector<PromptDocument>& docs, const std::string& question,
                             const std::string& system) {
    Prompt p;
    if (tok.bos() < 0)
        throw std::invalid_argument("the model has no BOS token");
    p.tokens.push_back(tok.bos());
    auto append_text = [&](const std::string& text) {
        auto ids = tok.encode(text, /*parse_special=*/false);
        p.tokens.insert(p.tokens.end(), ids.begin(), ids.end());
    };
    auto append_special = [&](const char* piece) {
        const int32_t id = tok.find(piece);
        if (id < 0)
            throw std::invalid_argument(std::string("the vocabulary lacks ") + piece);
        p.tokens.push_back(id);
    };
    if (instruction_tuned) {
        p.style = PromptStyle::GemmaChat;
        append_special("<start_of_turn>");
        std::string user = "user\n";
        if (!system.empty())
            user += system + "\n\n";
        user += documents_block(docs);
        append_text(user);
        p.prefix_len = static_cast<int64_t>(p.tokens.size());
        append_text("Answer the question using the documents above.\n" + question);
        const auto cue = turn_break(tok, "model\n");
        p.tokens.insert(p.tokens.end(), cue.begin(), cue.end());
    } else {
        p.style = PromptStyle::Completion;
        std::string text;
        if (!system.empty())
            text += system + "\n\n";
        text += documents_block(docs);
        append_text(text);
        p.prefix_len = static_cast<int64_t>(p.tokens.size());
        append_text("Question: " + question + "\nAnswer:");
    }
    return p;
}

namespace {
int32_t special(const Tokenizer& tok, const char* piece) {
    const int32_t id = tok.find(piece);
    if (id < 0)
        throw std::invalid_argument(std::string("the vocabulary lacks ") + piece);
    return id;
}
void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids) {
    out.insert(out.end(), ids.begin(), ids.end());
}
} // namespace

std::vector<int32_t> document_unit_header(const Tokenizer& tok, bool instruction_tuned,
                                          const std::string& name, int part, int parts) {
    if (tok.bos() < 0)
        throw std::invalid_argument("the model has no BOS token");
    std::vector<int32_t> out{tok.bos()};
    std::string text;
    if (instruction_tuned) {
        out.push_back(special(tok, "<start_of_turn>"));
        text = "user\n";
    }
    text += "Document: " + name;
    if (parts > 1)
        text += " (part " + std::to_string(part) + " of " + std::to_string(parts) + ")";
    text += "\n\n";
    append(out, tok.encode(text));
    return out;
}

std::vector<int32_t> document_unit_trailer(const Tokenizer& tok, bool text_ends_in_newline) {
    return tok.encode(text_ends_in_newline ? "\n" : "\n\n");
}

std::vector<int32_t> turn_break(const Tokenizer& tok, const std::string& next) {
    std::vector<int32_t> out{special(tok, "<end_of_turn>")};
    append(out, tok.encode("\n"));
    out.push_back(special(tok, "<start_of_turn>"));
    append(out, tok.encode(next));
    return out;
}

std::vector<int32_t>
question_tokens(const Tokenizer& tok, bool instruction_tuned, const std::string& question,
                const std::vector<std::pair<std::string, std::string>>& history) {
    std::vector<int32_t> out;
    if (instruction_tuned) {
        std::string first = "Answer the question using the documents above.\n";
        for (const auto& [q, a] : history) {
            append(out, tok.encode(first + q));
            first.clear();
            append(out, turn_break(tok, "model\n" + a));
            append(out, turn_break(tok, "user\n"));
        }
        append(out, tok.encode(first + question));
        append(out, turn_break(tok, "model\n"));
    } else {
        std::string text;
        for (const auto& [q, a] : history)
            text += "Question: " + q + "\nAnswer: " + a + "\n";
        append(out, tok.encode(text + "Question: " + question + "\nAnswer:"));
    }
    return out;
}

bool completion_answer_done(PromptStyle style, const std::string& answer) {
    if (style != PromptStyle::Completion)
        return false;
    const auto first = answer.find_first_not_of(" \t\n");
    if (first == std::string::npos)
        return false;
    return answer.find('\n', first) != std::string::npos;
}

std::string clean_answer(const std::string& answer) {
    const auto b = answer.find_first_not_of(" \t\r\n");
    if (b == std::string::npos)
        return "";
    const auto e = answer.find_last_not_of(" \t\r\n");
    return answer.substr(b, e - b + 1);
}

} // namespace spanscope
