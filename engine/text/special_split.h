// Cutting text at the special pieces of a vocabulary (control and user-defined tokens) before
// the tokenizer's own algorithm runs, as llama.cpp's tokenizer_st_partition does: the pieces are
// tried longest first, each splitting every remaining text fragment at all its occurrences, left
// to right. Shared by the SentencePiece (tokenizer.cpp) and byte-level BPE (bpe_tokenizer.cpp)
// tokenizers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace spanscope {

/// A run of the text: bytes [begin, begin + len) of it, either a special piece's token `id`
/// or, with id -1, text for the tokenizer's algorithm.
struct TextFragment {
    size_t begin = 0, len = 0;
    int32_t id = -1;
};

/// The fragments of `text` in order, covering it without gaps (none for an empty text).
/// `specials`: pieces with `text` (std::string), `id` and `always` (matched even without
/// parse_special: the user-defined ones), longest text first; with parse_special every piece
/// is matched, otherwise only the `always` ones.
template <class Piece>
std::vector<TextFragment>
split_at_specials(std::string_view text, const std::vector<Piece>& specials, bool parse_special) {
    std::vector<TextFragment> frags;
    if (!text.empty())
        frags.push_back({0, text.size(), -1});
    for (const auto& sp : specials) {
        if (!sp.always && !parse_special)
            continue;
        std::vector<TextFragment> next;
        bool changed = false;
        for (const auto& f : frags) {
            if (f.id >= 0) {
                next.push_back(f);
                continue;
            }
            size_t at = f.begin;
            const size_t end = f.begin + f.len;
            for (;;) {
                const size_t hit = text.substr(0, end).find(sp.text, at);
                if (hit == std::string_view::npos)
                    break;
                if (hit > at)
                    next.push_back({at, hit - at, -1});
                next.push_back({hit, sp.text.size(), sp.id});
                at = hit + sp.text.size();
                changed = true;
            }
            if (at < end)
                next.push_back({at, end - at, -1});
        }
        if (changed)
            frags.swap(next);
    }
    return frags;
}

} // namespace spanscope
