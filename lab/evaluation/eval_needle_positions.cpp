#include "lab/evaluation/eval_needle_positions.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace spanscope::eval {

std::optional<ByteRange> asked_needle_bytes(const EvalSample& s) {
    if (s.task.rfind("niah", 0) != 0 || !s.meta.contains("needles") || s.meta["needles"].empty())
        return std::nullopt;
    size_t asked = 0;
    if (s.meta.contains("asked") && !s.meta["asked"].empty())
        asked = s.meta["asked"][0].get<size_t>();
    const auto text = s.meta["needles"].at(asked).get<std::string>();
    const size_t at = s.context.find(text);
    if (at == std::string::npos)
        throw std::logic_error(s.task + ": the asked needle \"" + text +
                               "\" is not in the context");
    return ByteRange{static_cast<int64_t>(at), static_cast<int64_t>(at + text.size())};
}

TokenSpan text_positions(const std::vector<DocumentUnit>& units, const ByteRange& bytes) {
    int64_t first = std::numeric_limits<int64_t>::max(), last = -1;
    int64_t offset = 0; // where the unit starts in the session
    for (const auto& u : units) {
        for (const auto& c : u.chunks) {
            const size_t n = c.tokens.size();
            for (size_t i = 0; i < n; ++i) {
                const int64_t b = c.token_chars[i];
                if (b < 0)
                    continue; // BOS, header, trailer
                int64_t e = c.char_end;
                for (size_t k = i + 1; k < n; ++k)
                    if (c.token_chars[k] >= 0) {
                        e = c.token_chars[k];
                        break;
                    }
                // A token of no bytes of its own (the rest of a character split over tokens)
                // counts as holding its first byte.
                if (b < bytes.end && std::max(e, b + 1) > bytes.begin) {
                    const int64_t pos = offset + c.token_begin + static_cast<int64_t>(i);
                    first = std::min(first, pos);
                    last = std::max(last, pos);
                }
            }
        }
        offset += u.n_tokens();
    }
    if (last < 0)
        throw std::invalid_argument("no token holds bytes [" + std::to_string(bytes.begin) + ", " +
                                    std::to_string(bytes.end) + ") of the text");
    return TokenSpan{first, last + 1};
}

} // namespace spanscope::eval
