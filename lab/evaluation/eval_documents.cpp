#include "lab/evaluation/eval_documents.h"

#include "engine/text/tokenizer.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace spanscope::eval {

std::vector<std::string> split_into_documents(const Tokenizer& tok, const std::string& context,
                                              int n) {
    if (n < 1)
        throw std::invalid_argument("documents: at least one is needed");
    // Paragraph ends: the offsets just past each "\n\n" run (and the end of the text).
    std::vector<size_t> ends;
    std::vector<int64_t> cumulative; // tokens up to each end
    int64_t total = 0;
    size_t b = 0;
    while (b < context.size()) {
        size_t e = context.find("\n\n", b);
        e = e == std::string::npos ? context.size() : e + 2;
        while (e < context.size() && context[e] == '\n')
            ++e;
        total += static_cast<int64_t>(
            tok.encode(context.substr(b, e - b), false, TextStart::Continues).size());
        ends.push_back(e);
        cumulative.push_back(total);
        b = e;
    }
    if (static_cast<int64_t>(ends.size()) < n)
        throw std::invalid_argument("documents: the context has " + std::to_string(ends.size()) +
                                    " paragraphs, fewer than the " + std::to_string(n) +
                                    " documents asked for");
    std::vector<std::string> out;
    size_t start = 0, next = 0; // next: first paragraph end a cut may take
    for (int i = 1; i <= n; ++i) {
        size_t cut = ends.size() - 1;
        if (i < n) {
            const double want = static_cast<double>(total) * i / n;
            double best = std::numeric_limits<double>::infinity();
            // Leave at least one paragraph for each document still to come.
            const size_t last = ends.size() - static_cast<size_t>(n - i) - 1;
            for (size_t j = next; j <= last; ++j) {
                const double d = std::abs(static_cast<double>(cumulative[j]) - want);
                if (d < best) {
                    best = d;
                    cut = j;
                }
            }
        }
        out.push_back(context.substr(start, ends[cut] - start));
        start = ends[cut];
        next = cut + 1;
    }
    return out;
}

int document_holding(const std::vector<std::string>& documents, const std::string& text) {
    for (size_t i = 0; i < documents.size(); ++i)
        if (documents[i].find(text) != std::string::npos)
            return static_cast<int>(i);
    return -1;
}

} // namespace spanscope::eval
