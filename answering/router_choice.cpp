#include "answering/router_choice.h"

#include "engine/model/model_locator.h"
#include "engine/sekv/sekv_routing.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

// Set by answering/CMakeLists.txt for this file.
#ifndef SPANSCOPE_ZOOM_INSTALL_DIR
#define SPANSCOPE_ZOOM_INSTALL_DIR ""
#endif
#ifndef SPANSCOPE_ZOOM_SOURCE_DIR
#define SPANSCOPE_ZOOM_SOURCE_DIR ""
#endif

namespace spanscope {
namespace fs = std::filesystem;

std::string router_file_name(const std::string& model_path) {
    std::string name = fs::path(model_path).filename().string();
    constexpr std::string_view ext = ".gguf";
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
        name.resize(name.size() - ext.size());
    return name + ".zoom.gguf";
}

std::vector<std::string> router_search_paths(const std::string& model_path) {
    const std::string name = router_file_name(model_path);
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

RouterChoice choose_router(const std::string& requested, const std::string& params_path,
                           const std::string& model_path, const std::string& fingerprint) {
    if (!requested.empty() && requested != kRouterTrained && requested != kRouterTrainingFree &&
        requested != kRouterOracle)
        throw std::invalid_argument("unknown router '" + requested + "' (expected " +
                                    kRouterTrained + ", " + kRouterTrainingFree + " or " +
                                    kRouterOracle + ")");
    RouterChoice c;
    if (requested == kRouterTrainingFree || requested == kRouterOracle) {
        if (!params_path.empty())
            throw std::invalid_argument("a zoom parameter file (" + params_path +
                                        ") is for the trained router, not " + requested);
        c.mode = requested;
        return c;
    }
    const std::string model = fs::path(model_path).filename().string();
    if (!params_path.empty()) { // chosen: it must be usable, whatever the mode asked
        c.params = std::make_shared<const RouterParams>(
            load_router_params(params_path, fingerprint, model));
        c.mode = kRouterTrained;
        c.path = params_path;
        return c;
    }
    const auto paths = router_search_paths(model_path);
    for (const auto& p : paths) {
        std::error_code ec;
        if (!fs::exists(p, ec))
            continue;
        try {
            c.params =
                std::make_shared<const RouterParams>(load_router_params(p, fingerprint, model));
            c.mode = kRouterTrained;
            c.path = p;
            return c;
        } catch (const RouterParamsError& e) {
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
        throw RouterParamsError(msg);
    }
    c.mode = kRouterTrainingFree;
    return c;
}

} // namespace spanscope
