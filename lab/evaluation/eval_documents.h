// Several documents from one evaluation sample, for position-independent caching
// (docs/architecture.md §3.5, issue 7): the sample's context is cut at paragraph boundaries into
// documents of about equal length, each then prefilled on its own. A needle keeps its place in the
// text, so the question is about document k (the one holding the first needle); the others hold the
// other needles (niah_multikey: distractors in other documents) or plain text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {
class Tokenizer;
}

namespace spanscope::eval {

/// `context` cut into `n` consecutive pieces at paragraph ends ("\n\n", kept with the piece
/// before), the i-th cut at the paragraph end whose token count (with `tok`, counted per
/// paragraph) is closest to i/n of the whole; pieces concatenate back to `context`. Throws
/// std::invalid_argument for n < 1 or a context with fewer than n paragraphs.
std::vector<std::string> split_into_documents(const Tokenizer& tok, const std::string& context,
                                              int n);

/// Index of the first piece that contains `text`, or -1.
int document_holding(const std::vector<std::string>& documents, const std::string& text);

} // namespace spanscope::eval
