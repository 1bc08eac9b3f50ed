// Project: full-text search over the units' text (SQLite FTS5, schema migration 2).
#include "storage/project.h"

#include <unordered_set>

namespace spanscope {

namespace {
// True for the non-ASCII code points that separate words rather than belong to them: Latin-1
// punctuation and symbols (no-break space, «», ¿, ×, ÷), General Punctuation (dashes, curly
// quotes, typographic spaces), Supplemental Punctuation, CJK symbols and punctuation, and the
// punctuation of the fullwidth and small-form blocks (Unicode 15 block charts).
bool separator(char32_t cp) {
    return (cp >= 0x80 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 ||
           (cp >= 0x2000 && cp <= 0x206F) || (cp >= 0x2E00 && cp <= 0x2E7F) ||
           (cp >= 0x3000 && cp <= 0x303F) || (cp >= 0xFE10 && cp <= 0xFE1F) ||
           (cp >= 0xFE30 && cp <= 0xFE6F) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
           (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
           (cp >= 0xFF5B && cp <= 0xFF65);
}

// The length of the UTF-8 sequence at s[i] and its code point; 1 and U+2000 (a separator) for a
// byte that starts no valid sequence.
size_t utf8_at(const std::string& s, size_t i, char32_t* cp) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
        *cp = 0x2000; // invalid: treated as a separator
        return 1;
    }
    char32_t c = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < n; ++k) {
        const auto t = static_cast<unsigned char>(s[i + k]);
        if ((t & 0xC0) != 0x80) {
            *cp = 0x2000;
            return 1;
        }
        c = (c << 6) | (t & 0x3F);
    }
    *cp = c;
    return n;
}
} // namespace

std::string fts_match_expression(const std::string& question) {
    // Words are runs of ASCII letters and digits and of non-ASCII letters (UTF-8); every other
    // character (ASCII punctuation and space, the Unicode punctuation and spaces of separator(),
    // a byte that is not UTF-8) separates them. Each word becomes an FTS5 string ("..."), so that
    // operators (AND, OR, NOT, NEAR), column filters, prefixes, carets and quotes in a question are
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
    for (size_t i = 0; i < question.size();) {
        const auto c = static_cast<unsigned char>(question[i]);
        if (c < 0x80) {
            if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
                w += question[i];
            else
                flush();
            ++i;
            continue;
        }
        char32_t cp = 0;
        const size_t n = utf8_at(question, i, &cp);
        if (separator(cp))
            flush();
        else
            w.append(question, i, n);
        i += n;
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
