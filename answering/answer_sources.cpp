#include "answering/answer_sources.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string_view>

namespace spanscope {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// A byte of a word: a letter or digit, or any byte of a multi-byte UTF-8 character.
bool is_word_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || std::isalnum(u);
}

// Closing quotes and brackets that may follow a sentence's terminator: " ' ) ] ” ’ »
bool closes(const std::string& t, int64_t& at) {
    if (at < 0)
        return false;
    const char c = t[static_cast<size_t>(at)];
    if (c == '"' || c == '\'' || c == ')' || c == ']') {
        --at;
        return true;
    }
    // ” (E2 80 9D), ’ (E2 80 99): three bytes; » (C2 BB): two.
    if (at >= 2 && t.compare(static_cast<size_t>(at - 2), 3, "\xE2\x80\x9D") == 0) {
        at -= 3;
        return true;
    }
    if (at >= 2 && t.compare(static_cast<size_t>(at - 2), 3, "\xE2\x80\x99") == 0) {
        at -= 3;
        return true;
    }
    if (at >= 1 && t.compare(static_cast<size_t>(at - 1), 2, "\xC2\xBB") == 0) {
        at -= 2;
        return true;
    }
    return false;
}

// True when the line end at byte b ends a block of its own: a blank line follows (a paragraph
// ends), the line holds a tab (a table row, as the DOCX and ODT loaders write them), or the
// next line starts a list item ("- ", "* ", "+ ", "• ", "12. ", "3) ", "(a) ").
bool line_ends_block(const std::string& t, int64_t b) {
    const auto size = static_cast<int64_t>(t.size());
    int64_t i = b + 1;
    while (i < size && (t[static_cast<size_t>(i)] == ' ' || t[static_cast<size_t>(i)] == '\t'))
        ++i;
    if (i >= size || t[static_cast<size_t>(i)] == '\n' || t[static_cast<size_t>(i)] == '\r')
        return true;
    for (int64_t j = b - 1; j >= 0 && t[static_cast<size_t>(j)] != '\n'; --j)
        if (t[static_cast<size_t>(j)] == '\t')
            return true;
    const std::string_view next(t.data() + i, static_cast<size_t>(size - i));
    if (next.starts_with("- ") || next.starts_with("* ") || next.starts_with("+ ") ||
        next.starts_with("\xE2\x80\xA2"))
        return true;
    size_t k = 0;
    const bool paren = !next.empty() && next[0] == '(';
    k += paren;
    const size_t label = k;
    while (k < next.size() && k - label < 4 &&
           (std::isdigit(static_cast<unsigned char>(next[k])) ||
            (paren && std::isalpha(static_cast<unsigned char>(next[k])))))
        ++k;
    return k > label && k + 1 < next.size() && (next[k] == ')' || (!paren && next[k] == '.')) &&
           next[k + 1] == ' ';
}

// True when byte b (whitespace) ends a sentence or a block: whitespace after '.', '!', '?' or
// '…' and any closing quotes and brackets, or a line end that line_ends_block. A single line end
// inside a sentence (hard-wrapped text: licences, PDFs' text layers) is a space.
bool sentence_ends_at(const std::string& t, int64_t b) {
    const char c = t[static_cast<size_t>(b)];
    if (!is_space(c))
        return false;
    if (c == '\n' && line_ends_block(t, b))
        return true;
    int64_t at = b - 1;
    while (closes(t, at)) {
    }
    if (at < 0)
        return false;
    const char e = t[static_cast<size_t>(at)];
    if (e == '.' || e == '!' || e == '?')
        return true;
    return at >= 2 && t.compare(static_cast<size_t>(at - 2), 3, "\xE2\x80\xA6") == 0;
}

} // namespace

