// Running spanscope-cli from a test: the command line quoted for the shell, an environment set
// before it (`env` assignments such as "HOME=/tmp/x", or "-u NAME"), stdout and stderr captured
// through files in a folder of the test. Shared by the CLI tests.
#pragma once

#include "test_support.h"

#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace spanscope::test {

/// The exit status (-1 when the process did not exit) and what it printed.
struct CliRun {
    int status = -1;
    std::string out, err;
};

/// s in single quotes for /bin/sh (a quote inside becomes '\'').
inline std::string shell_quote(const std::string& s) {
    std::string r = "'";
    for (const char c : s) {
        if (c == '\'')
            r += "'\\''";
        else
            r += c;
    }
    return r + "'";
}

/// Run `env ENV... SPANSCOPE_CLI ARGS...` with stdout and stderr in dir/out and dir/err.
inline CliRun run_cli(const std::string& dir, const std::vector<std::string>& env,
                      const std::vector<std::string>& args) {
    // (appended piecewise: gcc 12 warns falsely on "literal" + std::string&&)
    std::string cmd = "env";
    for (const auto& e : env) {
        cmd += " ";
        cmd += e.rfind("-u ", 0) == 0 ? e : shell_quote(e);
    }
    cmd += " ";
    cmd += shell_quote(SPANSCOPE_CLI);
    for (const auto& a : args) {
        cmd += " ";
        cmd += shell_quote(a);
    }
    cmd += " >";
    cmd += shell_quote(dir + "/out");
    cmd += " 2>";
    cmd += shell_quote(dir + "/err");
    CliRun r;
    const int st = std::system(cmd.c_str());
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = read_file(dir + "/out");
    r.err = read_file(dir + "/err");
    return r;
}

} // namespace spanscope::test
