// Project: full-text search over the units' text (SQLite FTS5, schema migration 2).
#include "storage/project.h"

#include <sqlite3.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
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

// English function words, left out of a question's search: with a project's few sections,
// BM25's idf weighs "what", "does" or "about" in one section as much as the word the question
// is about. NLTK's English stop-word list (nltk.corpus.stopwords, 179 words; its contractions
// as question_words splits them, at the apostrophe).
bool stop_word(const std::string& folded) {
    static const std::unordered_set<std::string> words = {
        "i",       "me",      "my",      "myself",   "we",         "our",    "ours",    "ourselves",
        "you",     "your",    "yours",   "yourself", "yourselves", "he",     "him",     "his",
        "himself", "she",     "her",     "hers",     "herself",    "it",     "its",     "itself",
        "they",    "them",    "their",   "theirs",   "themselves", "what",   "which",   "who",
        "whom",    "this",    "that",    "these",    "those",      "am",     "is",      "are",
        "was",     "were",    "be",      "been",     "being",      "have",   "has",     "had",
        "having",  "do",      "does",    "did",      "doing",      "a",      "an",      "the",
        "and",     "but",     "if",      "or",       "because",    "as",     "until",   "while",
        "of",      "at",      "by",      "for",      "with",       "about",  "against", "between",
        "into",    "through", "during",  "before",   "after",      "above",  "below",   "to",
        "from",    "up",      "down",    "in",       "out",        "on",     "off",     "over",
        "under",   "again",   "further", "then",     "once",       "here",   "there",   "when",
        "where",   "why",     "how",     "all",      "any",        "both",   "each",    "few",
        "more",    "most",    "other",   "some",     "such",       "no",     "nor",     "not",
        "only",    "own",     "same",    "so",       "than",       "too",    "very",    "s",
        "t",       "can",     "will",    "just",     "don",        "should", "now",     "d",
        "ll",      "m",       "o",       "re",       "ve",         "y",      "ain",     "aren",
        "couldn",  "didn",    "doesn",   "hadn",     "hasn",       "haven",  "isn",     "ma",
        "mightn",  "mustn",   "needn",   "shan",     "shouldn",    "wasn",   "weren",   "won",
        "wouldn"};
    return words.count(folded) > 0;
}

std::vector<std::string> question_words(const std::string& question) {
    // Words are runs of ASCII letters and digits and of non-ASCII letters (UTF-8); every other
    // character (ASCII punctuation and space, the Unicode punctuation and spaces of separator(),
    // a byte that is not UTF-8) separates them. Each word becomes an FTS5 string ("..."), so that
    // operators (AND, OR, NOT, NEAR), column filters, prefixes, carets and quotes in a question are
    // searched as text, never parsed as query syntax (sqlite.org/fts5.html §3.1).
    std::vector<std::string> words;
    std::unordered_set<std::string> seen;
    std::string w;
    auto flush = [&] {
        if (w.empty())
            return;
        std::string folded = w;
        for (auto& c : folded)
            if (c >= 'A' && c <= 'Z')
                c = static_cast<char>(c - 'A' + 'a');
        if (!stop_word(folded) && seen.insert(folded).second)
            words.push_back(w);
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
    return words;
}

// An FTS5 string for `word`: quoted, its quotes doubled (none survive question_words' split).
std::string fts_string(const std::string& word) {
    std::string s = "\"";
    for (const char c : word) {
        if (c == '"')
            s += '"';
        s += c;
    }
    return s + '"';
}

// FTS5 auxiliary functions (sqlite.org/fts5.html §7), registered on the project's connection.
//
// The first varint of a blob in SQLite's varint format (big-endian groups of 7 bits, the high
// bit set on all but the last; a ninth byte gives 8 bits), or -1 when the blob ends inside it.
int64_t first_varint(const std::vector<uint8_t>& b) {
    uint64_t v = 0;
    for (size_t i = 0; i < b.size() && i < 9; ++i) {
        if (i == 8)
            return static_cast<int64_t>((v << 8) | b[i]);
        v = (v << 7) | (b[i] & 0x7F);
        if ((b[i] & 0x80) == 0)
            return static_cast<int64_t>(v);
    }
    return -1;
}

// unit_bm25(unit_text, N, avgdl, hits): Okapi BM25 (Robertson & Zaragoza 2009) of the row for
// the query's phrases, with FTS5's bm25() constants (k1 = 1.2, b = 0.75, the result negated so
// that lower is more relevant) and Lucene's idf, ln(1 + (N - n + 0.5) / (n + 0.5)) (Lucene's
// BM25Similarity): FTS5's ln((N - n + 0.5) / (n + 0.5)), raised to 1e-6 where it is not
// positive, gives a word held by half the rows or more no weight — with a project's few
// sections (three, say) every word of the question but the rarest, the document's own name
// among them. The collection statistics come from the caller:
// N rows, avgdl tokens per row, and `hits`, a blob of one int64 per phrase (in query order): the
// rows holding it. FTS5's bm25() takes them from the whole table; the caller gives those of one
// chunking, so that a document chunked for two models does not count twice.
void unit_bm25(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* ctx, int argc,
               sqlite3_value** argv) {
    constexpr double k1 = 1.2, b = 0.75;
    const int phrases = api->xPhraseCount(fts);
    if (argc != 3 || phrases < 0 ||
        sqlite3_value_bytes(argv[2]) != phrases * static_cast<int>(sizeof(int64_t))) {
        sqlite3_result_error(ctx, "unit_bm25: wrong arguments (N, avgdl, one int64 per phrase)",
                             -1);
        return;
    }
    const double rows = sqlite3_value_double(argv[0]);
    const double avgdl = sqlite3_value_double(argv[1]);
    const auto* hits = static_cast<const unsigned char*>(sqlite3_value_blob(argv[2]));
    std::vector<double> tf(static_cast<size_t>(phrases), 0.0);
    int insts = 0, rc = api->xInstCount(fts, &insts);
    for (int i = 0; rc == SQLITE_OK && i < insts; ++i) {
        int phrase = 0, column = 0, offset = 0;
        rc = api->xInst(fts, i, &phrase, &column, &offset);
        if (rc == SQLITE_OK && phrase >= 0 && phrase < phrases)
            tf[static_cast<size_t>(phrase)] += 1;
    }
    int dl = 0;
    if (rc == SQLITE_OK)
        rc = api->xColumnSize(fts, 0, &dl);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    double score = 0;
    for (int i = 0; i < phrases; ++i) {
        int64_t n = 0;
        std::memcpy(&n, hits + sizeof(int64_t) * static_cast<size_t>(i), sizeof n);
        const double idf =
            std::log1p((rows - static_cast<double>(n) + 0.5) / (static_cast<double>(n) + 0.5));
        const double f = tf[static_cast<size_t>(i)];
        score += idf * (f * (k1 + 1.0)) / (f + k1 * (1.0 - b + b * dl / avgdl));
    }
    sqlite3_result_double(ctx, -score);
}

// Registers unit_bm25 on the connection (the fts5_api pointer as FTS5 hands it
// out: SELECT fts5(?1) with a bound pointer, sqlite.org/fts5.html §7.1). Throws DbError.
void register_ranking(Db& db) {
    fts5_api* api = nullptr;
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db.handle(), "SELECT fts5(?1)", -1, &st, nullptr);
    if (rc == SQLITE_OK) {
        sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr", nullptr);
        sqlite3_step(st);
    }
    sqlite3_finalize(st);
    if (api == nullptr || api->iVersion < 2)
        throw DbError(db.path() + ": this SQLite has no FTS5 extension interface", rc);
    rc = api->xCreateFunction(api, "unit_bm25", nullptr, unit_bm25, nullptr);
    if (rc != SQLITE_OK)
        throw DbError(db.path() + ": cannot register the section ranking with FTS5", rc);
}

} // namespace

