#include "lab/router/zoom_fact_probes.h"

#include "engine/text/prompt.h"
#include "engine/text/text_input.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace spanscope {

namespace {
const char* const kFirstNames[] = {"Agnes", "Bruno", "Clara", "Dmitri", "Elena", "Farid",
                                   "Greta", "Hugo",  "Ines",  "Jonas",  "Kiri",  "Lars",
                                   "Mona",  "Nils",  "Olga",  "Pavel",  "Quinn", "Rosa",
                                   "Soren", "Tomas", "Ulla",  "Viktor", "Wanda", "Yusuf"};
const char* const kSurnames[] = {"Abbott", "Brennan", "Castillo", "Dalton", "Eriksen",  "Fischer",
                                 "Gallo",  "Horvath", "Ivanova",  "Jensen", "Kowalski", "Lindqvist",
                                 "Moreau", "Novak",   "Okafor",   "Petrov", "Quist",    "Romero",
                                 "Sato",   "Tanaka",  "Urban",    "Varga",  "Weber",    "Zeller"};
const char* const kKinds[] = {"locker", "badge",   "permit", "invoice",
                              "parcel", "account", "ticket", "membership"};
constexpr int kFirst = sizeof(kFirstNames) / sizeof(kFirstNames[0]);
constexpr int kLast = sizeof(kSurnames) / sizeof(kSurnames[0]);
constexpr int kKind = sizeof(kKinds) / sizeof(kKinds[0]);

// Tokens searched after a fact's depth for a line end to insert it after.
constexpr int64_t kLineSearch = 64;

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (const char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return h;
}
} // namespace

std::vector<ZoomFact> zoom_facts(std::mt19937_64& rng, int n) {
    if (n < 0 || n > kFirst * kLast * kKind)
        throw std::invalid_argument("zoom_facts: " + std::to_string(n) + " facts asked, 0 to " +
                                    std::to_string(kFirst * kLast * kKind) + " possible");
    std::vector<ZoomFact> out;
    std::vector<int64_t> keys;
    while (static_cast<int>(out.size()) < n) {
        const auto key = static_cast<int64_t>(rng() % (kFirst * kLast * kKind));
        if (std::find(keys.begin(), keys.end(), key) != keys.end())
            continue;
        keys.push_back(key);
        const std::string kind = kKinds[key % kKind];
        const std::string person =
            std::string(kFirstNames[key / kKind % kFirst]) + " " + kSurnames[key / kKind / kFirst];
        ZoomFact f;
        f.value = std::to_string(100000 + rng() % 900000);
        const std::string what = kind + " number of " + person;
        f.statement = "Note: the " + what + " is " + f.value + ".";
        f.question = "What is the " + what + "?";
        f.answer = "The " + what + " is " + f.value + ".";
        out.push_back(std::move(f));
    }
    return out;
}

ZoomQuestionProbes zoom_fact_probes(const Tokenizer& tok, ChatFormat format,
                                    const std::string& name, const std::string& text,
                                    const ZoomRecordSettings& s) {
    check_zoom_record_settings(s);
    if (s.probe_form != ZoomProbeForm::Fact || s.recall_probes < 1)
        throw std::invalid_argument("zoom_fact_probes: the settings ask for no fact probe");
    if (!is_valid_utf8(text))
        throw std::invalid_argument("the document is not valid UTF-8");
    if (!is_valid_utf8(name))
        throw std::invalid_argument("the document's name is not valid UTF-8");
    const int64_t N = s.recall_probes;
    std::mt19937_64 rng(fnv1a(name));
    const auto facts = zoom_facts(rng, static_cast<int>(N));
    std::vector<size_t> order(facts.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);

    const auto header = document_unit_header(tok, format, name, 1, 1);
    const auto body = tok.encode(text, false, tok.start_after(header));
    std::vector<std::vector<int32_t>> after_line, inline_fact, answers;
    for (const auto& f : facts) {
        // Inside the text and after the question's cue: text that continues text.
        after_line.push_back(tok.encode(f.statement + "\n", false, TextStart::Continues));
        inline_fact.push_back(tok.encode("\n" + f.statement + "\n", false, TextStart::Continues));
        // The answer as the text after the model's turn opener (Mistral: after "[/INST]").
        answers.push_back(
            tok.encode(f.answer, false, tok.start_after(question_tokens(tok, format, f.question))));
        if (static_cast<int64_t>(answers.back().size()) > s.probe_tokens)
            throw std::invalid_argument(
                "a fact's answer takes " + std::to_string(answers.back().size()) +
                " tokens, more than probe_tokens = " + std::to_string(s.probe_tokens));
    }
    auto ends_line = [&](int64_t j) { // body[j - 1] ends a line
        const std::string t = tok.decode(std::vector<int32_t>{body[static_cast<size_t>(j - 1)]});
        return !t.empty() && t.back() == '\n';
    };

    auto build = [&](int64_t n) {
        ZoomQuestionProbes p;
        p.tokens = header;
        std::vector<int32_t> fact_start(facts.size());
        int64_t from = 0;
        for (size_t i = 0; i < facts.size(); ++i) {
            const auto depth = std::max<int64_t>(
                from, static_cast<int64_t>((static_cast<double>(i) + 0.5) * static_cast<double>(n) /
                                           static_cast<double>(N)));
            int64_t at = depth;
            while (at < n && at < depth + kLineSearch && !(at > 0 && ends_line(at)))
                ++at;
            const bool line = at < n && at < depth + kLineSearch;
            if (!line)
                at = depth;
            p.tokens.insert(p.tokens.end(), body.begin() + from, body.begin() + at);
            fact_start[i] = static_cast<int32_t>(p.tokens.size());
            const auto& f = line ? after_line[i] : inline_fact[i];
            p.tokens.insert(p.tokens.end(), f.begin(), f.end());
            from = at;
        }
        p.tokens.insert(p.tokens.end(), body.begin() + from, body.begin() + n);
        const std::string last = tok.decode(
            std::vector<int32_t>(body.begin() + std::max<int64_t>(0, n - 4), body.begin() + n));
        const auto trailer = document_unit_trailer(tok, !last.empty() && last.back() == '\n');
        p.tokens.insert(p.tokens.end(), trailer.begin(), trailer.end());
        p.document_end = static_cast<int64_t>(p.tokens.size());
        for (size_t k = 0; k < order.size(); ++k) {
            const size_t i = order[k];
            // After an answer, the next turn as the rendered prompt is tokenised.
            const auto q = k == 0 ? question_tokens(tok, format, facts[i].question)
                                  : follow_up_question_tokens(tok, format, facts[i].question);
            p.tokens.insert(p.tokens.end(), q.begin(), q.end());
            p.run_starts.push_back(fact_start[i]);
            p.answer_starts.push_back(static_cast<int32_t>(p.tokens.size()));
            p.tokens.insert(p.tokens.end(), answers[i].begin(), answers[i].end());
        }
        return p;
    };

    return fit_zoom_probes(
        std::min(static_cast<int64_t>(body.size()),
                 s.max_tokens - static_cast<int64_t>(header.size())),
        2 * N, s.max_tokens, build,
        [&](int64_t n) {
            return "a document of " + std::to_string(n) + " tokens (kept of " +
                   std::to_string(body.size()) + ") is too short for " + std::to_string(N) +
                   " facts";
        },
        "the fact probes");
}

} // namespace spanscope
