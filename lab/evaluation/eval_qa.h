// The `qa` task: a question of Spanscope's QA set (tests/qa/questions.json, described in
// tests/qa/README.md) about one Debian document, with that document brought to the requested
// length in tokens: padded with haystack blocks when shorter, cut to a window of paragraphs
// around the answer when longer.
#pragma once

#include "lab/evaluation/eval_corpus.h"
#include "lab/evaluation/eval_tasks.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spanscope::eval {

/// One question of the set.
struct QaQuestion {
    std::string id, doc, question;
    std::vector<std::string> answers; ///< accepted answers; the first occurs in `doc`
};

/// The questions of the set at `path` whose document exists, in file order. Throws
/// std::runtime_error if the set cannot be read or parsed or an entry lacks a field.
std::vector<QaQuestion> load_qa_questions(const std::string& path);

/// `text` lower-cased (ASCII) with every run of whitespace made one space, trimmed.
std::string collapse_lower(const std::string& text);

/// Index of the first paragraph holding `answer` (compared by collapse_lower), -1 if none.
int64_t find_answer_paragraph(const std::vector<std::string>& paragraphs,
                              const std::string& answer);

/// The qa sample of `r` (already validated), drawing from `rng`. The question is
/// perm[index mod n] of a permutation of the n questions seeded by `r.seed` alone, so every
/// question comes once in n consecutive indices and each (length, depth) cell asks the same
/// questions. The document's paragraphs are kept whole; when it is shorter than target_length,
/// depth · (target_length − document tokens) tokens of haystack go before it and the rest after
/// it (prose padding skips the document's own file), so depth 0 puts the document first and 1
/// last (the document cannot start at depth · target_length for every depth: it would not fit
/// near 1). When it is longer, the window keeps the answer's paragraph with depth ·
/// (target_length − its tokens) tokens of the document before it where the document allows.
/// Metric token_f1 over all accepted answers; meta: qa_id, doc, doc_tokens, truncated,
/// paragraphs ([first, end) of the whole paragraphs kept),
/// doc_start_depth, answer_depth, context_tokens. Throws std::runtime_error when the corpus has
/// no question set, no question's document exists, or the first answer is not in its document.
EvalSample make_qa_sample(const TokenCounter& counter, const TaskRequest& r, const Corpus& corpus,
                          std::mt19937_64& rng);

} // namespace spanscope::eval