void append_section_passages(const DocumentUnit& unit, const std::string& text,
                             const Segmentation* spans, int64_t document_id, int64_t offset,
                             std::vector<SourcePassage>& out) {
    const int64_t n = unit.n_tokens();
    const auto text_size = static_cast<int64_t>(text.size());
    // Each position's first byte in the text (-1: not document text).
    std::vector<int64_t> chars(static_cast<size_t>(n), -1);
    for (const auto& ch : unit.chunks)
        for (size_t i = 0; i < ch.tokens.size() && i < ch.token_chars.size(); ++i) {
            const int64_t p = ch.token_begin + static_cast<int64_t>(i);
            const int64_t c = ch.token_chars[i];
            if (p >= 0 && p < n && c >= 0 && c <= text_size)
                chars[static_cast<size_t>(p)] = c;
        }
    // Where passages begin (unit-local positions, ascending, the first 0).
    std::vector<int64_t> cuts{0};
    if (spans && !spans->spans.empty()) {
        for (const auto& s : spans->spans)
            if (s.end > cuts.back() && s.end < n)
                cuts.push_back(s.end);
    } else {
        // last: the previous text token's first byte; words: the passage so far holds more
        // than whitespace (the bytes before this token's).
        int64_t last = -1, since = 0;
        bool words = false;
        for (int64_t p = 0; p < n; ++p) {
            const int64_t c = chars[static_cast<size_t>(p)];
            if (c < 0)
                continue;
            bool ends = false;
            if (last >= 0) {
                for (int64_t b = last; b < c && !words; ++b)
                    words = !is_space(text[static_cast<size_t>(b)]);
                // A sentence or line ends in (last, c]: this token starts after it.
                for (int64_t b = last + 1; b <= c && b < text_size && !ends; ++b)
                    ends = sentence_ends_at(text, b);
            }
            if (((ends && words) || since >= kMaxPassageTokens) && p > cuts.back()) {
                cuts.push_back(p);
                since = 0;
                words = false;
            }
            last = c;
            ++since;
        }
    }
    cuts.push_back(n);
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        const int64_t p0 = cuts[k], p1 = cuts[k + 1];
        // The positions of document text only: BOS and the header are in no passage.
        int64_t first = p0, last = p1 - 1;
        while (first < p1 && chars[static_cast<size_t>(first)] < 0)
            ++first;
        while (last > first && chars[static_cast<size_t>(last)] < 0)
            --last;
        if (first == p1)
            continue; // no document text (the header)
        int64_t cb = chars[static_cast<size_t>(first)];
        int64_t ce = std::min(unit.char_end, text_size);
        for (int64_t p = p1; p < n; ++p)
            if (chars[static_cast<size_t>(p)] >= 0) {
                ce = chars[static_cast<size_t>(p)];
                break;
            }
        while (cb < ce && is_space(text[static_cast<size_t>(cb)]))
            ++cb;
        while (ce > cb && is_space(text[static_cast<size_t>(ce - 1)]))
            --ce;
        if (ce <= cb)
            continue;
        // A cut inside a word (a SEKV span may end in a number) widens the bytes to the word.
        while (cb > 0 && is_word_byte(text[static_cast<size_t>(cb - 1)]) &&
               is_word_byte(text[static_cast<size_t>(cb)]))
            --cb;
        while (ce < text_size && is_word_byte(text[static_cast<size_t>(ce - 1)]) &&
               is_word_byte(text[static_cast<size_t>(ce)]))
            ++ce;
        out.push_back({document_id, static_cast<int32_t>(offset + first),
                       static_cast<int32_t>(offset + last + 1), cb, ce});
    }
}

std::vector<std::pair<int32_t, int32_t>>
passage_ranges(const std::vector<SourcePassage>& passages) {
    std::vector<std::pair<int32_t, int32_t>> r;
    r.reserve(passages.size());
    for (const auto& p : passages)
        r.emplace_back(p.pos_begin, p.pos_end);
    return r;
}

std::vector<double> passage_shares(const std::vector<std::vector<float>>& mass, size_t passages) {
    std::vector<double> sum(passages, 0.0);
    for (const auto& row : mass) {
        if (row.size() != passages)
            throw std::invalid_argument("a token's attention mass has " +
                                        std::to_string(row.size()) + " entries for " +
                                        std::to_string(passages) + " passages");
        for (size_t i = 0; i < passages; ++i)
            sum[i] += row[i];
    }
    const double total = std::accumulate(sum.begin(), sum.end(), 0.0);
    for (auto& s : sum)
        s = total > 0 ? s / total : 0.0;
    return sum;
}

