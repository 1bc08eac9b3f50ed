#include "engine/text/chunking.h"

#include "engine/text/prompt.h"
#include "engine/text/text_input.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope {

namespace {

struct Piece {
    int64_t begin, end, tokens;
};

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Boundaries after which a new piece may start, for the three levels of cutting.
// Paragraphs: after a run of two or more newlines (lines holding only spaces count as blank).
std::vector<int64_t> paragraph_ends(const std::string& t, int64_t b, int64_t e) {
    std::vector<int64_t> ends;
    int64_t i = b;
    while (i < e) {
        if (t[i] != '\n') {
            ++i;
            continue;
        }
        // A run of newlines and blank-line whitespace starting here.
        int64_t j = i, newlines = 0, last_nl = i;
        while (j < e && is_space(t[j])) {
            if (t[j] == '\n') {
                ++newlines;
                last_nl = j;
            }
            ++j;
        }
        if (newlines >= 2 && j < e)
            ends.push_back(last_nl + 1);
        i = j;
    }
    ends.push_back(e);
    return ends;
}

// Sentences: after ". ", "! ", "? " (and the whitespace that follows) or after a newline.
std::vector<int64_t> sentence_ends(const std::string& t, int64_t b, int64_t e) {
    std::vector<int64_t> ends;
    for (int64_t i = b; i < e; ++i) {
        const bool stop =
            (t[i] == '.' || t[i] == '!' || t[i] == '?') && i + 1 < e && is_space(t[i + 1]);
        if (!stop && t[i] != '\n')
            continue;
        int64_t j = i + 1;
        while (j < e && is_space(t[j]))
            ++j;
        if (j < e)
            ends.push_back(j);
        i = j - 1;
    }
    ends.push_back(e);
    return ends;
}

// Words: after each run of whitespace; a word longer than max_bytes is cut at a UTF-8
// character boundary.
std::vector<int64_t> word_ends(const std::string& t, int64_t b, int64_t e, int64_t max_bytes) {
    std::vector<int64_t> ends;
    int64_t start = b;
    for (int64_t i = b; i < e; ++i) {
        const bool boundary = is_space(t[i]) && i + 1 < e && !is_space(t[i + 1]);
        if (boundary || i + 1 - start >= max_bytes) {
            int64_t cut = i + 1;
            while (cut < e && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80)
                ++cut; // never inside a character
            if (cut < e)
                ends.push_back(cut);
            start = cut;
            i = cut - 1;
        }
    }
    ends.push_back(e);
    return ends;
}

// Tokens of text[b, e) inside the document (sizes only: a space prefix's token is left out).
int64_t count_tokens(const Tokenizer& tok, const std::string& t, int64_t b, int64_t e) {
    return static_cast<int64_t>(
        tok.encode(std::string_view(t).substr(b, e - b), false, TextStart::Continues).size());
}

// Pieces of [b, e) no longer than target tokens where possible: paragraphs, else sentences,
// else words.
void cut(const Tokenizer& tok, const std::string& t, int64_t b, int64_t e, int64_t target,
         int level, std::vector<Piece>& out) {
    std::vector<int64_t> ends;
    if (level == 0)
        ends = paragraph_ends(t, b, e);
    else if (level == 1)
        ends = sentence_ends(t, b, e);
    else
        ends = word_ends(t, b, e, std::max<int64_t>(16, target * 2));
    int64_t start = b;
    for (const int64_t end : ends) {
        const int64_t n = count_tokens(tok, t, start, end);
        if (n > target && level < 2 && end - start > 1)
            cut(tok, t, start, end, target, level + 1, out);
        else
            out.push_back({start, end, n});
        start = end;
    }
}

// Token start offsets of `ids`, which encode text[b, e): the token texts concatenate to the
// text (the vocabulary has no normaliser that changes bytes), but for the spaces a space prefix
// put in front of a fragment (a token that starts with a space where the text has none); if
// they do not, offsets are spread proportionally so that they stay increasing and inside the
// chunk.
std::vector<int64_t> token_offsets(const Tokenizer& tok, const std::string& t,
                                   const std::vector<int32_t>& ids, int64_t b, int64_t e) {
    std::vector<int64_t> offs(ids.size());
    int64_t at = b;
    for (size_t i = 0; i < ids.size(); ++i) {
        offs[i] = at;
        const std::string bytes = tok.token_bytes(ids[i]);
        const bool prefix = tok.add_space_prefix() && !bytes.empty() && bytes[0] == ' ' &&
                            (at >= e || t[static_cast<size_t>(at)] != ' ');
        at += static_cast<int64_t>(bytes.size()) - (prefix ? 1 : 0);
    }
    if (at != e)
        for (size_t i = 0; i < ids.size(); ++i)
            offs[i] = b + (e - b) * static_cast<int64_t>(i) / static_cast<int64_t>(ids.size());
    return offs;
}

} // namespace

std::vector<std::pair<int64_t, int64_t>>
split_into_chunks(const Tokenizer& tok, const std::string& text, int64_t target_tokens) {
    if (target_tokens < 1)
        throw std::invalid_argument("chunk size must be at least one token");
    std::vector<Piece> pieces;
    if (!text.empty())
        cut(tok, text, 0, static_cast<int64_t>(text.size()), target_tokens, 0, pieces);
    std::vector<std::pair<int64_t, int64_t>> chunks;
    int64_t begin = 0, tokens = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
        if (tokens > 0 && tokens + pieces[i].tokens > target_tokens) {
            chunks.emplace_back(begin, pieces[i].begin);
            begin = pieces[i].begin;
            tokens = 0;
        }
        tokens += pieces[i].tokens;
    }
    if (!pieces.empty())
        chunks.emplace_back(begin, pieces.back().end);
    return chunks;
}

