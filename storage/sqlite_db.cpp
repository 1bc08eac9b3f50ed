#include "storage/sqlite_db.h"

#include <sqlite3.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace spanscope {

namespace {
std::string parent_folder(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// Where SQLite says a write failed without a usable errno, the files are looked at instead: a
// file of the project at the process's file size limit, or a file system without room.
int probe_write_failure(const std::string& path) {
    rlimit r{};
    if (getrlimit(RLIMIT_FSIZE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        for (const char* suffix : {"", "-wal", "-journal"}) {
            struct stat st {};
            if (::stat((path + suffix).c_str(), &st) == 0 &&
                static_cast<uint64_t>(st.st_size) + 65536 >= r.rlim_cur)
                return EFBIG;
        }
    }
    const std::string dir = parent_folder(path);
    struct statvfs v {};
    if (::statvfs(dir.c_str(), &v) == 0 && uint64_t{v.f_bavail} * v.f_frsize < 65536)
        return ENOSPC;
    return 0;
}

// The I/O errors of a write (to the database, its log or its shared memory): the only ones a
// full disk or a file size limit can cause.
bool write_error(int rc) {
    switch (rc) {
    case SQLITE_IOERR_WRITE:
    case SQLITE_IOERR_FSYNC:
    case SQLITE_IOERR_DIR_FSYNC:
    case SQLITE_IOERR_TRUNCATE:
    case SQLITE_IOERR_SHMSIZE:
        return true;
    default:
        return false;
    }
}

// Why a project cannot be written, as far as the file system tells.
std::string read_only_cause(const std::string& path) {
    struct statvfs v {};
    if (::statvfs(path.c_str(), &v) == 0 && (v.f_flag & ST_RDONLY))
        return "the file system it is on is read-only";
    if (::access(path.c_str(), W_OK) != 0)
        return "the project file is read-only (its permissions)";
    if (::access(parent_folder(path).c_str(), W_OK) != 0)
        return "its folder is read-only (SQLite needs to write its log beside the project)";
    return "the project file is read-only";
}

struct Described {
    std::string text;
    int code;
    int sys; // ENOSPC, EDQUOT or EFBIG where a write found no room
};

// SQLite's message, with the cause a user can act on where the system said more: a full disk
// (ENOSPC, a quota) or a file size limit (EFBIG, which SQLite reports as a plain I/O error),
// both reported as SQLITE_FULL whatever SQLite's own code; a read-only file system,
// permissions; a project file moved or removed while open. SQLite records the system's errno
// only for I/O errors and failed opens.
Described describe(sqlite3* db, const std::string& path, int rc, const std::string& sqlite_msg) {
    const int primary = rc & 0xff;
    int sys = db && (primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN)
                  ? sqlite3_system_errno(db)
                  : 0;
    if (rc == SQLITE_READONLY_DBMOVED || rc == SQLITE_IOERR_VNODE)
        return {"the project file was moved or removed while it was open; nothing more is "
                "written to it",
                rc, 0};
    if (write_error(rc) && sys != ENOSPC && sys != EDQUOT && sys != EFBIG)
        if (const int probed = probe_write_failure(path))
            sys = probed;
    if (primary == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT || sys == EFBIG) {
        const int why = sys == EFBIG || sys == EDQUOT ? sys : ENOSPC;
        return {"cannot write: " +
                    (why == EFBIG ? no_room_text(why, "the project file")
                                  : "the disk is full (" + sqlite_msg + ")") +
                    "; what was saved before is kept",
                SQLITE_FULL, why};
    }
    if (rc == SQLITE_BUSY_SNAPSHOT)
        return {"another program changed the project while this read was under way (" + sqlite_msg +
                    "); try again, what was saved before is kept",
                rc, 0};
    if (primary == SQLITE_BUSY)
        return {"another program (or another Spanscope window) is writing to this project and "
                "kept it locked past the wait (" +
                    sqlite_msg + "); what was saved before is kept",
                rc, 0};
    if (primary == SQLITE_LOCKED)
        return {"a table of the project is in use by another statement of this program (" +
                    sqlite_msg + "); nothing was changed",
                rc, 0};
    if (primary == SQLITE_READONLY || sys == EROFS || sys == EACCES || sys == EPERM)
        return {"cannot write: " + read_only_cause(path) + " (" + sqlite_msg + ")", rc, 0};
    if (sys != 0)
        return {sqlite_msg + " (" + std::strerror(sys) + ")", rc, 0};
    return {sqlite_msg, rc, 0};
}

[[noreturn]] void throw_error(sqlite3* db, const std::string& path, int rc,
                              const std::string& sqlite_msg) {
    const Described d = describe(db, path, rc, sqlite_msg);
    throw DbError(path + ": " + d.text, d.code, d.sys);
}

// How a project is opened where this process cannot write it, or its folder.
enum class OpenAs {
    read_write, // it can (or it is created): SQLite's ordinary open
    read_only,  // SQLITE_OPEN_READONLY with SQLite's locking: its log and shared memory are
                // there (a program has it open, or left them), so SQLite reads them, sees every
                // commit of another program, and creates nothing
    immutable,  // on a read-only file system, which nobody can change
    watched,    // no log and no shared memory: SQLite could read it only by creating them beside
                // it (where the folder allows), files its owner did not have and may then be
                // unable to write; it is read as it is instead (immutable) and every statement
                // checks that no other program has started changing it
};

OpenAs open_as(const std::string& path, bool create) {
    if (create || ::access(path.c_str(), R_OK) != 0)
        return OpenAs::read_write;
    if (::access(path.c_str(), W_OK) == 0 && ::access(parent_folder(path).c_str(), W_OK) == 0)
        return OpenAs::read_write;
    struct statvfs v {};
    if (::statvfs(path.c_str(), &v) == 0 && (v.f_flag & ST_RDONLY))
        return OpenAs::immutable;
    struct stat wal {
    }, shm{};
    const bool has_wal = ::stat((path + "-wal").c_str(), &wal) == 0;
    const bool has_shm = ::stat((path + "-shm").c_str(), &shm) == 0;
    if (has_wal && has_shm)
        return OpenAs::read_only;
    // A log with commits in it and no shared memory: only SQLite can replay it.
    if (has_wal && wal.st_size > 0)
        return OpenAs::read_write;
    return OpenAs::watched;
}

// The project file and its log as the file system describes them: any commit or checkpoint by
// another program changes it (the log appears, grows, or the file is written).
std::string identity(const std::string& path) {
    std::string id;
    for (const char* suffix : {"", "-wal"}) {
        struct stat st {};
        if (::stat((path + suffix).c_str(), &st) != 0) {
            id += "none;";
            continue;
        }
        for (const auto v : {uint64_t(st.st_dev), uint64_t(st.st_ino), uint64_t(st.st_size),
                             uint64_t(st.st_mtim.tv_sec), uint64_t(st.st_mtim.tv_nsec),
                             uint64_t(st.st_ctim.tv_sec), uint64_t(st.st_ctim.tv_nsec)})
            id += std::to_string(v) + ',';
        id += ';';
    }
    return id;
}

// "file:PATH?immutable=1" with the characters a URI path cannot hold escaped.
std::string immutable_uri(const std::string& path) {
    static const char* hex = "0123456789ABCDEF";
    std::string uri = "file:";
    for (const unsigned char c : path) {
        if (c == '%' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f) {
            uri += '%';
            uri += hex[c >> 4];
            uri += hex[c & 15];
        } else {
            uri += static_cast<char>(c);
        }
    }
    return uri + "?immutable=1";
}

// Writes to a file that was removed or renamed since it was opened would go where no one finds
// them (or into a file the user moved away): refused before they start.
void refuse_if_moved(Db& db) {
    int moved = 0;
    if (sqlite3_file_control(db.handle(), "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK &&
        moved)
        throw DbError(db.path() + ": the project file was moved or removed while it was open; "
                                  "nothing more is written to it",
                      SQLITE_READONLY_DBMOVED);
}

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& context) {
    const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw_error(db, context, rc, msg ? msg : sqlite3_errstr(rc));
}
} // namespace

std::string no_room_text(int system_errno, const std::string& file) {
    if (system_errno == EFBIG)
        return file + " reached this process's file size limit (ulimit -f)";
    return "the disk is full (" + std::string(std::strerror(system_errno)) + ")";
}

Db::Db(const std::string& path, bool create) : path_(path) {
    const OpenAs as = open_as(path, create);
    int rc = SQLITE_OK;
    switch (as) {
    case OpenAs::read_write:
        rc = sqlite3_open_v2(path.c_str(), &db_,
                             SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) |
                                 SQLITE_OPEN_NOMUTEX,
                             nullptr);
        break;
    case OpenAs::read_only:
        rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                             nullptr);
        break;
    case OpenAs::immutable:
    case OpenAs::watched:
        identity_ = identity(path);
        watched_ = as == OpenAs::watched;
        rc = sqlite3_open_v2(immutable_uri(path).c_str(), &db_,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
        break;
    }
    if (rc != SQLITE_OK) {
        const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
        const Described d = describe(db_, path, rc, msg);
        sqlite3_close(db_);
        db_ = nullptr;
        throw DbError(path + ": " + d.text, d.code, d.sys);
    }
    sqlite3_extended_result_codes(db_, 1);
}

void Db::check_unchanged() {
    if (watched_ && identity(path_) != identity_)
        throw DbError(path_ + ": another program has changed the project since it was opened here "
                              "read-only (it was read as it was then: SQLite could follow changes "
                              "only by creating its log beside it, which this program may not do); "
                              "open it again to see the changes",
                      SQLITE_BUSY_SNAPSHOT);
}

bool DbError::lock_conflict() const {
    return (code_ & 0xff) == SQLITE_BUSY || (code_ & 0xff) == SQLITE_LOCKED;
}

Db::~Db() {
    sqlite3_close_v2(db_);
}

void Db::exec(std::string_view sql) {
    check_unchanged();
    char* err = nullptr;
    const std::string s(sql);
    const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    const std::string msg = rc == SQLITE_OK ? "" : err ? err : sqlite3_errstr(rc);
    sqlite3_free(err); // before check_unchanged, which may throw
    check_unchanged();
    if (rc != SQLITE_OK)
        throw_error(db_, path_, rc, msg);
}

Stmt Db::prepare(std::string_view sql) {
    return Stmt(*this, sql);
}

int64_t Db::last_insert_id() const {
    return sqlite3_last_insert_rowid(db_);
}

int Db::changes() const {
    return sqlite3_changes(db_);
}

Stmt::Stmt(Db& db, std::string_view sql) : db_(&db), sql_(sql) {
    const int rc =
        sqlite3_prepare_v2(db.handle(), sql_.data(), static_cast<int>(sql_.size()), &st_, nullptr);
    if (rc != SQLITE_OK)
        fail(db.handle(), rc, db.path());
}

Stmt::~Stmt() {
    sqlite3_finalize(st_);
}

Stmt::Stmt(Stmt&& o) noexcept : db_(o.db_), st_(o.st_), sql_(std::move(o.sql_)) {
    o.st_ = nullptr;
}

Stmt& Stmt::bind(int i, int64_t v) {
    const int rc = sqlite3_bind_int64(st_, i, v);
    if (rc != SQLITE_OK)
        fail(db_->handle(), rc, db_->path());
    return *this;
}

Stmt& Stmt::bind(int i, double v) {
    const int rc = sqlite3_bind_double(st_, i, v);
    if (rc != SQLITE_OK)
        fail(db_->handle(), rc, db_->path());
    return *this;
}

Stmt& Stmt::bind(int i, std::string_view text) {
    const int rc =
        sqlite3_bind_text64(st_, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    if (rc != SQLITE_OK)
        fail(db_->handle(), rc, db_->path());
    return *this;
}

Stmt& Stmt::bind_blob(int i, const void* data, size_t bytes) {
    // A zero-length blob is still a blob (not NULL).
    const int rc = bytes == 0 ? sqlite3_bind_zeroblob(st_, i, 0)
                              : sqlite3_bind_blob64(st_, i, data, bytes, SQLITE_TRANSIENT);
    if (rc != SQLITE_OK)
        fail(db_->handle(), rc, db_->path());
    return *this;
}

Stmt& Stmt::bind_null(int i) {
    const int rc = sqlite3_bind_null(st_, i);
    if (rc != SQLITE_OK)
        fail(db_->handle(), rc, db_->path());
    return *this;
}

bool Stmt::step() {
    if (!sqlite3_stmt_busy(st_) && !sqlite3_stmt_readonly(st_))
        refuse_if_moved(*db_);
    // Where the project is read as it was at opening, every row is checked: a page another
    // program wrote meanwhile may have been read beside older ones.
    db_->check_unchanged();
    const int rc = sqlite3_step(st_);
    db_->check_unchanged();
    if (rc == SQLITE_ROW)
        return true;
    if (rc == SQLITE_DONE)
        return false;
    fail(db_->handle(), rc, db_->path());
}

void Stmt::run() {
    while (step()) {
    }
    reset();
}

void Stmt::reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
}

int64_t Stmt::int64(int col) const {
    return sqlite3_column_int64(st_, col);
}

double Stmt::real(int col) const {
    return sqlite3_column_double(st_, col);
}

std::string Stmt::text(int col) const {
    const auto* p = sqlite3_column_text(st_, col);
    const int n = sqlite3_column_bytes(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
             : std::string();
}

std::vector<uint8_t> Stmt::blob(int col) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st_, col));
    const int n = sqlite3_column_bytes(st_, col);
    return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

bool Stmt::is_null(int col) const {
    return sqlite3_column_type(st_, col) == SQLITE_NULL;
}

Transaction::Transaction(Db& db) : db_(db) {
    refuse_if_moved(db_);
    db_.exec("BEGIN IMMEDIATE");
}

Transaction::~Transaction() {
    if (!done_) {
        try {
            db_.exec("ROLLBACK");
        } catch (...) {
        }
    }
}

void Transaction::commit() {
    db_.exec("COMMIT");
    done_ = true;
}

} // namespace spanscope
