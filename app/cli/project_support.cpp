#include "app/cli/project_support.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <set>

namespace spanscope::cli {

std::atomic<bool> g_interrupted{false};

namespace {
std::atomic<int> g_signal{0};
extern "C" void on_interrupt(int sig) {
    g_signal.store(sig);
    g_interrupted.store(true);
}

} // namespace

void install_interrupt_handler() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int interrupted_exit_code() {
    const int sig = g_signal.load();
    return 128 + (sig ? sig : SIGINT);
}

std::string human_bytes(int64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = static_cast<double>(bytes);
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

int64_t parse_bytes(const std::string& text) {
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        throw std::invalid_argument("not a size: '" + text + "' (e.g. 500M, 2G, 1073741824)");
    }
    std::string suffix = text.substr(used);
    for (auto& c : suffix)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double mult = 1;
    if (suffix == "" || suffix == "B")
        mult = 1;
    else if (suffix == "K" || suffix == "KB" || suffix == "KIB")
        mult = 1024.0;
    else if (suffix == "M" || suffix == "MB" || suffix == "MIB")
        mult = 1024.0 * 1024;
    else if (suffix == "G" || suffix == "GB" || suffix == "GIB")
        mult = 1024.0 * 1024 * 1024;
    else
        throw std::invalid_argument("unknown size unit in '" + text + "' (use K, M or G)");
    if (!(v >= 0) || v * mult > 9e18)
        throw std::invalid_argument("size out of range: '" + text + "'");
    return static_cast<int64_t>(std::llround(v * mult));
}

namespace {
bool g_progress_open = false; // a progress line without its newline is on a terminal
int64_t g_last_chunk = -1;
} // namespace

void print_ingest_progress(const IngestProgress& p) {
    static const bool tty = isatty(STDERR_FILENO) != 0;
    // Into a file or pipe: one line per stored chunk, not one per ubatch.
    if (!tty && p.chunk == g_last_chunk)
        return;
    g_last_chunk = p.chunk;
    char section[48] = "";
    if (p.units > 1)
        std::snprintf(section, sizeof section, " (section %d of %d)", p.unit + 1, p.units);
    // Before the first ubatch is timed there is no rate to show (not "0 tokens/s, 0 s left").
    char rate[64] = ", rate not measured yet";
    if (p.tokens_per_s > 0)
        std::snprintf(rate, sizeof rate, ", %.0f tokens/s, %.0f s left", p.tokens_per_s,
                      p.seconds_left);
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s: %lld of %lld chunks stored%s, %lld of %lld tokens to "
                  "compute done%s",
                  p.name.c_str(), static_cast<long long>(p.chunk), static_cast<long long>(p.chunks),
                  section, static_cast<long long>(p.tokens_done),
                  static_cast<long long>(p.tokens_to_do), rate);
    if (tty) {
        show_progress_line(line);
    } else {
        std::cerr << line << "\n";
    }
}

LoadOptions cli_load_options(const std::string& name) {
    LoadOptions options;
    options.cancel = &g_interrupted;
    options.on_ocr_page = [name](int page, int pages) {
        const std::string line = name + ": reading page " + std::to_string(page) + " of " +
                                 std::to_string(pages) + " by OCR (pages without a text layer)";
        if (isatty(STDERR_FILENO))
            show_progress_line(line);
        else
            std::cerr << line << "\n";
    };
    return options;
}

void show_progress_line(const std::string& line) {
    std::cerr << "\r\033[K" << line << std::flush;
    g_progress_open = true;
}

void clear_progress_line() {
    if (g_progress_open)
        std::cerr << "\r\033[K" << std::flush;
    g_progress_open = false;
    g_last_chunk = -1;
}

void end_progress_line() {
    if (g_progress_open)
        std::cerr << "\n";
    g_progress_open = false;
    g_last_chunk = -1;
}

} // namespace spanscope::cli
