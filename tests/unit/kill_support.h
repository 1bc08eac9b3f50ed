// Support of the crash-safety tests (test_ingest_kill, test_store_kill): run a program as a
// separate process, kill it, and read back everything a project stores, checked.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {
class Db;
}

namespace spanscope::test {

/// Start `exe` with `args` as a separate process: stdin and stdout /dev/null, stderr to
/// `err_path`. Throws std::runtime_error when posix_spawn fails.
pid_t spawn_program(const std::string& exe, const std::vector<std::string>& args,
                    const std::string& err_path);

/// waitpid() until `pid` ends (EINTR retried); its status. Throws std::runtime_error.
int wait_status(pid_t pid);

/// SIGKILL `pid` after `seconds` and reap it; true when the signal ended it (false: it had
/// already exited, with status *exit_status).
bool kill_after(pid_t pid, double seconds, int* exit_status = nullptr);

/// argv or envp for execve() or posix_spawn(): owns its strings; data() is the array of pointers
/// into them, ended by a null pointer.
class ExecStrings {
public:
    explicit ExecStrings(std::vector<std::string> strings);
    ExecStrings(const ExecStrings&) = delete;
    ExecStrings& operator=(const ExecStrings&) = delete;
    char* const* data() const { return pointers_.data(); }

private:
    std::vector<std::string> strings_;
    std::vector<char*> pointers_;
};

/// The program `exe` followed by `args`: a command line for ExecStrings.
std::vector<std::string> command_line(const std::string& exe, const std::vector<std::string>& args);

/// This process's environment ("NAME=value" entries) less the variables named in `names`.
std::vector<std::string> environment_without(const std::vector<std::string>& names);

/// The number of kills a crash-safety test makes: SPANSCOPE_KILLS when set (a positive
/// integer), else `default_kills` (the CI's short run).
int kills_wanted(int default_kills);

/// One stored chunk state, keyed by where its chunk sits in the document.
struct StateRow {
    int64_t document = 0, unit = 0, ordinal = 0, kind = 0;
    std::vector<uint8_t> blob;
};

/// One stored SEKV state (segmentations), keyed likewise.
struct SekvRow {
    int64_t document = 0, unit = 0, ordinal = 0;
    std::string key; ///< "fingerprint/options"
    std::vector<uint8_t> data;
};

/// One message with everything saved with it.
struct MessageRow {
    int64_t chat = 0, id = 0;
    std::string role, text;
    std::vector<uint8_t> zoom_trace;  ///< empty when none was saved
    std::vector<std::string> sources; ///< each answer_sources row as text, in key order
};

/// PRAGMA integrity_check and foreign_key_check, the full-text index against the units (one row
/// per unit, none without its unit) and FTS5's own check: "ok" when all hold, else what failed,
/// one line each. FTS5 runs its check as an INSERT: a connection that cannot write leaves it out.
std::string integrity_of(Db& db);

struct Snapshot {
    std::string integrity; ///< integrity_of()
    int64_t documents = 0;
    int64_t chunks = 0;           ///< chunk rows (0 before a document was chunked)
    std::vector<StateRow> states; ///< ordered by document, unit, ordinal, kind
    std::vector<SekvRow> sekv;    ///< ordered by document, unit, ordinal, key
    std::vector<MessageRow> messages;
    std::vector<std::string> events; ///< "kind: message", in order
    int64_t rows_committed() const;  ///< attention-row states (kind 1)
};

/// Open the project as the product does (Project::open, never creating), check it and read
/// every state, SEKV state, message and event. Throws what Project::open throws.
Snapshot snapshot(const std::string& path);

/// "document D unit U chunk C kind K".
std::string describe(const StateRow& r);

/// Copy a closed project (no -wal beside it) to `to`, replacing it and its -wal/-shm.
/// Throws std::runtime_error when the source still has a write-ahead log.
void copy_project(const std::string& from, const std::string& to);

/// The size of `path`'s write-ahead log (0 when there is none).
int64_t wal_bytes(const std::string& path);

} // namespace spanscope::test
