#include "lab/evaluation/eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace spanscope::eval {

namespace {

std::string lower(const std::string& s) {
    std::string out = s;
    for (char& c : out)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return out;
}

bool contains_ci(const std::string& lower_answer, const std::string& needle) {
    return lower_answer.find(lower(needle)) != std::string::npos;
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Python's string.punctuation, which SQuAD's normalize_answer removes.
bool is_punctuation(char c) {
    static const std::string kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    return kPunctuation.find(c) != std::string::npos;
}

// SQuAD v1.1 normalize_answer, then split(): lower, remove punctuation, remove articles,
// collapse whitespace. The article regex \b(a|an|the)\b is applied as "drop whole tokens equal
// to an article": after punctuation is removed the only non-word characters left are spaces
// (and non-ASCII symbols, where the two can differ; our answers are ASCII).
std::vector<std::string> squad_tokens(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    auto flush = [&] {
        if (!cur.empty() && cur != "a" && cur != "an" && cur != "the")
            out.push_back(cur);
        cur.clear();
    };
    for (const char c : lower(s)) {
        if (is_punctuation(c))
            continue;
        if (is_space(c))
            flush();
        else
            cur += c;
    }
    flush();
    return out;
}

double f1_one(const std::vector<std::string>& pred, const std::vector<std::string>& truth) {
    std::map<std::string, int64_t> counts;
    for (const auto& t : truth)
        ++counts[t];
    int64_t same = 0;
    for (const auto& p : pred) {
        auto it = counts.find(p);
        if (it != counts.end() && it->second > 0) {
            --it->second;
            ++same;
        }
    }
    if (same == 0)
        return 0;
    const double precision = static_cast<double>(same) / static_cast<double>(pred.size());
    const double recall = static_cast<double>(same) / static_cast<double>(truth.size());
    return 2 * precision * recall / (precision + recall);
}

} // namespace

double string_match_all(const std::string& answer, const std::vector<std::string>& expected) {
    if (expected.empty())
        return 0;
    const std::string a = lower(answer);
    int64_t hits = 0;
    for (const auto& e : expected)
        hits += contains_ci(a, e);
    return static_cast<double>(hits) / static_cast<double>(expected.size());
}

double string_match_part(const std::string& answer, const std::vector<std::string>& expected) {
    const std::string a = lower(answer);
    for (const auto& e : expected)
        if (contains_ci(a, e))
            return 1;
    return 0;
}

double token_f1(const std::string& answer, const std::vector<std::string>& references) {
    const auto pred = squad_tokens(answer);
    double best = 0;
    for (const auto& r : references)
        best = std::max(best, f1_one(pred, squad_tokens(r)));
    return best;
}

double score(const std::string& metric, const std::string& answer,
             const std::vector<std::string>& expected) {
    if (metric == "string_match_all")
        return string_match_all(answer, expected);
    if (metric == "string_match_part")
        return string_match_part(answer, expected);
    if (metric == "token_f1")
        return token_f1(answer, expected);
    throw std::invalid_argument("unknown metric '" + metric +
                                "' (string_match_all, string_match_part, token_f1)");
}

Interval wilson_interval(double successes, int64_t n, double z) {
    if (n <= 0)
        return {0, 1};
    const double nn = static_cast<double>(n);
    const double p = std::clamp(successes, 0.0, nn) / nn;
    const double z2 = z * z;
    const double denom = 1 + z2 / nn;
    const double center = (p + z2 / (2 * nn)) / denom;
    const double half = z / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

Interval mean_interval(const std::vector<double>& scores, double z) {
    const int64_t n = static_cast<int64_t>(scores.size());
    double sum = 0;
    bool binary = true;
    for (const double s : scores) {
        sum += s;
        binary = binary && (s == 0 || s == 1);
    }
    if (binary)
        return wilson_interval(sum, n, z);
    if (n < 2)
        return {0, 1};
    const double mean = sum / static_cast<double>(n);
    double ss = 0;
    for (const double s : scores)
        ss += (s - mean) * (s - mean);
    const double half = z * std::sqrt(ss / static_cast<double>(n - 1) / static_cast<double>(n));
    return {std::clamp(mean - half, 0.0, 1.0), std::clamp(mean + half, 0.0, 1.0)};
}

Interval mean_interval_unbounded(const std::vector<double>& values, double z) {
    const auto n = static_cast<int64_t>(values.size());
    if (n == 0)
        return {0, 0};
    double sum = 0;
    for (const double v : values)
        sum += v;
    const double mean = sum / static_cast<double>(n);
    if (n < 2)
        return {mean, mean};
    double ss = 0;
    for (const double v : values)
        ss += (v - mean) * (v - mean);
    const double half = z * std::sqrt(ss / static_cast<double>(n - 1) / static_cast<double>(n));
    return {mean - half, mean + half};
}

} // namespace spanscope::eval
