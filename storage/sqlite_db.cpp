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

// SQLite's message, with the cause a user can act on where the system said more: a full disk
// (ENOSPC, a quota, or a file size limit: EFBIG, which SQLite reports as a plain I/O error), a
// read-only file system, permissions, a project file moved or removed while open. A full disk
// is reported as SQLITE_FULL whatever SQLite's own code, so callers tell it apart by code.
//
// SQLite records the system's errno only at some of its failures (and a later call may have
// changed errno by then): where a write failed without a usable errno, the files are looked at
// instead — a file of the project at the process's file size limit, or a file system without
// room.
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

std::string error_text(sqlite3* db, const std::string& path, int* rc,
                       const std::string& sqlite_msg) {
    const int primary = *rc & 0xff;
    const bool io = primary == SQLITE_IOERR || primary == SQLITE_FULL ||
                    primary == SQLITE_CANTOPEN || primary == SQLITE_READONLY ||
                    primary == SQLITE_PERM;
    int sys = db && io ? sqlite3_system_errno(db) : 0;
    if (primary == SQLITE_IOERR && sys != ENOSPC && sys != EDQUOT && sys != EFBIG && sys != EIO)
        if (const int probed = probe_write_failure(path))
            sys = probed;
    const std::string kept = "; what was saved before is kept";
    if (primary == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT) {
        *rc = SQLITE_FULL;
        return "cannot write: the disk is full (" + sqlite_msg + ")" + kept;
    }
    if (sys == EFBIG) {
        *rc = SQLITE_FULL;
        return "cannot write: the disk is full for this file, which reached the file size "
               "limit (" +
               std::string(std::strerror(sys)) + ")" + kept;
    }
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
        return "another program (or another Spanscope window) is writing to this project and "
               "kept it locked past the wait (" +
               sqlite_msg + "); what was saved before is kept";
    if (*rc == SQLITE_READONLY_DBMOVED || *rc == SQLITE_IOERR_VNODE)
        return "the project file was moved or removed while it was open; nothing more is "
               "written to it";
    if (primary == SQLITE_READONLY || sys == EROFS || sys == EACCES || sys == EPERM)
        return "cannot write: " + read_only_cause(path) + " (" + sqlite_msg + ")";
    if (sys != 0 && primary != SQLITE_FULL)
        return sqlite_msg + " (" + std::strerror(sys) + ")";
    return sqlite_msg;
}

// A database this process cannot write, nor write its log beside (a read-only file, folder or
// file system), with no write-ahead log left to replay: SQLite would either fail to open it in
// WAL mode or leave a log and shared-memory file behind that it cannot remove. It is opened
// read-only and immutable instead (nothing is created, every write is refused as read-only).
bool read_only_place(const std::string& path, bool create) {
    if (create || ::access(path.c_str(), R_OK) != 0)
        return false;
    if (::access(path.c_str(), W_OK) == 0 && ::access(parent_folder(path).c_str(), W_OK) == 0)
        return false;
    struct stat wal {};
    return ::stat((path + "-wal").c_str(), &wal) != 0 || wal.st_size == 0;
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
    const std::string text = error_text(db, context, &rc, msg ? msg : sqlite3_errstr(rc));
    throw DbError(context + ": " + text, rc);
}
} // namespace

Db::Db(const std::string& path, bool create) : path_(path) {
    const int flags =
        SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
    const int rc =
        read_only_place(path, create)
            ? sqlite3_open_v2(immutable_uri(path).c_str(), &db_,
                              SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr)
            : sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        int code = rc;
        const std::string msg =
            error_text(db_, path, &code, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
        sqlite3_close(db_);
        db_ = nullptr;
        throw DbError(path + ": " + msg, code);
    }
    sqlite3_extended_result_codes(db_, 1);
}

Db::~Db() {
    sqlite3_close_v2(db_);
}

void Db::exec(std::string_view sql) {
    char* err = nullptr;
    const std::string s(sql);
    const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        const std::string msg = err ? err : sqlite3_errstr(rc);
        sqlite3_free(err);
        int code = rc;
        const std::string text = error_text(db_, path_, &code, msg);
        throw DbError(path_ + ": " + text, code);
    }
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
    const int rc = sqlite3_step(st_);
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
