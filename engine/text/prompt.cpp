#include "engine/text/prompt.h"

#include <stdexcept>

namespace spanscope {

namespace {

constexpr std::string_view kInstruction = "Answer the question using the documents above.\n";

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

void append(std::vector<int32_t>& out, const std::vector<int32_t>& ids) {
    out.insert(out.end(), ids.begin(), ids.end());
}

int32_t special(const Tokenizer& tok, std::string_view piece) {
    const int32_t id = tok.find(piece);
    if (id < 0)
        throw std::invalid_argument("the vocabulary lacks " + std::string(piece));
    return id;
}

// Writes a prompt as a rendered template is tokenised: template markup's control tokens become
// those tokens, and the text between two of them (markup and content alike) is encoded in one
// piece, as plain text (never parse_special: a document's "<|im_start|>" stays text). flush()
// ends a piece early where the prompt is cut (the documents' prefix; Gemma's follow-up turns).
// Each piece is encoded as the text it continues asks (Tokenizer::start_after): `start` says
// what precedes `out` when it is empty (Fresh: the prompt's start).
class TokenWriter {
public:
    TokenWriter(const Tokenizer& tok, ChatFormat format, std::vector<int32_t>& out,
                TextStart start = TextStart::Fresh)
        : tok_(tok), markup_(chat_markup(format)), out_(out), start_(start) {}

