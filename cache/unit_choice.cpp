#include "unit_choice.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace spanscope {

namespace {
std::set<std::string> words(const std::string& text) {
    std::set<std::string> out;
    std::string w;
    for (const char ch : text + " ") {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c >= 0x80) {
            w += static_cast<char>(std::tolower(c));
        } else {
            if (w.size() >= 4)
                out.insert(w);
            w.clear();
        }
    }
    return out;
}
} // namespace

std::vector<ChosenUnit>
choose_units(const std::vector<std::pair<int64_t, std::vector<DocumentUnit>>>& docs,
             const std::vector<std::string>& texts, const std::string& question, int64_t budget,
             int* skipped) {
    std::vector<ChosenUnit> all;
    std::vector<double> score;
    const auto q = words(question);
    int64_t total = 0;
    for (size_t d = 0; d < docs.size(); ++d)
        for (const auto& u : docs[d].second) {
            all.push_back({docs[d].first, u.index, u.n_tokens()});
            total += u.n_tokens();
            const auto w = words(texts[d].substr(static_cast<size_t>(u.char_begin),
                                                 static_cast<size_t>(u.char_end - u.char_begin)));
            int common = 0;
            for (const auto& x : q)
                common += w.count(x) ? 1 : 0;
            score.push_back(common);
        }
    if (skipped)
        *skipped = 0;
    if (total <= budget)
        return all;
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<bool> take(all.size(), false);
    int64_t used = 0;
    for (const size_t i : order)
        if (used + all[i].tokens <= budget) {
            take[i] = true;
            used += all[i].tokens;
        }
    std::vector<ChosenUnit> out;
    for (size_t i = 0; i < all.size(); ++i)
        if (take[i])
            out.push_back(all[i]);
    if (skipped)
        *skipped = static_cast<int>(all.size() - out.size());
    return out;
}

} // namespace spanscope
