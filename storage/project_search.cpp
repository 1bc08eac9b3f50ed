// Project: full-text search over the units' text (SQLite FTS5, schema migration 2).
#include "project.h"

#include <unordered_set>

namespace spanscope {

std::string fts_match_expression(const std::string& question) {
    // Words are runs of ASCII letters and digits and of non-ASCII bytes (UTF-8 letters); every
    // other byte separates them. Each word becomes an FTS5 string ("..."), so that operators
    // (AND, OR, NOT, NEAR), column filters, prefixes, carets and quotes in a question are
    // searched as text, never parsed as query syntax (sqlite.org/fts5.html §3.1). Any word
    // matches (OR); bm25() weights the rarer ones.
    std::string expr;
    std::unordered_set<std::string> seen;
    std::string w;
    auto flush = [&] {
        if (w.empty())
            return;
        std::string folded = w;
        for (auto& c : folded)
            if (c >= 'A' && c <= 'Z')
                c = static_cast<char>(c - 'A' + 'a');
        if (seen.insert(folded).second) {
            if (!expr.empty())
                expr += " OR ";
            expr += '"';
            for (const char c : w) {
                if (c == '"')
                    expr += '"'; // an FTS5 string doubles its quotes (none survive the split)
                expr += c;
            }
            expr += '"';
        }
        w.clear();
    };
    for (const char ch : question) {
        const auto c = static_cast<unsigned char>(ch);
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80)
            w += ch;
        else
            flush();
    }
    flush();
    return expr;
}

std::vector<UnitMatch> Project::search_units(const std::vector<int64_t>& document_ids,
                                             const std::string& key, const std::string& question) {
    const std::string expr = fts_match_expression(question);
    if (expr.empty())
        return {};
    const std::unordered_set<int64_t> wanted(document_ids.begin(), document_ids.end());
    auto q = db_->prepare(
        "SELECT c.document_id, c.unit, bm25(unit_text) AS score FROM unit_text JOIN chunks AS c "
        "ON c.id = unit_text.rowid WHERE unit_text MATCH ? AND c.chunking = ? ORDER BY score, "
        "c.document_id, c.unit");
    q.bind(1, expr).bind(2, key);
    std::vector<UnitMatch> out;
    while (q.step())
        if (wanted.count(q.int64(0)))
            out.push_back({q.int64(0), static_cast<int>(q.int64(1)), q.real(2)});
    return out;
}

} // namespace spanscope
