#include "kill_support.h"

#include "storage/project.h"
#include "storage/sqlite_db.h"
#include "tiny_model.h"

#include <sqlite3.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace spanscope::test {

pid_t spawn_program(const std::string& exe, const std::vector<std::string>& args,
                    const std::string& err_path) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const ExecStrings argv(command_line(exe, args));
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        throw std::runtime_error("posix_spawn " + exe + " failed: " + std::strerror(rc));
    return pid;
}

int wait_status(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    return st;
}

bool kill_after(pid_t pid, double seconds, int* exit_status) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    ::kill(pid, SIGKILL); // a process that already exited is a zombie until waited for
    const int st = wait_status(pid);
    if (exit_status)
        *exit_status = st;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

ExecStrings::ExecStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
    for (auto& s : strings_)
        pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
}

std::vector<std::string> command_line(const std::string& exe,
                                      const std::vector<std::string>& args) {
    std::vector<std::string> line{exe};
    line.insert(line.end(), args.begin(), args.end());
    return line;
}

std::vector<std::string> environment_without(const std::vector<std::string>& names) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        const std::string name = kv.substr(0, kv.find('='));
        if (std::find(names.begin(), names.end(), name) == names.end())
            env.push_back(kv);
    }
    return env;
}

int kills_wanted(int default_kills) {
    if (const char* s = std::getenv("SPANSCOPE_KILLS"); s && *s) {
        const long n = std::strtol(s, nullptr, 10);
        if (n > 0)
            return static_cast<int>(n);
    }
    return default_kills;
}

int64_t Snapshot::rows_committed() const {
    int64_t n = 0;
    for (const auto& s : states)
        n += s.kind == 1 ? 1 : 0;
    return n;
}

std::string integrity_of(Db& db) {
    std::string out;
    auto ic = db.prepare("PRAGMA integrity_check");
    while (ic.step()) {
        if (!out.empty())
            out += "\n";
        out += ic.text(0);
    }
    auto fk = db.prepare("PRAGMA foreign_key_check");
    while (fk.step()) {
        out += "\nforeign key violation in ";
        out += fk.text(0);
    }
    // The full-text index goes with the chunks (one transaction): one row per unit, keyed by
    // its first chunk, and none without its unit; FTS5's own check of its structures.
    auto missing = db.prepare("SELECT count(*) FROM chunks c WHERE c.ordinal = 0 AND NOT EXISTS "
                              "(SELECT 1 FROM unit_text t WHERE t.rowid = c.id)");
    missing.step();
    if (missing.int64(0) != 0)
        out += '\n' + std::to_string(missing.int64(0)) + " units without an index row";
    auto orphans = db.prepare("SELECT count(*) FROM unit_text t WHERE NOT EXISTS (SELECT 1 FROM "
                              "chunks c WHERE c.id = t.rowid AND c.ordinal = 0)");
    orphans.step();
    if (orphans.int64(0) != 0)
        out += '\n' + std::to_string(orphans.int64(0)) + " index rows without a unit";
    if (sqlite3_db_readonly(db.handle(), "main") == 0) {
        try {
            db.exec("INSERT INTO unit_text(unit_text) VALUES ('integrity-check')");
        } catch (const std::exception& e) {
            out += std::string("\nFTS5 integrity-check: ") + e.what();
        }
    }
    return out;
}

namespace {

int64_t count(Db& db, const char* sql) {
    auto q = db.prepare(sql);
    q.step();
    return q.int64(0);
}

} // namespace

Snapshot snapshot(const std::string& path) {
    auto project = Project::open(path, /*create=*/false);
    auto& db = project->db();
    Snapshot s;
    s.integrity = integrity_of(db);
    s.documents = count(db, "SELECT count(*) FROM documents");
    s.chunks = count(db, "SELECT count(*) FROM chunks");
    auto q = db.prepare("SELECT c.document_id, c.unit, c.ordinal, s.kind, s.blob FROM "
                        "chunk_state_blobs s JOIN chunks c ON c.id = s.chunk_id ORDER BY "
                        "c.document_id, c.unit, c.ordinal, s.kind");
    while (q.step())
        s.states.push_back({q.int64(0), q.int64(1), q.int64(2), q.int64(3), q.blob(4)});
    auto g = db.prepare("SELECT c.document_id, c.unit, c.ordinal, g.fingerprint, g.data FROM "
                        "segmentations g JOIN chunks c ON c.id = g.chunk_id ORDER BY "
                        "c.document_id, c.unit, c.ordinal, g.fingerprint");
    while (g.step())
        s.sekv.push_back({g.int64(0), g.int64(1), g.int64(2), g.text(3), g.blob(4)});
    auto m = db.prepare("SELECT m.chat_id, m.id, m.role, m.text, z.data FROM messages m LEFT JOIN "
                        "zoom_traces z ON z.message_id = m.id ORDER BY m.chat_id, m.id");
    auto src = db.prepare("SELECT token, ordinal, document_id, start_char, end_char, page, "
                          "line, share, excerpt FROM answer_sources WHERE message_id = ? ORDER "
                          "BY token, ordinal");
    while (m.step()) {
        MessageRow r{m.int64(0), m.int64(1), m.text(2), m.text(3), {}, {}};
        if (!m.is_null(4))
            r.zoom_trace = m.blob(4);
        src.bind(1, r.id);
        while (src.step()) {
            std::string row;
            for (int c = 0; c < 9; ++c) {
                if (c > 0)
                    row += '|';
                row += src.text(c);
            }
            r.sources.push_back(row);
        }
        src.reset();
        s.messages.push_back(std::move(r));
    }
    auto e = db.prepare("SELECT kind, message FROM events ORDER BY id");
    while (e.step())
        s.events.push_back(e.text(0) + ": " + e.text(1));
    return s;
}

std::string describe(const StateRow& r) {
    return "document " + std::to_string(r.document) + " unit " + std::to_string(r.unit) +
           " chunk " + std::to_string(r.ordinal) + " kind " + std::to_string(r.kind);
}

void copy_project(const std::string& from, const std::string& to) {
    namespace fs = std::filesystem;
    if (wal_bytes(from) > 0)
        throw std::runtime_error(from + " has a write-ahead log: close it before copying");
    for (const char* suffix : {"", "-wal", "-shm"})
        fs::remove(to + suffix);
    fs::copy_file(from, to);
}

int64_t wal_bytes(const std::string& path) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(path + "-wal", ec);
    return ec ? 0 : static_cast<int64_t>(n);
}

} // namespace spanscope::test
