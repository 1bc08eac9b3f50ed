#include "test_support.h"

#include "model_locator.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace spanscope::test {

std::string data_dir() {
    return SPANSCOPE_TEST_DATA;
}

std::optional<std::string> real_model_path() {
    auto found = locate_model("");
    if (found.path.empty())
        return std::nullopt;
    return found.path;
}

std::string temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "spanscope-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
        throw std::runtime_error("mkdtemp failed");
    return tmpl;
}

} // namespace spanscope::test