std::string fts_match_expression(const std::string& question) {
    // Any word matches (OR); the ranking weights the rarer ones.
    std::string expr;
    for (const auto& w : question_words(question))
        expr += (expr.empty() ? "" : " OR ") + fts_string(w);
    return expr;
}

std::vector<UnitMatch> Project::search_units(const std::vector<int64_t>& document_ids,
                                             const std::string& key, const std::string& question) {
    const auto words = question_words(question);
    if (words.empty())
        return {};
    if (!ranking_registered_) {
        register_ranking(*db_);
        ranking_registered_ = true;
    }
    // The statistics of this chunking's rows alone: N, mean length, rows holding each word.
    // A row's length is the token count FTS5 keeps for bm25() in its docsize table, one varint
    // per column (sqlite.org/fts5.html, the columnsize option); a function of the table cannot
    // give it outside a MATCH query.
    auto lengths = db_->prepare("SELECT sz FROM unit_text_docsize WHERE id IN "
                                "(SELECT id FROM chunks WHERE chunking = ? AND ordinal = 0)");
    lengths.bind(1, key);
    double rows = 0, tokens = 0;
    while (lengths.step()) {
        const int64_t n = first_varint(lengths.blob(0));
        if (n < 0 || n > INT32_MAX) // FTS5 keeps a column's size as a 32-bit int
            throw ProjectError(db_->path() + ": the full-text index is damaged (a row's size "
                                             "cannot be read); the file was not changed");
        rows += 1;
        tokens += static_cast<double>(n);
    }
    if (rows == 0)
        return {};
    const double avgdl = std::max(tokens / rows, 1.0);
    std::string expr;
    std::vector<int64_t> hits;
    auto count = db_->prepare("SELECT count(*) FROM unit_text JOIN chunks AS c ON c.id = "
                              "unit_text.rowid WHERE unit_text MATCH ? AND c.chunking = ?");
    for (const auto& w : words) {
        const std::string phrase = fts_string(w);
        count.bind(1, phrase).bind(2, key);
        hits.push_back(count.step() ? count.int64(0) : 0);
        count.reset();
        expr += (expr.empty() ? "" : " OR ") + phrase;
    }
    const std::unordered_set<int64_t> wanted(document_ids.begin(), document_ids.end());
    auto q = db_->prepare(
        "SELECT c.document_id, c.unit, unit_bm25(unit_text, ?, ?, ?) AS score FROM unit_text "
        "JOIN chunks AS c ON c.id = unit_text.rowid WHERE unit_text MATCH ? AND c.chunking = ? "
        "ORDER BY score, c.document_id, c.unit");
    q.bind(1, rows).bind(2, avgdl).bind_blob(3, hits.data(), hits.size() * sizeof(int64_t));
    q.bind(4, expr).bind(5, key);
    std::vector<UnitMatch> out;
    while (q.step())
        if (wanted.count(q.int64(0)))
            out.push_back({q.int64(0), static_cast<int>(q.int64(1)), q.real(2)});
    return out;
}

} // namespace spanscope