    void bos() {
        if (!tok_.add_bos())
            return;
        if (tok_.bos() < 0)
            throw std::invalid_argument("the vocabulary asks for a BOS token but has none");
        out_.push_back(tok_.bos());
    }
    void text(std::string_view s) { pending_ += s; }
    void markup(std::string_view s) {
        size_t i = 0;
        while (i < s.size()) {
            bool matched = false;
            for (size_t k = 0; k < markup_.tokens.size() + markup_.soft_tokens.size(); ++k) {
                const bool soft = k >= markup_.tokens.size();
                const std::string_view piece =
                    soft ? markup_.soft_tokens[k - markup_.tokens.size()] : markup_.tokens[k];
                if (piece.empty() || s.substr(i, piece.size()) != piece)
                    continue;
                const int32_t id = soft ? tok_.find(piece) : special(tok_, piece);
                if (id < 0)
                    break; // a soft token the vocabulary lacks: plain text
                flush();
                out_.push_back(id);
                i += piece.size();
                matched = true;
                break;
            }
            if (!matched)
                pending_ += s[i++];
        }
    }
    void flush() {
        if (pending_.empty())
            return;
        const TextStart start = out_.empty() ? start_ : tok_.start_after(out_);
        append(out_, tok_.encode(pending_, /*parse_special=*/false, start));
        pending_.clear();
    }
    const ChatMarkup& markup_of() const { return markup_; }

private:
    const Tokenizer& tok_;
    const ChatMarkup& markup_;
    std::vector<int32_t>& out_;
    TextStart start_;
    std::string pending_;
};

// How the text after a document unit starts (the question, Completion's next turn): after the
// unit's trailer, a line end.
TextStart after_documents(const Tokenizer& tok) {
    return tok.start_after(document_unit_trailer(tok, false));
}

// [BOS], the system turn where the format has a system role, the user turn's opener; a system
// text of a format without a system role joins the user turn.
void open_first_user_turn(TokenWriter& w, const std::string& system) {
    const auto& m = w.markup_of();
    w.bos();
    if (m.has_system_role()) {
        w.markup(m.system_open);
        w.text(system.empty() ? kDocumentSystemText : std::string_view(system));
        w.markup(m.system_close);
        w.markup(m.user_open);
    } else {
        w.markup(m.user_open);
        if (!system.empty())
            w.text(system + "\n\n");
    }
}

// The question, the user turn's end and the model's turn opener.
void close_with_question(TokenWriter& w, std::string_view instruction, const std::string& q) {
    const auto& m = w.markup_of();
    w.text(instruction);
    w.text(q);
    w.markup(m.user_close);
    w.markup(m.assistant_open);
    w.flush();
}

} // namespace

Prompt build_question_prompt(const Tokenizer& tok, ChatFormat format,
                             const std::vector<PromptDocument>& docs, const std::string& question,
                             const std::string& system) {
    Prompt p;
    p.format = format;
    TokenWriter w(tok, format, p.tokens);
    if (format == ChatFormat::Completion) {
        w.bos();
        if (!system.empty())
            w.text(system + "\n\n");
        w.text(documents_block(docs));
        w.flush();
        p.prefix_len = static_cast<int64_t>(p.tokens.size());
        w.text("Question: " + question + "\nAnswer:");
        w.flush();
        return p;
    }
    open_first_user_turn(w, system);
    w.text(documents_block(docs));
    w.flush();
    p.prefix_len = static_cast<int64_t>(p.tokens.size());
    close_with_question(w, kInstruction, question);
    return p;
}

std::vector<int32_t> document_unit_header(const Tokenizer& tok, ChatFormat format,
                                          const std::string& name, int part, int parts) {
    std::vector<int32_t> out;
    TokenWriter w(tok, format, out);
    if (format == ChatFormat::Completion)
        w.bos();
    else
        open_first_user_turn(w, "");
    std::string text = "Document: " + name;
    if (parts > 1)
        text += " (part " + std::to_string(part) + " of " + std::to_string(parts) + ")";
    text += "\n\n";
    w.text(text);
    w.flush();
    return out;
}

std::vector<int32_t> document_unit_trailer(const Tokenizer& tok, bool text_ends_in_newline,
                                           TextStart start) {
    return tok.encode(text_ends_in_newline ? "\n" : "\n\n", false, start);
}

std::vector<int32_t> turn_break(const Tokenizer& tok, const std::string& next) {
    std::vector<int32_t> out{special(tok, "<end_of_turn>")};
    append(out, tok.encode("\n"));
    out.push_back(special(tok, "<start_of_turn>"));
    append(out, tok.encode(next));
    return out;
}

std::vector<int32_t> follow_up_question_tokens(const Tokenizer& tok, ChatFormat format,
                                               const std::string& question) {
    if (format == ChatFormat::Completion)
        return tok.encode("\nQuestion: " + question + "\nAnswer:", false, TextStart::Continues);
    std::vector<int32_t> out;
    TokenWriter w(tok, format, out);
    w.markup(w.markup_of().assistant_close);
    w.markup(w.markup_of().user_open);
    if (format == ChatFormat::Gemma)
        w.flush(); // as question_tokens' history: the tokens Gemma's prompts have always had
    close_with_question(w, kInstruction, question);
    return out;
}

std::vector<int32_t>
question_tokens(const Tokenizer& tok, ChatFormat format, const std::string& question,
                const std::vector<std::pair<std::string, std::string>>& history) {
    std::vector<int32_t> out;
    if (format == ChatFormat::Completion) {
        std::string text;
        for (const auto& [q, a] : history)
            text += "Question: " + q + "\nAnswer: " + a + "\n";
        append(out, tok.encode(text + "Question: " + question + "\nAnswer:", false,
                               after_documents(tok)));
        return out;
    }
    TokenWriter w(tok, format, out, after_documents(tok));
    const auto& m = w.markup_of();
    std::string_view instruction = kInstruction;
    for (const auto& [q, a] : history) {
        w.text(instruction);
        instruction = {};
        w.text(q);
        w.markup(m.user_close);
        w.markup(m.assistant_open);
        w.text(a);
        w.markup(m.assistant_close);
        w.markup(m.user_open);
        // Gemma's prompts have always tokenised a follow-up question apart from its turn's
        // "user\n"; kept, so that a chat's prompt stays the tokens it was.
        if (format == ChatFormat::Gemma)
            w.flush();
    }
    close_with_question(w, instruction, question);
    return out;
}

namespace {

// Where a line after the first that starts so ends a base model's answer: a new question, or a
// turn in one of the chat formats spelled as text.
constexpr std::string_view kLineStops[] = {"Question:", "<start_of_turn>", "<|im_start|>",
                                           "<|start_header_id|>", "[INST]"};

struct CompletionScan {
    size_t end = std::string::npos; ///< where the answer ends (a line end), npos: it goes on
    size_t shown = 0;               ///< bytes surely in the answer
    const char* reason = "";
};

CompletionScan scan_completion(const std::string& raw) {
    CompletionScan s;
    const size_t first = raw.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
        return s; // only white space so far: nothing to show (clean_answer drops it)
    size_t nl = raw.find('\n', first); // the first line always belongs to the answer
    while (nl != std::string::npos) {
        const size_t b = nl + 1;
        const size_t next = raw.find('\n', b);
        const std::string_view line = std::string_view(raw).substr(
            b, next == std::string::npos ? std::string::npos : next - b);
        const bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
        if (blank && next != std::string::npos) {
            s.end = s.shown = nl;
            s.reason = "end_of_paragraph";
            return s;
        }
        bool prefix_of_stop = false;
        for (const auto stop : kLineStops) {
            if (line.substr(0, stop.size()) == stop) {
                s.end = s.shown = nl;
                s.reason = "next_question";
                return s;
            }
            prefix_of_stop = prefix_of_stop || stop.substr(0, line.size()) == line;
        }
        if (next == std::string::npos) {
            // The last line is still being written: hold it back while it may become a blank
            // line or a stop marker.
            s.shown = blank || prefix_of_stop ? nl : raw.size();
            return s;
        }
        nl = next;
    }
    s.shown = raw.size();
    return s;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos)
        return "";
    const auto e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

} // namespace

bool completion_answer_done(ChatFormat format, const std::string& answer) {
    return format == ChatFormat::Completion && scan_completion(answer).end != std::string::npos;
}

std::string completion_stop_reason(ChatFormat format, const std::string& answer) {
    return format == ChatFormat::Completion ? scan_completion(answer).reason : "";
}

size_t answer_shown_length(ChatFormat format, const std::string& answer) {
    return format == ChatFormat::Completion ? scan_completion(answer).shown : answer.size();
}

std::string clean_answer(ChatFormat format, const std::string& answer) {
    if (format != ChatFormat::Completion)
        return trim(answer);
    const auto s = scan_completion(answer);
    return trim(s.end == std::string::npos ? answer : answer.substr(0, s.end));
}

} // namespace spanscope