std::string source_excerpt(const std::string& text, int64_t char_begin, int64_t char_end,
                           size_t max_bytes) {
    const auto size = static_cast<int64_t>(text.size());
    char_begin = std::clamp<int64_t>(char_begin, 0, size);
    char_end = std::clamp<int64_t>(char_end, char_begin, size);
    std::string out;
    bool space = false;
    for (int64_t i = char_begin; i < char_end; ++i) {
        const char c = text[static_cast<size_t>(i)];
        if (is_space(c)) {
            space = !out.empty();
            continue;
        }
        if (space)
            out += ' ';
        space = false;
        out += c;
    }
    if (out.size() <= max_bytes)
        return out;
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80)
        --cut; // not inside a character
    out.resize(cut);
    while (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out + "\xE2\x80\xA6";
}

const SourceAnchor* anchor_covering(const std::vector<SourceAnchor>& offset_map, int64_t offset) {
    if (offset_map.empty())
        return nullptr;
    auto it =
        std::upper_bound(offset_map.begin(), offset_map.end(), offset,
                         [](int64_t off, const SourceAnchor& a) { return off < a.text_offset; });
    return it == offset_map.begin() ? &offset_map.front() : &*(it - 1);
}

std::vector<SourceRecord>
top_sources(const std::vector<SourcePassage>& passages, const std::vector<double>& shares,
            size_t top, const std::function<const std::string&(int64_t)>& text_of,
            const std::function<const std::vector<SourceAnchor>&(int64_t)>& offset_map_of,
            size_t excerpt_bytes) {
    std::vector<size_t> order(std::min(passages.size(), shares.size()));
    std::iota(order.begin(), order.end(), size_t{0});
    // The top `top` only, share descending, ties in context order.
    const auto k = std::min(top, order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](size_t a, size_t b) {
                          return shares[a] > shares[b] || (shares[a] == shares[b] && a < b);
                      });
    order.resize(k);
    std::vector<SourceRecord> out;
    for (const size_t i : order) {
        if (out.size() >= top || !(shares[i] > 0))
            break;
        const auto& p = passages[i];
        SourceRecord r;
        r.document_id = p.document_id;
        r.start_char = p.char_begin;
        r.end_char = p.char_end;
        r.share = std::clamp(shares[i], 0.0, 1.0);
        r.excerpt = source_excerpt(text_of(p.document_id), p.char_begin, p.char_end, excerpt_bytes);
        if (const auto* a = anchor_covering(offset_map_of(p.document_id), p.char_begin)) {
            r.page = a->page;
            r.line = a->line;
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<std::vector<SourceRecord>>
token_sources(const std::vector<SourcePassage>& passages,
              const std::vector<std::vector<float>>& mass, size_t top,
              const std::function<const std::string&(int64_t)>& text_of,
              const std::function<const std::vector<SourceAnchor>&(int64_t)>& offset_map_of,
              size_t excerpt_bytes) {
    std::vector<std::vector<SourceRecord>> out;
    out.reserve(mass.size());
    for (const auto& row : mass)
        out.push_back(top_sources(passages, passage_shares({row}, passages.size()), top, text_of,
                                  offset_map_of, excerpt_bytes));
    return out;
}

std::string source_place(const std::string& name, const std::string& format, int32_t page,
                         int32_t line) {
    if (page > 0)
        return name + ", page " + std::to_string(page);
    if (line > 0 && (format == "docx" || format == "odt"))
        return name + ", paragraph " + std::to_string(line);
    if (line > 0 && format != "epub")
        return name + ", line " + std::to_string(line);
    return name;
}

std::string source_citation(const SourceRecord& source, const std::string& place) {
    const double percent = source.share * 100.0;
    const std::string share =
        percent < 0.5 ? "<1%" : std::to_string(static_cast<int>(std::lround(percent))) + "%";
    return place + " (" + share + "): " + source.excerpt;
}

} // namespace spanscope
