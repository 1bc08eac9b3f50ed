#include "project_support.h"

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

std::set<std::string> words(const std::string& text) {
    std::set<std::string> out;
    std::string w;
    for (const char ch : text + " ") {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c >= 0x80) {
            w += static_cast<char>(std::tolower(c));
        } else {
            if (w.size() >= 4)
                out.insert(w);
            w.clear();
        }
    }
    return out;
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

int64_t project_chunk_tokens(Project& project) {
    auto q = project.db().prepare("SELECT value FROM settings WHERE key = 'chunk_tokens'");
    if (!q.step())
        return 1024;
    const std::string v = q.text(0);
    try {
        const long long n = std::stoll(v);
        if (n >= 16 && n <= 8192)
            return n;
    } catch (const std::exception&) {
    }
    std::cerr << "note: " << project.path() << " has an unusable chunk_tokens setting ('" << v
              << "'); using 1024\n";
    return 1024;
}

void set_project_chunk_tokens(Project& project, int64_t tokens) {
    project.db()
        .prepare("INSERT OR REPLACE INTO settings(key, value) VALUES ('chunk_tokens', ?)")
        .bind(1, std::to_string(tokens))
        .run();
}

ChunkingOptions chunking_for(Project& project, const Model& model) {
    ChunkingOptions o;
    o.target_tokens = project_chunk_tokens(project);
    const int64_t ctx = model.info().n_ctx_train;
    o.max_unit_tokens = ctx - std::min<int64_t>(1024, ctx / 4);
    o.instruction_tuned = model.info().instruction_tuned;
    return o;
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
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s: %lld of %lld chunks stored%s, %lld of %lld tokens to compute done, "
                  "%.0f tokens/s, %.0f s left",
                  p.name.c_str(), static_cast<long long>(p.chunk), static_cast<long long>(p.chunks),
                  section, static_cast<long long>(p.tokens_done),
                  static_cast<long long>(p.tokens_to_do), p.tokens_per_s, p.seconds_left);
    if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
        g_progress_open = true;
    } else {
        std::cerr << line << "\n";
    }
}

void end_progress_line() {
    if (g_progress_open)
        std::cerr << "\n";
    g_progress_open = false;
    g_last_chunk = -1;
}

std::vector<ChosenUnit>
choose_units(const std::vector<std::pair<int64_t, std::vector<DocumentUnit>>>& docs,
             const std::vector<std::string>& texts, const std::string& question, int64_t budget,
             int* skipped) {
    std::vector<ChosenUnit> all;
    std::vector<double> score;
    const auto q = words(question);
    int64_t total = 0;
    for (size_t d = 0; d < docs.size(); ++d)
        for (const auto& u : docs[d].second) {
            all.push_back({docs[d].first, u.index, u.n_tokens()});
            total += u.n_tokens();
            const auto w = words(texts[d].substr(static_cast<size_t>(u.char_begin),
                                                 static_cast<size_t>(u.char_end - u.char_begin)));
            int common = 0;
            for (const auto& x : q)
                common += w.count(x) ? 1 : 0;
            score.push_back(common);
        }
    if (skipped)
        *skipped = 0;
    if (total <= budget)
        return all;
    std::vector<size_t> order(all.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<bool> take(all.size(), false);
    int64_t used = 0;
    for (const size_t i : order)
        if (used + all[i].tokens <= budget) {
            take[i] = true;
            used += all[i].tokens;
        }
    std::vector<ChosenUnit> out;
    for (size_t i = 0; i < all.size(); ++i)
        if (take[i])
            out.push_back(all[i]);
    if (skipped)
        *skipped = static_cast<int>(all.size() - out.size());
    return out;
}

} // namespace spanscope::cli
