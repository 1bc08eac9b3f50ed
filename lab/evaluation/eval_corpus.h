// The haystack texts of the evaluation tasks and their token counts.
//
// Prose: the licence texts Debian ships in /usr/share/common-licenses (package base-files), cut
// into paragraphs at blank lines (as `spanscope-lab niah` does). Noise: RULER's repeated noise
// sentence (Hsieh et al. 2024, §3 and their niah.py). A context is built from "blocks": one
// paragraph followed by its "\n\n", or one noise sentence followed by "\n". Both separators are
// user-defined pieces of Gemma's vocabulary, so the tokens of a concatenation are the sum of the
// tokens of its blocks and lengths can be counted block by block (RULER joins its noise
// sentences with spaces; a newline keeps this sum exact).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spanscope {
class Tokenizer;
}

namespace spanscope::eval {

/// One paragraph of prose and the file it comes from.
struct Paragraph {
    std::string text;   ///< without the surrounding blank lines
    std::string source; ///< canonical path of the file
};

struct TokenCache;
struct TokenCaches;

/// The texts every task draws on. Copies share one token-count cache (thread-safe).
struct Corpus {
    Corpus();
    explicit Corpus(std::vector<Paragraph> prose, std::string qa_set = {});

    std::vector<Paragraph> prose; ///< paragraphs of the licence texts, in file order
    std::string qa_set;           ///< path of a question set (tests/qa/questions.json); "" = none
    std::shared_ptr<TokenCaches> token_caches;
};

/// The licence files of the prose haystack, in order (all plain text, distinct contents).
const std::vector<std::string>& licence_files();

/// Paragraphs of `text`: runs of lines separated by blank (or whitespace-only) lines, without
/// trailing whitespace.
std::vector<std::string> split_paragraphs(const std::string& text);

/// The whole content of the file at `path`; throws std::runtime_error if it cannot be read.
std::string read_text_file(const std::string& path);

/// The prose corpus from licence_files() (a missing file is skipped) and `qa_set`. Throws
/// std::runtime_error naming the package base-files if fewer than 50 paragraphs are found.
Corpus load_corpus(const std::string& qa_set = {});

/// RULER's noise haystack sentence (without a separator).
const std::string& noise_sentence();

/// The block separator of a haystack: "\n\n" for "prose", "\n" for "noise". Throws
/// std::invalid_argument for another haystack.
const std::string& haystack_separator(const std::string& haystack);

/// Counts tokens of blocks as `tok.encode(block).size()`, caching counts by block text in the
/// corpus (per tokenizer, told apart by a fingerprint of its vocabulary and encoding). Cheap
/// to copy; the tokenizer must outlive it.
class TokenCounter {
public:
    TokenCounter(const Tokenizer& tok, const Corpus& corpus);
    /// Tokens of `block`, from the cache when it was counted before.
    int64_t cached(const std::string& block) const;
    /// Tokens of `text`, not cached (needles, questions: texts made once).
    int64_t count(const std::string& text) const;
    const Tokenizer& tokenizer() const { return *tok_; }

private:
    const Tokenizer* tok_;
    std::shared_ptr<TokenCache> cache_;
};

} // namespace spanscope::eval
