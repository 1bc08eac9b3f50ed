// Running the built spanscope-report from a test: a fixture with a fresh temporary folder, a
// run without a display that captures the exit status, stdout and stderr. Shared by the report
// tests (test_report.cpp, test_report_curves.cpp); SPANSCOPE_REPORT is the program's path.
#pragma once

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace report_test {

namespace fs = std::filesystem;

/// What a run of the program gave: its exit status and what it wrote.
struct ProgramRun {
    int status = -1;
    std::string out, err;
};

inline std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::string quote(const std::string& s) {
    std::string r = "'";
    for (char c : s)
        r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
}

class ReportProgram : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "spanscope-report-test.XXXXXX").string();
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { fs::remove_all(dir_); }

    fs::path write(const std::string& name, const std::string& text) {
        const fs::path p = dir_ / name;
        std::ofstream(p, std::ios::binary) << text;
        return p;
    }

    /// Runs spanscope-report without a display (DISPLAY and WAYLAND_DISPLAY unset).
    ProgramRun run(const std::vector<std::string>& args) {
        const fs::path out = dir_ / "stdout.txt", err = dir_ / "stderr.txt";
        std::vector<std::string> words = {"env",           "-u", "DISPLAY", "-u", "WAYLAND_DISPLAY",
                                          SPANSCOPE_REPORT};
        words.insert(words.end(), args.begin(), args.end());
        std::string cmd;
        for (const auto& w : words)
            cmd.append(quote(w)).append(" ");
        cmd.append(">").append(quote(out.string())).append(" 2>").append(quote(err.string()));
        ProgramRun r;
        const int rc = std::system(cmd.c_str());
        r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
        r.out = slurp(out);
        r.err = slurp(err);
        return r;
    }

    fs::path dir_;
};

/// Lines of text.
inline int line_count(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

} // namespace report_test
