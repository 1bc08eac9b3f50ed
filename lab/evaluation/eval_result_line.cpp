#include "lab/evaluation/eval_result_line.h"

#include "engine/sekv/sekv_routing.h"

#include <stdexcept>

namespace spanscope {

std::string result_line_tau(bool trained, const std::string& tau, const std::string& settings) {
    if (settings.find(kSettingsTauPerQuery) != std::string::npos)
        return kTauPerQuery;
    if (!tau.empty())
        return tau;
    return trained ? kTauUnrecorded : "";
}

bool result_line_full_rank(const std::string& rank_gate, const std::string& settings) {
    return settings.find(kSettingsFullRank) != std::string::npos || rank_gate == kRankGateEnergy;
}

bool result_line_uniform_summary(const std::string& settings) {
    return settings.find(kSettingsUniformSummary) != std::string::npos;
}

int result_line_rerank(const std::string& settings) {
    const auto at = settings.find(kSettingsRerank);
    if (at == std::string::npos)
        return 0;
    const auto begin = at + std::char_traits<char>::length(kSettingsRerank);
    auto end = begin;
    while (end < settings.size() && end - begin < 3 && settings[end] >= '0' && settings[end] <= '9')
        ++end;
    const int n = end > begin ? std::stoi(settings.substr(begin, end - begin)) : 0;
    if (n < 2 || n > kMaxRerank || (end < settings.size() && settings[end] != ' '))
        throw std::invalid_argument("settings: \"" + settings.substr(at + 1) +
                                    "\" does not give two-stage routing's candidates per "
                                    "expanded span as a number in [2, 64]");
    return n;
}

} // namespace spanscope