std::vector<DocumentUnit> build_document_units(const Tokenizer& tok, const std::string& name,
                                               const std::string& text,
                                               const ChunkingOptions& options) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::invalid_argument("the document has no text");
    if (!is_valid_utf8(text))
        throw std::invalid_argument("the document text is not valid UTF-8");
    if (options.max_unit_tokens < 1)
        throw std::invalid_argument("the largest unit must hold at least one token");

    // Each chunk's text is encoded where it stands: after the unit's header (its first chunk)
    // or after the chunk before it (TextStart: with a space prefix, only a text that starts the
    // unit's text after a special piece gets one).
    const ChatFormat it = options.chat_format;
    const TextStart after_header = tok.start_after(document_unit_header(tok, it, name, 1, 1));
    struct Body {
        int64_t b, e;
        TextStart start;
        std::vector<int32_t> ids;
    };
    std::vector<Body> bodies;
    auto encode_body = [&](Body& body, TextStart start) {
        body.start = start;
        body.ids = tok.encode(std::string_view(text).substr(body.b, body.e - body.b), false, start);
    };
    for (const auto& [b, e] : split_into_chunks(tok, text, options.target_tokens)) {
        const TextStart start = bodies.empty() ? after_header : tok.start_after(bodies.back().ids);
        bodies.push_back({b, e, start, {}});
        encode_body(bodies.back(), start);
    }

    // The trailer follows the text (Continues) or a special piece it ends in (Fresh: with a
    // space prefix one token more); the longest of the four bounds the unit.
    size_t trailer_longest = 0;
    for (const bool newline : {true, false})
        for (const TextStart start : {TextStart::Continues, TextStart::Fresh})
            trailer_longest =
                std::max(trailer_longest, document_unit_trailer(tok, newline, start).size());
    const auto trailer_max = static_cast<int64_t>(trailer_longest);
    // Whole document as one unit?
    int64_t total = 0;
    for (const auto& c : bodies)
        total += static_cast<int64_t>(c.ids.size());
    std::vector<size_t> unit_starts{0};
    const auto single = static_cast<int64_t>(document_unit_header(tok, it, name, 1, 1).size());
    if (single + total + trailer_max > options.max_unit_tokens) {
        // Sections: the longest header ("part N of N") bounds every unit's budget.
        const auto header_max =
            static_cast<int64_t>(document_unit_header(tok, it, name, 99999, 99999).size());
        const int64_t budget = options.max_unit_tokens - header_max - trailer_max;
        unit_starts.clear();
        int64_t used = 0;
        for (size_t i = 0; i < bodies.size(); ++i) {
            auto n = static_cast<int64_t>(bodies[i].ids.size());
            if (i == 0 || used + n > budget) {
                // It opens a section: it follows the header there. (The next chunk's start
                // stays: a space prefix changes only the chunk's first text.)
                if (bodies[i].start != after_header) {
                    encode_body(bodies[i], after_header);
                    n = static_cast<int64_t>(bodies[i].ids.size());
                }
                unit_starts.push_back(i);
                used = 0;
            }
            if (n > budget)
                throw std::invalid_argument(
                    "a chunk of " + std::to_string(n) + " tokens does not fit a unit of " +
                    std::to_string(options.max_unit_tokens) + " tokens; lower the chunk size");
            used += n;
        }
    }

    std::vector<DocumentUnit> units;
    const int parts = static_cast<int>(unit_starts.size());
    for (int u = 0; u < parts; ++u) {
        const size_t first = unit_starts[static_cast<size_t>(u)];
        const size_t last = u + 1 < parts ? unit_starts[static_cast<size_t>(u) + 1] : bodies.size();
        DocumentUnit unit;
        unit.index = u;
        unit.char_begin = bodies[first].b;
        unit.char_end = bodies[last - 1].e;
        int64_t pos = 0;
        for (size_t i = first; i < last; ++i) {
            TextChunk c;
            c.char_begin = bodies[i].b;
            c.char_end = bodies[i].e;
            c.token_begin = pos;
            if (i == first) {
                c.tokens = document_unit_header(tok, it, name, u + 1, parts);
                c.token_chars.assign(c.tokens.size(), -1);
            }
            const auto offs = token_offsets(tok, text, bodies[i].ids, c.char_begin, c.char_end);
            c.tokens.insert(c.tokens.end(), bodies[i].ids.begin(), bodies[i].ids.end());
            c.token_chars.insert(c.token_chars.end(), offs.begin(), offs.end());
            if (i + 1 == last) {
                const auto tr = document_unit_trailer(tok, text[c.char_end - 1] == '\n',
                                                      tok.start_after(c.tokens));
                c.tokens.insert(c.tokens.end(), tr.begin(), tr.end());
                c.token_chars.insert(c.token_chars.end(), tr.size(), -1);
            }
            pos = c.token_end();
            unit.chunks.push_back(std::move(c));
        }
        units.push_back(std::move(unit));
    }
    return units;
}

} // namespace spanscope
