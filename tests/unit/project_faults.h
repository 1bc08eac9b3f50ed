// What the tests of a project under faults share: spanscope-cli started as a child process with
// limits set between fork and exec (a file size limit with SIGXFSZ ignored, so that write()
// fails with EFBIG; another user id, for permission checks that root would pass), a private
// mount namespace for small filesystems, a file size limit on this process, and every committed
// row of a project read back for byte comparison.
#pragma once

#include "kill_support.h"
#include "storage/sqlite_db.h"
#include "test_support.h"
#include "tiny_model.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace spanscope::test {

/// How the child runs: limits and identity set in it before exec.
struct ChildSetup {
    int64_t file_size_limit = -1; ///< RLIMIT_FSIZE in bytes (SIGXFSZ ignored); -1: none
    bool as_nobody = false;       ///< setgid/setuid 65534 (where this process may)
    std::vector<std::string> env; ///< NAME=value entries added to the environment
};

/// A child's exit code (128 + signal when killed) and what it printed.
struct ChildRun {
    int status = -1;
    std::string out, err;
};

/// Start spanscope-cli with `args`; stdout and stderr into out_path and err_path.
inline pid_t start_cli(const std::vector<std::string>& args, const std::string& out_path,
                       const std::string& err_path, const ChildSetup& setup = {}) {
    const ExecStrings argv(command_line(SPANSCOPE_CLI, args));
    auto env = environment_without({"SPANSCOPE_MODEL"});
    env.insert(env.end(), setup.env.begin(), setup.env.end());
    const ExecStrings envp(std::move(env));
    const pid_t pid = fork();
    if (pid < 0)
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) { // only async-signal-safe calls from here on
        // Opened close-on-exec: the program gets the copies at 0, 1 and 2 alone (dup2's copy
        // does not keep the flag; where open() returned the number itself, the flag is
        // cleared). Opened in this order, no descriptor is one an earlier dup2 replaced.
        const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        const int fds[3] = {in, out, err};
        for (int target = 0; target < 3; ++target)
            if (fds[target] == target ? fcntl(target, F_SETFD, 0) != 0
                                      : dup2(fds[target], target) != target)
                _exit(126);
        if (setup.as_nobody &&
            (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
            _exit(125);
        if (setup.file_size_limit >= 0) {
            signal(SIGXFSZ, SIG_IGN); // an ignored disposition survives exec
            const rlim_t l = static_cast<rlim_t>(setup.file_size_limit);
            const rlimit r{l, l};
            if (setrlimit(RLIMIT_FSIZE, &r) != 0)
                _exit(124);
        }
        execve(SPANSCOPE_CLI, argv.data(), envp.data());
        _exit(127);
    }
    return pid;
}

/// Reap the child started by start_cli and read what it printed.
inline ChildRun finish_cli(pid_t pid, const std::string& out_path, const std::string& err_path) {
    const int st = wait_status(pid);
    ChildRun r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    r.out = read_file(out_path);
    r.err = read_file(err_path);
    return r;
}

/// Run spanscope-cli to its end; its output goes through files in `dir`.
inline ChildRun run_cli_in(const std::string& dir, const std::vector<std::string>& args,
                           const ChildSetup& setup = {}) {
    return finish_cli(start_cli(args, dir + "/out", dir + "/err", setup), dir + "/out",
                      dir + "/err");
}

/// Move this process into a mount namespace of its own whose mounts are private, so that what
/// it mounts (a small tmpfs, a read-only bind mount) is its and its children's alone: "" when
/// done, else why not (for GTEST_SKIP).
inline std::string private_mount_namespace() {
    if (unshare(CLONE_NEWNS) != 0)
        return std::string("cannot make a private mount namespace (unshare: ") +
               std::strerror(errno) + ")";
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("cannot make the mounts private: ") + std::strerror(errno);
    return "";
}

/// The tiny model the fault tests' spanscope-cli runs load (context 2048, sliding window 16),
/// written at `path`; returns `path`.
inline std::string write_fault_model(const std::string& path) {
    TinyGemma3Config c;
    c.n_ctx = 2048;
    c.sliding_window = 16;
    write_tiny_gemma3(path, c);
    return path;
}

/// sample_prose(seed, min_bytes) written at `path`; returns `path`.
inline std::string write_prose(const std::string& path, uint32_t seed, size_t min_bytes) {
    std::ofstream(path, std::ios::binary) << sample_prose(seed, min_bytes);
    return path;
}

/// The chunk size of the fault tests' ingests, in tokens.
inline constexpr int kFaultChunkTokens = 32;

/// spanscope-cli's ingest of `doc` into `project` with `model`: one thread, kFaultChunkTokens.
inline std::vector<std::string> ingest_args(const std::string& project, const std::string& model,
                                            const std::string& doc) {
    const std::string chunk = std::to_string(kFaultChunkTokens);
    return {"ingest",    "--project", project,          "--model", model,
            "--threads", "1",         "--chunk-tokens", chunk,     doc};
}

/// Lines of `text` that are not progress lines ("N of M chunks stored") nor notes.
inline std::vector<std::string> message_lines(const std::string& text) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b < text.size()) {
        size_t e = text.find('\n', b);
        if (e == std::string::npos)
            e = text.size();
        const std::string line = text.substr(b, e - b);
        if (!line.empty() && line.find(" chunks stored") == std::string::npos &&
            line.rfind("note: ", 0) != 0)
            out.push_back(line);
        b = e + 1;
    }
    return out;
}

