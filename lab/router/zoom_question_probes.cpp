#include "lab/router/zoom_question_probes.h"

#include "engine/text/prompt.h"
#include "engine/text/text_input.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope {

namespace {
// `text` without the bytes of characters cut at its ends (a token boundary may fall inside a
// UTF-8 sequence when tokens are bytes): leading continuation bytes and an incomplete last
// sequence are dropped.
std::string whole_characters(std::string text) {
    size_t a = 0;
    while (a < text.size() && (static_cast<unsigned char>(text[a]) & 0xC0) == 0x80)
        ++a;
    text.erase(0, a);
    // The last lead byte and whether its sequence is complete.
    size_t lead = text.size();
    while (lead > 0 && (static_cast<unsigned char>(text[lead - 1]) & 0xC0) == 0x80)
        --lead;
    if (lead > 0) {
        const auto b = static_cast<unsigned char>(text[lead - 1]);
        const size_t need = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : 4;
        if (text.size() - (lead - 1) < need)
            text.erase(lead - 1);
    }
    return text;
}
} // namespace

std::string zoom_probe_question(const std::string& cue) {
    std::string flat;
    bool space = false;
    for (const char ch : cue) {
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v') {
            space = !flat.empty();
            continue;
        }
        if (space)
            flat += ' ';
        space = false;
        flat += ch;
    }
    return "Which words follow \"" + flat + "\" in the document?";
}

ZoomQuestionProbes fit_zoom_probes(int64_t n0, int64_t min_n, int64_t max_tokens,
                                   const std::function<ZoomQuestionProbes(int64_t)>& build,
                                   const std::function<std::string(int64_t)>& too_short,
                                   const std::string& what) {
    int64_t n = n0;
    for (int pass = 0; pass < 32; ++pass) {
        if (n < min_n)
            throw std::invalid_argument(too_short(n));
        auto p = build(n);
        const auto over = static_cast<int64_t>(p.tokens.size()) - max_tokens;
        if (over <= 0)
            return p;
        n -= over;
    }
    throw std::invalid_argument(what + " do not fit max_tokens = " + std::to_string(max_tokens));
}

ZoomQuestionProbes zoom_question_probes(const Tokenizer& tok, ChatFormat format,
                                        const std::string& name, const std::string& text,
                                        const ZoomRecordSettings& s) {
    check_zoom_record_settings(s);
    if (s.probe_form != ZoomProbeForm::Question || s.recall_probes < 1)
        throw std::invalid_argument("zoom_question_probes: the settings ask for no question probe");
    if (!is_valid_utf8(text))
        throw std::invalid_argument("the document is not valid UTF-8");
    if (!is_valid_utf8(name))
        throw std::invalid_argument("the document's name is not valid UTF-8");
    const auto header = document_unit_header(tok, format, name, 1, 1);
    const auto body = tok.encode(text, false, tok.start_after(header));
    const int64_t N = s.recall_probes, L = s.probe_tokens, c = kZoomQuestionCueTokens;

    auto build = [&](int64_t n) {
        ZoomQuestionProbes p;
        p.tokens = header;
        p.tokens.insert(p.tokens.end(), body.begin(), body.begin() + n);
        const std::string last = tok.decode(
            std::vector<int32_t>(body.begin() + std::max<int64_t>(0, n - 4), body.begin() + n));
        const bool newline = !last.empty() && last.back() == '\n';
        const auto trailer = document_unit_trailer(tok, newline);
        p.tokens.insert(p.tokens.end(), trailer.begin(), trailer.end());
        p.document_end = static_cast<int64_t>(p.tokens.size());
        const double step = static_cast<double>(n - c - L) / static_cast<double>(N);
        for (int64_t i = 0; i < N; ++i) {
            const auto j = c + static_cast<int64_t>((static_cast<double>(i) + 0.5) * step);
            const std::string cue = whole_characters(
                tok.decode(std::vector<int32_t>(body.begin() + j - c, body.begin() + j)));
            // After an answer, the next turn as the rendered prompt is tokenised.
            const auto q = i == 0
                               ? question_tokens(tok, format, zoom_probe_question(cue))
                               : follow_up_question_tokens(tok, format, zoom_probe_question(cue));
            p.tokens.insert(p.tokens.end(), q.begin(), q.end());
            p.run_starts.push_back(static_cast<int32_t>(static_cast<int64_t>(header.size()) + j));
            p.answer_starts.push_back(static_cast<int32_t>(p.tokens.size()));
            p.tokens.insert(p.tokens.end(), body.begin() + j, body.begin() + j + L);
        }
        return p;
    };

    return fit_zoom_probes(
        std::min(static_cast<int64_t>(body.size()),
                 s.max_tokens - static_cast<int64_t>(header.size())),
        c + 2 * L, s.max_tokens, build,
        [&](int64_t n) {
            return "a document of " + std::to_string(n) + " tokens (kept of " +
                   std::to_string(body.size()) + ") is too short for " + std::to_string(N) +
                   " questions answered with " + std::to_string(L) + " tokens each";
        },
        "the question probes");
}

} // namespace spanscope
