// open_model (commands.h): the model a command names, or the installed default, with one-line
// errors. Shared by spanscope-cli and the lab's spanscope-lab.
#include "app/cli/commands.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"
#include "engine/model/model_locator.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace spanscope::cli {

std::unique_ptr<Model> open_model(const std::string& explicit_path, const std::string& backend) {
    const auto where = locate_model(explicit_path);
    if (where.path.empty())
        throw std::runtime_error(missing_model_message(where));
    const std::string from = where.source == "--model" ? "" : " (from " + where.source + ")";
    if (std::error_code ec; std::filesystem::is_directory(where.path, ec))
        throw std::runtime_error("model " + where.path + from + " is a directory, not a GGUF file");
    try {
        return load_model(where.path, backend_from_name(backend));
    } catch (const BackendUnavailable& e) {
        throw std::runtime_error(e.what());
    } catch (const std::system_error& e) {
        // The reader's message repeats the path; the error code says what went wrong.
        throw std::runtime_error("cannot open model " + where.path + from + ": " +
                                 e.code().message());
    } catch (const GgufError& e) {
        // GgufError from open() already ends in "(file PATH)".
        throw std::runtime_error("invalid model file" + from + ": " + e.what());
    } catch (const ModelError& e) {
        throw std::runtime_error(unusable_model_message(where, e.what()));
    }
}

std::string unusable_model_message(const ModelLocation& where, const std::string& why) {
    const std::string from = where.source == "--model" ? "" : " (from " + where.source + ")";
    return "unusable model " + where.path + from + ": " + why;
}

} // namespace spanscope::cli
