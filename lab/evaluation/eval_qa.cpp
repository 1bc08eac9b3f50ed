#include "lab/evaluation/eval_qa.h"

#include "lab/evaluation/eval_needles.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace spanscope::eval {

namespace {

// The first (`from_end` false) or last `k` lines of `paragraph`, as a block.
std::string some_lines(const std::string& paragraph, size_t k, bool from_end) {
    std::vector<size_t> starts{0};
    for (size_t i = 0; i < paragraph.size(); ++i)
        if (paragraph[i] == '\n')
            starts.push_back(i + 1);
    k = std::min(k, starts.size());
    if (from_end)
        return paragraph.substr(starts[starts.size() - k]) + "\n\n";
    return (k == starts.size() ? paragraph : paragraph.substr(0, starts[k] - 1)) + "\n\n";
}

// The run of lines of `paragraph` (taken from its start, or its end) that brings `total`
// closest to `target`: the longest that fits, or one line more when that overshoots by less;
// "" when no line helps.
std::string fill_with_lines(const TokenCounter& counter, const std::string& paragraph,
                            bool from_end, int64_t total, int64_t target, int64_t& tokens) {
    std::string best;
    tokens = 0;
    const auto lines = static_cast<size_t>(std::count(paragraph.begin(), paragraph.end(), '\n'));
    for (size_t k = 1; k <= lines; ++k) { // fewer lines than the whole, which did not fit
        std::string block = some_lines(paragraph, k, from_end);
        const int64_t c = counter.count(block);
        const bool fits = total + c <= target;
        if (fits || total + c - target < target - total - tokens) {
            best = std::move(block);
            tokens = c;
        }
        if (!fits)
            break;
    }
    return best;
}

std::string canonical(const std::string& path) {
    std::error_code ec;
    const auto p = std::filesystem::weakly_canonical(path, ec);
    return ec ? path : p.string();
}

} // namespace

std::vector<QaQuestion> load_qa_questions(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error(path + ": the QA set cannot be read");
    std::vector<QaQuestion> out;
    try {
        const auto j = nlohmann::json::parse(in);
        for (const auto& q : j.at("questions")) {
            QaQuestion e{q.at("id").get<std::string>(), q.at("doc").get<std::string>(),
                         q.at("question").get<std::string>(),
                         q.at("answers").get<std::vector<std::string>>()};
            if (e.answers.empty())
                throw std::runtime_error("question " + e.id + " has no answers");
            if (std::filesystem::is_regular_file(e.doc))
                out.push_back(std::move(e));
        }
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
    return out;
}

std::string collapse_lower(const std::string& text) {
    std::string out;
    bool space = false;
    for (char c : text) {
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            space = !out.empty();
            continue;
        }
        if (space)
            out += ' ';
        space = false;
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
        out += c;
    }
    return out;
}

int64_t find_answer_paragraph(const std::vector<std::string>& paragraphs,
                              const std::string& answer) {
    const std::string a = collapse_lower(answer);
    for (size_t i = 0; i < paragraphs.size(); ++i)
        if (collapse_lower(paragraphs[i]).find(a) != std::string::npos)
            return static_cast<int64_t>(i);
    return -1;
}

EvalSample make_qa_sample(const TokenCounter& counter, const TaskRequest& r, const Corpus& corpus,
                          std::mt19937_64& rng) {
    if (corpus.qa_set.empty())
        throw std::runtime_error("qa: no question set (give one with --qa-set FILE)");
    const auto questions = load_qa_questions(corpus.qa_set);
    if (questions.empty())
        throw std::runtime_error("qa: no document of " + corpus.qa_set + " is present");
    const size_t n = questions.size();
    std::vector<size_t> perm(n);
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::mt19937_64 order(r.seed ^ 0x51a5c09e0d1f2b37ull);
    for (size_t i = n - 1; i > 0; --i) // Fisher-Yates
        std::swap(perm[i], perm[static_cast<size_t>(order() % (i + 1))]);
    const int64_t nn = static_cast<int64_t>(n);
    const QaQuestion& q = questions[perm[static_cast<size_t>(((r.index % nn) + nn) % nn)]];

    const auto paras = split_paragraphs(read_text_file(q.doc));
    std::vector<std::string> blocks;
    std::vector<int64_t> tokens;
    for (const auto& p : paras) {
        blocks.push_back(p + "\n\n");
        tokens.push_back(counter.cached(blocks.back()));
    }
    const int64_t a = find_answer_paragraph(paras, q.answers[0]);
    if (a < 0)
        throw std::runtime_error("qa: the answer of " + q.id + " is not in " + q.doc);
    const int64_t doc_tokens = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
    const int64_t target = r.target_length;

    // The window [lo, hi) of whole paragraphs that fit: the answer's, then before it (up to
    // its share), after it, and before again with what the end of the document left over.
    size_t lo = static_cast<size_t>(a), hi = lo + 1;
    int64_t total = tokens[lo], before = 0;
    const auto before_budget =
        static_cast<int64_t>(std::llround(r.depth * static_cast<double>(target - total)));
    while (lo > 0 && before + tokens[lo - 1] <= before_budget) {
        before += tokens[--lo];
        total += tokens[lo];
    }
    while (hi < tokens.size() && total + tokens[hi] <= target)
        total += tokens[hi++];
    while (lo > 0 && total + tokens[lo - 1] <= target)
        total += tokens[--lo];
    // A cut document ends in part of a paragraph: whole lines, after the window, then before.
    int64_t tail_tokens = 0, head_tokens = 0;
    std::string tail, head;
    if (hi < paras.size())
        tail = fill_with_lines(counter, paras[hi], false, total, target, tail_tokens);
    total += tail_tokens;
    if (lo > 0)
        head = fill_with_lines(counter, paras[lo - 1], true, total, target, head_tokens);
    total += head_tokens;

    // Padding when the whole document is shorter than the target.
    Blocks pad_before, pad_after;
    if (lo == 0 && hi == tokens.size() && total < target) {
        const std::string own = canonical(q.doc);
        const auto budget =
            static_cast<int64_t>(std::llround(r.depth * static_cast<double>(target - total)));
        pad_before = haystack_blocks(counter, corpus, r.haystack, budget, rng, own);
        pad_after = haystack_blocks(counter, corpus, r.haystack, target - total - pad_before.total,
                                    rng, own);
    }
    EvalSample s = sample_for(r);
    for (const auto& b : pad_before.text)
        s.context += b;
    s.context += head;
    int64_t answer_offset = pad_before.total + head_tokens;
    for (size_t i = lo; i < hi; ++i) {
        s.context += blocks[i];
        if (i < static_cast<size_t>(a))
            answer_offset += tokens[i];
    }
    s.context += tail;
    for (const auto& b : pad_after.text)
        s.context += b;
    const int64_t context_tokens = pad_before.total + total + pad_after.total;
    s.question = q.question;
    s.expected = q.answers;
    s.metric = "token_f1";
    s.max_tokens = 32;
    const auto frac = [&](int64_t t) {
        return static_cast<double>(t) / static_cast<double>(context_tokens);
    };
    s.meta = {{"qa_id", q.id},
              {"doc", q.doc},
              {"doc_tokens", doc_tokens},
              {"truncated", hi - lo < tokens.size()},
              {"paragraphs", {lo, hi}},
              {"doc_start_depth", frac(pad_before.total)},
              {"answer_depth", frac(answer_offset)},
              {"context_tokens", context_tokens}};
    return s;
}

} // namespace spanscope::eval
