// Scores of one model answer against the expected strings, and confidence intervals of a mean
// score. Every score is a fraction in [0, 1] (not a percentage).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope::eval {

/// RULER's `string_match_all` (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
/// Long-Context Language Models?", §3, and `string_match_all` in their scripts/eval/synthetic/
/// constants.py): the fraction of `expected` strings that occur in `answer` as substrings,
/// case-insensitive (ASCII case folding). 0 when `expected` is empty.
double string_match_all(const std::string& answer, const std::vector<std::string>& expected);

/// RULER's `string_match_part` (same source; used for their QA tasks): 1 if any of `expected`
/// occurs in `answer` (case-insensitive), else 0.
double string_match_part(const std::string& answer, const std::vector<std::string>& expected);

/// SQuAD v1.1's token F1 (Rajpurkar et al. 2016; `f1_score` and `normalize_answer` in the
/// official evaluate-v1.1.py): both strings are lower-cased, ASCII punctuation is removed, the
/// articles a/an/the are dropped and whitespace is collapsed; F1 of the two bags of tokens;
/// the maximum over `references`. 0 when the answer or every reference normalises to nothing
/// (as in v1.1, where no common token gives 0) and when `references` is empty.
double token_f1(const std::string& answer, const std::vector<std::string>& references);

/// The metric named `metric` ("string_match_all", "string_match_part" or "token_f1").
/// Throws std::invalid_argument for any other name.
double score(const std::string& metric, const std::string& answer,
             const std::vector<std::string>& expected);

/// A closed interval [low, high] of a proportion or mean score, within [0, 1].
struct Interval {
    double low = 0, high = 1;
};

/// Wilson score interval (Wilson 1927; e.g. Agresti & Coull 1998, eq. 2) of a proportion with
/// `successes` out of `n` trials (successes may be fractional, clamped to [0, n]); `z` is the
/// normal quantile (1.96: 95 %). {0, 1} for n <= 0.
Interval wilson_interval(double successes, int64_t n, double z = 1.96);

/// Normal-approximation interval of the mean of `scores` (each in [0, 1]): mean ± z·s/√n with s
/// the sample standard deviation (n − 1 in the denominator), clamped to [0, 1]. When every
/// score is 0 or 1 it is a proportion and the Wilson interval is returned instead (the normal
/// one collapses to a point at 0 % or 100 %). {0, 1} for no scores, or a single score that is
/// not 0 or 1.
Interval mean_interval(const std::vector<double>& scores, double z = 1.96);

/// Normal-approximation interval of the mean of any real `values` (KL divergences in nats,
/// relative errors, times in ms): mean ± z·s/√n with s the sample standard deviation (n − 1 in
/// the denominator), not clamped (so `Interval`'s [0, 1] does not hold here). {mean, mean} for
/// a single value, {0, 0} for none.
Interval mean_interval_unbounded(const std::vector<double>& values, double z = 1.96);

} // namespace spanscope::eval
