#include "lab/evaluation/eval_needles.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace spanscope::eval {

namespace {
const char* const kAdjectives[] = {"blue",  "silent", "northern", "copper",  "hidden",
                                   "amber", "frozen", "velvet",   "eastern", "crimson"};
const char* const kNouns[] = {"archive", "lighthouse", "orchard",  "observatory", "harbour",
                              "library", "garden",     "workshop", "tower",       "cellar"};

// Paragraphs skipped because they would overshoot before a haystack ends: enough to find short
// ones (titles, "END OF TERMS AND CONDITIONS") that fill the end in the licence texts.
constexpr int kMaxSkipped = 64;
} // namespace

Blocks haystack_blocks(const TokenCounter& counter, const Corpus& corpus,
                       const std::string& haystack, int64_t budget, std::mt19937_64& rng,
                       const std::string& exclude_source) {
    const std::string& sep = haystack_separator(haystack);
    Blocks out;
    if (haystack == "noise") {
        const std::string block = noise_sentence() + sep;
        const int64_t c = counter.cached(block);
        while (brings_closer(out.total, c, budget)) {
            out.text.push_back(block);
            out.tokens.push_back(c);
            out.total += c;
        }
        return out;
    }
    const auto& paras = corpus.prose;
    const bool any = std::any_of(paras.begin(), paras.end(),
                                 [&](const Paragraph& p) { return p.source != exclude_source; });
    if (!any)
        throw std::runtime_error("no prose paragraphs to build a haystack from");
    // Paragraphs that fit are taken in order; one that would overshoot is skipped (and kept
    // aside) until kMaxSkipped were; then the kept one that brings the sum closest, if any.
    size_t p = static_cast<size_t>(rng() % paras.size());
    std::vector<std::pair<std::string, int64_t>> skipped;
    while (static_cast<int>(skipped.size()) < kMaxSkipped) {
        if (paras[p].source != exclude_source) {
            std::string block = paras[p].text + sep;
            const int64_t c = counter.cached(block);
            if (out.total + c <= budget) {
                out.text.push_back(std::move(block));
                out.tokens.push_back(c);
                out.total += c;
            } else {
                skipped.emplace_back(std::move(block), c);
            }
        }
        p = (p + 1) % paras.size();
    }
    const auto best =
        std::min_element(skipped.begin(), skipped.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best != skipped.end() && brings_closer(out.total, best->second, budget)) {
        out.text.push_back(std::move(best->first));
        out.tokens.push_back(best->second);
        out.total += best->second;
    }
    return out;
}

Placement place_needles(const TokenCounter& counter, const Corpus& corpus,
                        const std::string& haystack, int64_t target_length,
                        const std::vector<Needle>& needles, std::mt19937_64& rng) {
    const std::string& sep = haystack_separator(haystack);
    std::vector<std::string> needle_text;
    std::vector<int64_t> needle_tokens;
    int64_t n_needle = 0;
    for (const auto& n : needles) {
        needle_text.push_back(n.text + sep);
        needle_tokens.push_back(counter.count(needle_text.back()));
        n_needle += needle_tokens.back();
    }
    const Blocks hay = haystack_blocks(counter, corpus, haystack, target_length - n_needle, rng);
    const int64_t total = hay.total + n_needle;

    // cum[k]: tokens of the blocks before boundary k.
    std::vector<int64_t> cum(hay.text.size() + 1, 0);
    for (size_t k = 0; k < hay.text.size(); ++k)
        cum[k + 1] = cum[k] + hay.tokens[k];
    std::vector<size_t> order(needles.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return needles[a].depth < needles[b].depth; });
    std::vector<size_t> boundary(needles.size(), 0);
    Placement out;
    out.offsets.assign(needles.size(), 0);
    out.depths.assign(needles.size(), 0);
    size_t prev = 0;
    int64_t inserted = 0;
    for (const size_t j : order) {
        const double want = needles[j].depth * static_cast<double>(total);
        size_t best = prev;
        for (size_t k = prev; k < cum.size(); ++k)
            if (std::abs(static_cast<double>(cum[k] + inserted) - want) <
                std::abs(static_cast<double>(cum[best] + inserted) - want))
                best = k;
        boundary[j] = best;
        out.offsets[j] = cum[best] + inserted;
        out.depths[j] =
            total > 0 ? static_cast<double>(out.offsets[j]) / static_cast<double>(total) : 0;
        inserted += needle_tokens[j];
        prev = best;
    }
    out.chars.assign(needles.size(), 0);
    for (size_t k = 0; k <= hay.text.size(); ++k) {
        for (const size_t j : order)
            if (boundary[j] == k) {
                out.chars[j] = static_cast<int64_t>(out.context.size());
                out.context += needle_text[j];
            }
        if (k < hay.text.size())
            out.context += hay.text[k];
    }
    out.tokens = total;
    return out;
}

double uniform01(std::mt19937_64& rng) {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

std::vector<std::string> random_numbers(std::mt19937_64& rng, int n) {
    std::vector<std::string> out;
    while (static_cast<int>(out.size()) < n) {
        std::string v = std::to_string(10000 + rng() % 90000);
        if (std::find(out.begin(), out.end(), v) == out.end())
            out.push_back(std::move(v));
    }
    return out;
}

std::string random_uuid(std::mt19937_64& rng) {
    static const char* const kHex = "0123456789abcdef";
    const uint64_t hi = rng(), lo = rng();
    std::string digits;
    for (int i = 15; i >= 0; --i)
        digits += kHex[(hi >> (4 * i)) & 15];
    for (int i = 15; i >= 0; --i)
        digits += kHex[(lo >> (4 * i)) & 15];
    digits[12] = '4';                        // version 4
    digits[16] = kHex[8 + ((lo >> 62) & 3)]; // variant 10xx: 8, 9, a or b
    return digits.substr(0, 8) + "-" + digits.substr(8, 4) + "-" + digits.substr(12, 4) + "-" +
           digits.substr(16, 4) + "-" + digits.substr(20, 12);
}

std::vector<std::string> random_keys(std::mt19937_64& rng, int n) {
    constexpr int kCombinations = static_cast<int>(std::size(kAdjectives) * std::size(kNouns));
    if (n > kCombinations)
        throw std::invalid_argument("at most " + std::to_string(kCombinations) + " keys");
    std::vector<std::string> out;
    while (static_cast<int>(out.size()) < n) {
        std::string key = std::string(kAdjectives[rng() % std::size(kAdjectives)]) + " " +
                          kNouns[rng() % std::size(kNouns)];
        if (std::find(out.begin(), out.end(), key) == out.end())
            out.push_back(std::move(key));
    }
    return out;
}

std::vector<std::string> random_variable_names(std::mt19937_64& rng, int n) {
    std::vector<std::string> out;
    while (static_cast<int>(out.size()) < n) {
        std::string name;
        for (int i = 0; i < 5; ++i)
            name += static_cast<char>('A' + rng() % 26);
        if (std::find(out.begin(), out.end(), name) == out.end())
            out.push_back(std::move(name));
    }
    return out;
}

std::string secret_code_needle(const std::string& key, const std::string& value) {
    return "The secret code for the " + key + " is " + value + ".";
}

} // namespace spanscope::eval
