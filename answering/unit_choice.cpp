#include "answering/unit_choice.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

// Adds 1 / (kRrfK + rank) to fused[i] for the candidates that have a score, ranked by `better`.
template <class Get, class Better>
void add_ranking(const std::vector<UnitCandidate>& c, std::vector<double>& fused, Get get,
                 Better better) {
    std::vector<size_t> order;
    for (size_t i = 0; i < c.size(); ++i)
        if (get(c[i]))
            order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return better(*get(c[a]), *get(c[b])); });
    for (size_t r = 0; r < order.size(); ++r)
        fused[order[r]] += 1.0 / (kRrfK + static_cast<double>(r + 1));
}

} // namespace

UnitChoice choose_units(const std::vector<UnitCandidate>& candidates, int64_t budget) {
    int64_t total = 0;
    for (const auto& c : candidates) {
        if (c.tokens < 0)
            throw std::invalid_argument("unit " + std::to_string(c.unit) + " of document " +
                                        std::to_string(c.document_id) +
                                        " has a negative token count");
        total += c.tokens;
    }
    UnitChoice out;
    if (total <= budget) {
        for (const auto& c : candidates)
            out.chosen.push_back({c, 0, 0.0});
        return out;
    }
    out.ranked = true;
    std::vector<double> by_text(candidates.size(), 0.0);
    add_ranking(
        candidates, by_text, [](const UnitCandidate& c) { return c.bm25; },
        [](double a, double b) { return a < b; });
    std::vector<double> fused = by_text;
    add_ranking(
        candidates, fused, [](const UnitCandidate& c) { return c.sekv; },
        [](double a, double b) { return a > b; });
    // A section whose SEKV summaries are not stored yet (never prefilled under this model) has no
    // SEKV rank; scoring it 0 there would put it below every section that has one, however well
    // its text matches. Its bm25 term stands in for the missing one.
    const bool by_sekv = std::any_of(candidates.begin(), candidates.end(),
                                     [](const UnitCandidate& c) { return c.sekv.has_value(); });
    for (size_t i = 0; by_sekv && i < candidates.size(); ++i)
        if (!candidates[i].sekv)
            fused[i] += by_text[i];
    std::vector<size_t> order(candidates.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return fused[a] > fused[b]; });
    std::vector<int> rank(candidates.size(), 0);
    std::vector<bool> take(candidates.size(), false);
    int64_t used = 0;
    for (size_t r = 0; r < order.size(); ++r) {
        const size_t i = order[r];
        rank[i] = static_cast<int>(r + 1);
        if (used + candidates[i].tokens <= budget) {
            take[i] = true;
            used += candidates[i].tokens;
        }
    }
    for (size_t i = 0; i < candidates.size(); ++i)
        if (take[i])
            out.chosen.push_back({candidates[i], rank[i], fused[i]});
    out.left_out = static_cast<int>(candidates.size() - out.chosen.size());
    return out;
}

std::string sections_text(const std::vector<ChosenUnit>& units,
                          const std::function<std::string(int64_t)>& label) {
    std::string s;
    for (size_t i = 0; i < units.size();) {
        size_t j = i;
        while (j < units.size() && units[j].document_id == units[i].document_id)
            ++j;
        s += (i == 0 ? "" : ", ") + label(units[i].document_id) +
             (j - i == 1 ? " (section " : " (sections ");
        for (size_t k = i; k < j; ++k)
            s += (k == i ? "" : ", ") + std::to_string(units[k].unit + 1);
        s += ")";
        i = j;
    }
    return s;
}

} // namespace spanscope
