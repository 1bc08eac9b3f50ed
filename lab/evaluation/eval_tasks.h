// Evaluation samples: a context (a haystack with hidden facts, or a document), a question
// asked after it, the expected answers and the metric that scores them.
//
// Tasks follow RULER (Hsieh et al. 2024, "RULER: What's the Real Context Size of Your
// Long-Context Language Models?", §3), phrased simply for Gemma 3 270M, a small base model,
// with the needle of `spanscope-lab niah` ("The secret code for the KEY is VALUE.", asked as
// "What is the secret code for the KEY?"), which it answers at 4K-16K tokens. Values are
// 5-digit numbers unless said otherwise.
//
//   task                 hidden                           expected        metric            max
//   niah_single_number   1 needle                         its value       string_match_all   16
//   niah_single_uuid     1 needle, value a UUID v4        its value       string_match_all   40
//   niah_multikey        4 needles, distinct keys         the asked one   string_match_all   16
//   niah_multivalue      3 needles, one key               all 3 values    string_match_all   48
//   niah_multiquery      4 needles, distinct keys         2 asked values  string_match_all   32
//   niah                 sample `index` is variant index % 5 of the five above (in this order)
//   vt                   a chain of 2-4 assignments       every name      string_match_all   48
//   qa                   a document of tests/qa           its answers     token_f1           32
//
// (max: max_tokens, the tokens to generate.) string_match_all gives niah_multivalue,
// niah_multiquery and vt partial credit. vt asks, as RULER does, for every variable assigned
// the chain's value, with RULER's answer prefix (EvalSample::answer_prefix).
#pragma once

#include "lab/evaluation/eval_corpus.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {
class Tokenizer;
}

namespace spanscope::eval {

/// What to make. A sample is a pure function of these fields (and of the tokenizer and the
/// corpus): runs can resume, and samples never depend on the order in which they are made.
struct TaskRequest {
    /// One of task_names().
    std::string task;
    /// "prose" | "noise".
    std::string haystack = "prose";
    /// Tokens of the context, 256..131072.
    int64_t target_length = 4096;
    /// Where the (first) needle goes, as a fraction of the context's tokens, 0..1.
    double depth = 0.5;
    uint64_t seed = 0;
    /// Sample number within (task, haystack, target_length, depth, seed).
    int64_t index = 0;
};

/// One evaluation sample.
struct EvalSample {
    std::string task, haystack;
    int64_t target_length = 0; ///< tokens requested
    double depth = 0;          ///< depth requested
    int64_t index = 0;
    std::string context;  ///< the document text (haystack with needles), ending in its separator
    std::string question; ///< the question asked after it
    /// The start of the model's answer, given with the question (RULER's "answer prefix",
    /// §3); the model continues it and only the continuation is scored. Empty: none.
    std::string answer_prefix;
    std::vector<std::string> expected; ///< never empty
    std::string metric;                ///< a name eval_metrics.h's score() knows
    int max_tokens = 0;                ///< tokens to generate for the answer
    /// Task details: "context_tokens" (the context's tokens as counted), "needle_depths" (the
    /// actual depths, fractions of context_tokens), "needle_offsets" (their first tokens),
    /// "needle_chars" (their first bytes in context), "variant" (niah), "keys", "values",
    /// "asked", "hops", "variables", "qa_id", ...
    nlohmann::json meta;
};

/// Every task make_sample knows, in the order of the table above.
std::vector<std::string> task_names();

/// The seed of a sample's own generator: a hash (FNV-1a, then splitmix64) of the request's
/// task, haystack, target_length, depth (its bits), seed and index.
uint64_t sample_seed(const TaskRequest& r);

/// The sample `r` asks for, lengths counted with `tok`. Throws std::invalid_argument naming the
/// task for an unknown task or haystack, a target_length outside [256, 131072] or a depth
/// outside [0, 1]; std::runtime_error when the corpus cannot serve the task (qa without a
/// question set, or none of its documents present).
EvalSample make_sample(const Tokenizer& tok, const TaskRequest& r, const Corpus& corpus);

/// An empty sample carrying the request's task, haystack, target length, depth and index.
EvalSample sample_for(const TaskRequest& r);

} // namespace spanscope::eval
