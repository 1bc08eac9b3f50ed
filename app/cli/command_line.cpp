// parse_command_line (commands.h): the command-line parsing both programs share.
#include "app/cli/commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

namespace spanscope::cli {

std::optional<int>
parse_command_line(CLI::App& app, int argc, char** argv, const std::string& program,
                   const std::function<std::optional<std::string>(const CLI::ParseError&)>& hint) {
    if (argc < 2) {
        std::cout << app.help();
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        if (hint)
            if (const auto line = hint(e)) {
                std::cerr << program << ": " << *line << "\n";
                return 2;
            }
        std::cerr << program << ": " << e.what() << " (see --help)\n";
        return 2;
    }
    return std::nullopt;
}

} // namespace spanscope::cli