/// integrity_of() (kill_support.h) of the project at `project`, on a connection of its own that
/// waits up to 5 s for another program's write to end.
inline std::string integrity_of(const std::string& project) {
    Db db(project, /*create=*/false);
    sqlite3_busy_timeout(db.handle(), 5000);
    return integrity_of(db);
}

/// RLIMIT_FSIZE of this process at `bytes` while in scope (SIGXFSZ ignored: write() fails with
/// EFBIG instead of the signal killing the process).
struct FileSizeLimit {
    rlimit old{};
    explicit FileSizeLimit(int64_t bytes) {
        signal(SIGXFSZ, SIG_IGN);
        getrlimit(RLIMIT_FSIZE, &old);
        const rlimit r{static_cast<rlim_t>(bytes), old.rlim_max};
        setrlimit(RLIMIT_FSIZE, &r);
    }
    ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &old); }
    FileSizeLimit(const FileSizeLimit&) = delete;
    FileSizeLimit& operator=(const FileSizeLimit&) = delete;
};

/// The size of the file at `path` (0 when there is none).
inline int64_t file_bytes(const std::string& path) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path, ec);
    return ec ? 0 : static_cast<int64_t>(n);
}

/// Every row of the project's own tables (not SQLite's or the full-text index's internals),
/// each value as its bytes with its type, by table in rowid order: two projects with equal
/// dumps hold the same data byte for byte. Columns named in `skip` ("table.column") are left
/// out (the least-recently-used time that reading a state moves).
using ProjectDump = std::map<std::string, std::vector<std::string>>;
inline ProjectDump dump_project(const std::string& project,
                                const std::vector<std::string>& skip = {"chunk_states.last_used"}) {
    Db db(project, /*create=*/false);
    std::vector<std::string> tables;
    auto t = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                        "'sqlite_%' AND name NOT LIKE 'unit_text%' ORDER BY name");
    while (t.step())
        tables.push_back(t.text(0));
    ProjectDump out;
    for (const auto& name : tables) {
        // Each value as quote() writes it (blobs in hex, text quoted), reals with 17 digits.
        std::string cols = "quote(rowid)";
        auto info = db.prepare("SELECT name FROM pragma_table_info(?)");
        info.bind(1, name);
        while (info.step()) {
            if (std::find(skip.begin(), skip.end(), name + "." + info.text(0)) != skip.end())
                continue;
            std::string c = "\"";
            c += info.text(0);
            c += '"';
            cols += " || '|' || CASE typeof(" + c + ") WHEN 'real' THEN printf('%.17g', " + c +
                    ") ELSE quote(" + c + ") END";
        }
        auto q = db.prepare("SELECT " + cols + " FROM \"" + name + "\" ORDER BY rowid");
        auto& rows = out[name];
        while (q.step())
            rows.push_back(q.text(0));
    }
    return out;
}

/// The rows of `before` missing from `after` (changed or deleted), as "table: row" lines.
inline std::vector<std::string> rows_lost(const ProjectDump& before, const ProjectDump& after) {
    std::vector<std::string> lost;
    for (const auto& [table, rows] : before) {
        const auto it = after.find(table);
        for (const auto& r : rows)
            if (it == after.end() ||
                std::find(it->second.begin(), it->second.end(), r) == it->second.end())
                lost.push_back(table + ": " + r.substr(0, 200));
    }
    return lost;
}

/// Every chunk state keyed by its document's path, unit, chunk and kind, with its blob; and each
/// chunk's token ids under the same key (kind 0).
inline std::map<std::string, std::string> states_by_chunk(const std::string& project) {
    Db db(project, /*create=*/false);
    std::map<std::string, std::string> out;
    auto q = db.prepare("SELECT d.path, c.unit, c.ordinal, s.kind, s.blob FROM chunk_state_blobs "
                        "s JOIN chunks c ON c.id = s.chunk_id JOIN documents d ON d.id = "
                        "c.document_id");
    while (q.step()) {
        const auto b = q.blob(4);
        out[q.text(0) + " unit " + std::to_string(q.int64(1)) + " chunk " +
            std::to_string(q.int64(2)) + " kind " + std::to_string(q.int64(3))] =
            std::string(b.begin(), b.end());
    }
    auto c = db.prepare("SELECT d.path, c.unit, c.ordinal, c.tokens FROM chunks c JOIN documents "
                        "d ON d.id = c.document_id");
    while (c.step()) {
        const auto b = c.blob(3);
        out[c.text(0) + " unit " + std::to_string(c.int64(1)) + " chunk " +
            std::to_string(c.int64(2)) + " tokens"] = std::string(b.begin(), b.end());
    }
    return out;
}

/// The keys on which two states_by_chunk maps differ (missing on one side, or other bytes).
inline std::vector<std::string> state_differences(const std::map<std::string, std::string>& a,
                                                  const std::map<std::string, std::string>& b) {
    std::vector<std::string> d;
    for (const auto& [k, v] : a) {
        const auto it = b.find(k);
        if (it == b.end())
            d.push_back(k + " missing from the second");
        else if (it->second != v)
            d.push_back(k + " differs");
    }
    for (const auto& [k, v] : b)
        if (!a.count(k))
            d.push_back(k + " missing from the first");
    return d;
}

/// Files in `dir` and below, as paths relative to it, sorted.
inline std::vector<std::string> files_under(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
        out.push_back(std::filesystem::relative(it->path(), dir).string());
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace spanscope::test
