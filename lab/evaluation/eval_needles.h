// Needles and haystacks: the random facts the tasks hide, and the assembly of a context of a
// given length in tokens with needles at given depths.
//
// Lengths and positions are in tokens of the model's tokenizer (`Tokenizer::encode`), counted
// block by block (eval_corpus.h). Randomness comes only from the generator passed in, drawn
// with plain modulo and bit arithmetic (no std:: distributions, whose results differ between
// standard libraries), so a sample is identical wherever it is made.
#pragma once

#include "lab/evaluation/eval_corpus.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spanscope::eval {

/// Whole blocks of a haystack (each text ends with its separator) and their tokens.
struct Blocks {
    std::vector<std::string> text;
    std::vector<int64_t> tokens;
    int64_t total = 0; ///< sum of tokens
};

/// True when adding a block of `tokens` to `total` brings the sum closer to `budget`.
inline bool brings_closer(int64_t total, int64_t tokens, int64_t budget) {
    return 2 * total + tokens < 2 * budget;
}

/// Blocks of `haystack` ("prose" or "noise") whose tokens add up to about `budget`. Prose:
/// paragraphs in corpus order from a random start, wrapping around, leaving out those whose
/// source is `exclude_source`; a paragraph that would overshoot the budget is skipped, and after
/// 64 skips the smallest skipped one is added if that brings the sum closer; the sum then ends
/// within about half a short paragraph of the budget. Noise: the noise sentence repeated while
/// that brings the sum closer. Throws
/// std::invalid_argument for an unknown haystack, std::runtime_error when no paragraph is left to
/// draw from.
Blocks haystack_blocks(const TokenCounter& counter, const Corpus& corpus,
                       const std::string& haystack, int64_t budget, std::mt19937_64& rng,
                       const std::string& exclude_source = {});

/// A statement to hide (without separator) and where: a fraction of the context's tokens.
struct Needle {
    std::string text;
    double depth = 0;
};

/// A context with its needles, in the order they were given.
struct Placement {
    std::string context;          ///< blocks and needles, each followed by the separator
    int64_t tokens = 0;           ///< tokens of the context (sum of block and needle tokens)
    std::vector<int64_t> offsets; ///< token offset of each needle's first token
    std::vector<double> depths;   ///< offsets / tokens
    std::vector<int64_t> chars;   ///< byte offset of each needle's first byte in context
};

/// A haystack of about `target_length` tokens, needles included (the closest whole number of
/// blocks), with every needle inserted between blocks at the boundary closest to
/// `depth · tokens`. Needles keep the order of their depths (ties: the order given), so a
/// chain given with increasing depths stays in order.
Placement place_needles(const TokenCounter& counter, const Corpus& corpus,
                        const std::string& haystack, int64_t target_length,
                        const std::vector<Needle>& needles, std::mt19937_64& rng);

/// Uniform in [0, 1) from the top 53 bits of one draw.
double uniform01(std::mt19937_64& rng);
/// `n` distinct 5-digit numbers (10000..99999), as text.
std::vector<std::string> random_numbers(std::mt19937_64& rng, int n);
/// A random UUID version 4 (RFC 4122 §4.4), lower-case: 8-4-4-4-12 hex digits.
std::string random_uuid(std::mt19937_64& rng);
/// `n` distinct keys "adjective noun" (from the word lists of `spanscope-lab niah`; n <= 100).
std::vector<std::string> random_keys(std::mt19937_64& rng, int n);
/// `n` distinct variable names of 5 upper-case letters (RULER's variable tracking).
std::vector<std::string> random_variable_names(std::mt19937_64& rng, int n);
/// "The secret code for the KEY is VALUE." (the needle of `spanscope-lab niah`).
std::string secret_code_needle(const std::string& key, const std::string& value);

} // namespace spanscope::eval
