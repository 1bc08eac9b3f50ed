#include "lab/evaluation/eval_zoom_measures.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace spanscope::eval {

namespace {

void check_span_id(int32_t id, int n_spans) {
    if (id < 0 || id >= n_spans)
        throw std::invalid_argument("zoom trace: span " + std::to_string(id) + " outside [0, " +
                                    std::to_string(n_spans) + ")");
}

} // namespace

std::optional<double> median(std::vector<double> values) {
    if (values.empty())
        return std::nullopt;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::optional<double> expanded_share_median(const ZoomTrace& trace) {
    if (trace.n_spans < 1)
        return std::nullopt;
    std::vector<double> shares;
    std::vector<char> seen(static_cast<size_t>(trace.n_spans));
    for (const auto& step : trace.steps)
        for (const auto& layer : step.layers) {
            std::fill(seen.begin(), seen.end(), char{0});
            int64_t distinct = 0;
            for (const auto& head : layer.heads)
                for (const int32_t s : head.spans) {
                    check_span_id(s, trace.n_spans);
                    distinct += !seen[static_cast<size_t>(s)];
                    seen[static_cast<size_t>(s)] = 1;
                }
            shares.push_back(static_cast<double>(distinct) / static_cast<double>(trace.n_spans));
        }
    return median(std::move(shares));
}

std::vector<double> span_mass_totals(const ZoomTrace& trace) {
    std::vector<double> total(static_cast<size_t>(std::max(0, trace.n_spans)), 0.0);
    bool measured = false;
    for (const auto& step : trace.steps)
        for (const auto& layer : step.layers)
            for (const auto& head : layer.heads) {
                if (head.mass.empty())
                    continue;
                if (head.mass.size() != head.spans.size())
                    throw std::invalid_argument("zoom trace: layer " + std::to_string(layer.layer) +
                                                " has a mass of " +
                                                std::to_string(head.mass.size()) + " values for " +
                                                std::to_string(head.spans.size()) + " spans");
                measured = true;
                for (size_t j = 0; j < head.spans.size(); ++j) {
                    check_span_id(head.spans[j], trace.n_spans);
                    total[static_cast<size_t>(head.spans[j])] += head.mass[j];
                }
            }
    if (!measured)
        total.clear();
    return total;
}

NeedleMass needle_mass(const ZoomTrace& trace, const std::vector<TokenSpan>& spans,
                       const TokenSpan& needle) {
    if (!trace.steps.empty() && static_cast<size_t>(trace.n_spans) != spans.size())
        throw std::invalid_argument("zoom trace of " + std::to_string(trace.n_spans) +
                                    " spans for a context of " + std::to_string(spans.size()));
    NeedleMass m;
    m.tokens = std::max<int64_t>(0, needle.size());
    std::vector<size_t> overlapping;
    for (size_t i = 0; i < spans.size(); ++i) {
        const int64_t b = std::max(spans[i].begin, needle.begin);
        const int64_t e = std::min(spans[i].end, needle.end);
        if (e > b) {
            m.in_spans += e - b;
            overlapping.push_back(i);
        }
    }
    if (m.in_spans == 0)
        return m;
    const auto total = span_mass_totals(trace);
    if (total.empty())
        return m; // no mass measured (the GPU backend): rank and top3 unknown
    for (const size_t i : overlapping) {
        const double own = total[i];
        const auto rank = static_cast<int64_t>(
            std::count_if(total.begin(), total.end(), [&](double x) { return x >= own; }));
        m.rank = m.rank ? std::min(*m.rank, rank) : rank;
    }
    m.top3 = m.rank && *m.rank <= 3;
    return m;
}

nlohmann::json to_json(const NeedleMass& m) {
    nlohmann::json j{{"tokens", m.tokens}, {"in_spans", m.in_spans}};
    j["rank"] = m.rank ? nlohmann::json(*m.rank) : nlohmann::json(nullptr);
    j["top3"] = m.top3 ? nlohmann::json(*m.top3) : nlohmann::json(nullptr);
    return j;
}

void put_zoom_measures(nlohmann::json& line, const ZoomTrace& trace,
                       const std::vector<TokenSpan>& spans,
                       const std::optional<TokenSpan>& needle) {
    if (const auto share = expanded_share_median(trace))
        line["expanded_share_median"] = *share;
    if (needle)
        line["needle_mass"] = to_json(needle_mass(trace, spans, *needle));
}

} // namespace spanscope::eval
