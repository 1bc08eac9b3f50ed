#include "engine/sekv/zoom_locator.h"

#include "engine/model/model_locator.h"
#include "engine/sekv/sekv_routing.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

// Set by engine/CMakeLists.txt for this file.
#ifndef SPANSCOPE_ZOOM_INSTALL_DIR
#define SPANSCOPE_ZOOM_INSTALL_DIR ""
#endif
#ifndef SPANSCOPE_ZOOM_SOURCE_DIR
#define SPANSCOPE_ZOOM_SOURCE_DIR ""
#endif

namespace spanscope {
namespace fs = std::filesystem;

std::string zoom_file_name(const std::string& model_path) {
    std::string name = fs::path(model_path).filename().string();
    constexpr std::string_view ext = ".gguf";
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
        name.resize(name.size() - ext.size());
    return name + ".zoom.gguf";
}

std::vector<std::string> zoom_search_paths(const std::string& model_path) {
    const std::string name = zoom_file_name(model_path);
    std::vector<std::string> dirs;
    for (const auto& d : xdg_data_dirs())
        dirs.push_back(d + "/spanscope/zoom");
    for (const char* d : {SPANSCOPE_ZOOM_INSTALL_DIR, SPANSCOPE_ZOOM_SOURCE_DIR})
        if (*d)
            dirs.emplace_back(d);
    std::vector<std::string> out;
    for (const auto& d : dirs) {
        std::string p = (fs::path(d) / name).lexically_normal().string();
        if (std::find(out.begin(), out.end(), p) == out.end())
            out.push_back(std::move(p));
    }
    return out;
}

RouterChoice choose_router(const std::string& requested, const std::string& zoom_path,
                           const std::string& model_path, const std::string& fingerprint) {
    if (!requested.empty() && requested != kRouterTrained && requested != kRouterTrainingFree &&
        requested != kRouterOracle)
        throw std::invalid_argument("unknown router '" + requested + "' (expected " +
                                    kRouterTrained + ", " + kRouterTrainingFree + " or " +
                                    kRouterOracle + ")");
    RouterChoice c;
    if (requested == kRouterTrainingFree || requested == kRouterOracle) {
        if (!zoom_path.empty())
            throw std::invalid_argument("a zoom parameter file (" + zoom_path +
                                        ") is for the trained router, not " + requested);
        c.mode = requested;
        return c;
    }
    const std::string model = fs::path(model_path).filename().string();
    if (!zoom_path.empty()) { // chosen: it must be usable, whatever the mode asked
        c.params =
            std::make_shared<const ZoomParams>(load_zoom_params(zoom_path, fingerprint, model));
        c.mode = kRouterTrained;
        c.path = zoom_path;
        return c;
    }
    const auto paths = zoom_search_paths(model_path);
    for (const auto& p : paths) {
        std::error_code ec;
        if (!fs::exists(p, ec))
            continue;
        try {
            c.params = std::make_shared<const ZoomParams>(load_zoom_params(p, fingerprint, model));
            c.mode = kRouterTrained;
            c.path = p;
            return c;
        } catch (const ZoomParamsError& e) {
            c.notes.push_back(std::string(e.what()) + "; passed over");
        }
    }
    if (requested == kRouterTrained) {
        std::string msg = "the trained router needs a zoom parameter file for " + model +
                          " (fingerprint " + fingerprint + "); none was found (looked for";
        for (size_t i = 0; i < paths.size(); ++i)
            msg += (i ? ", " : " ") + paths[i];
        msg += ")";
        for (const auto& n : c.notes)
            msg += ". " + n;
        msg += ". Give a parameter file, or use the training-free router.";
        throw ZoomParamsError(msg);
    }
    c.mode = kRouterTrainingFree;
    return c;
}

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
