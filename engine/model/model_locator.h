// Where the model file is found: --model, then $SPANSCOPE_MODEL, then the XDG data directory
// ($XDG_DATA_HOME or ~/.local/share, then each of $XDG_DATA_DIRS or /usr/local/share:/usr/share)
// under spanscope/models/gemma-3-270m-q4_k_m.gguf.
#pragma once

#include <string>
#include <vector>

namespace spanscope {

inline constexpr const char* kDefaultModelName = "gemma-3-270m-q4_k_m.gguf";

struct ModelLocation {
    std::string path;                  ///< empty when nothing was found
    std::string source;                ///< "--model", "SPANSCOPE_MODEL", "XDG data dir"
    std::vector<std::string> searched; ///< every place looked at, in order
};

/// The XDG data directories, in the order data is looked for: $XDG_DATA_HOME (or
/// ~/.local/share), then each of $XDG_DATA_DIRS (or /usr/local/share, /usr/share).
std::vector<std::string> xdg_data_dirs();

/// Resolve the model path. An explicit path (from --model, or $SPANSCOPE_MODEL when set) is
/// returned as is, even if it does not exist (opening it then gives the error). Never throws.
ModelLocation locate_model(const std::string& explicit_path);

/// A multi-line message telling the user how to install the default model.
std::string missing_model_message(const ModelLocation& where);

} // namespace spanscope
