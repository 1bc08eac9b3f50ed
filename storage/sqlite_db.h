// A thin RAII layer over the SQLite C API: a connection, prepared statements and transactions,
// with errors turned into exceptions that carry SQLite's message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace spanscope {

/// A failed SQLite call; what() holds SQLite's message, worded for users, and the statement or
/// file concerned. code() is SQLite's extended result code, except that a write refused for
/// want of room is always SQLITE_FULL: a full disk or quota (SQLite may have said SQLITE_IOERR)
/// and a file that reached the process's file size limit (ulimit -f) alike; system_errno() tells
/// them apart (ENOSPC, EDQUOT or EFBIG; 0 where the system said nothing). A project file moved
/// or removed while open is SQLITE_READONLY_DBMOVED, and a project opened read-only that another
/// program changed since is SQLITE_BUSY_SNAPSHOT.
class DbError : public std::runtime_error {
public:
    DbError(const std::string& what, int code, int system_errno = 0)
        : std::runtime_error(what), code_(code), errno_(system_errno) {}
    int code() const { return code_; }
    int system_errno() const { return errno_; }
    /// SQLITE_BUSY or SQLITE_LOCKED (any extended code of them): a lock kept the statement from
    /// running; the file is fine and the same statement may succeed later.
    bool lock_conflict() const;

private:
    int code_;
    int errno_;
};

/// Why a write found no room, for users: "the disk is full (...)" for ENOSPC or EDQUOT, and for
/// EFBIG that `file` ("the project file", "the file") reached this process's file size limit.
std::string no_room_text(int system_errno, const std::string& file);

class Stmt;

class Db {
public:
    /// Open `path` (create: also create it). Read-write where this process can write the file
    /// and its folder; otherwise read-only, every write then refused with SQLITE_READONLY:
    /// immutable on a read-only file system (nobody can change it), else with SQLite's locking so
    /// that another program's commits are seen. Where SQLite could read it only by creating its
    /// log and shared-memory files beside it (no program has it open), it is read as it is and
    /// every later statement checks that no other program started changing it; once one did,
    /// reads fail with SQLITE_BUSY_SNAPSHOT (open it again). Throws DbError.
    Db(const std::string& path, bool create);
    ~Db();
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    /// Run one or more statements without results. Throws DbError.
    void exec(std::string_view sql);
    Stmt prepare(std::string_view sql);
    int64_t last_insert_id() const;
    int changes() const;
    sqlite3* handle() { return db_; }
    const std::string& path() const { return path_; }

private:
    friend class Stmt;
    /// Throws SQLITE_BUSY_SNAPSHOT where the project is read as it was at opening (see the
    /// constructor) and another program has changed it since.
    void check_unchanged();

    sqlite3* db_ = nullptr;
    std::string path_;
    bool watched_ = false;
    std::string identity_; ///< the file's device, inode, size and times at opening
};

/// A prepared statement. bind() indices are 1-based (SQLite's convention).
class Stmt {
public:
    Stmt(Db& db, std::string_view sql);
    ~Stmt();
    Stmt(Stmt&& o) noexcept;
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, int64_t v);
    Stmt& bind(int i, double v);
    Stmt& bind(int i, std::string_view text);
    Stmt& bind_blob(int i, const void* data, size_t bytes);
    Stmt& bind_null(int i);
    /// Advance: true while a row is available. Throws DbError; a write to a project file moved
    /// or removed since it was opened throws SQLITE_READONLY_DBMOVED before it starts.
    bool step();
    /// step() that must produce no row (INSERT/UPDATE/DELETE).
    void run();
    void reset();

    int64_t int64(int col) const;
    double real(int col) const;
    std::string text(int col) const;
    std::vector<uint8_t> blob(int col) const;
    bool is_null(int col) const;

private:
    Db* db_;
    sqlite3_stmt* st_ = nullptr;
    std::string sql_;
};

/// BEGIN IMMEDIATE ... COMMIT; rolled back when destroyed without commit(). The constructor
/// throws DbError: SQLITE_READONLY_DBMOVED where the project file was moved or removed since it
/// was opened, SQLITE_BUSY where another program holds the write lock past the wait.
class Transaction {
public:
    explicit Transaction(Db& db);
    ~Transaction();
    void commit();

private:
    Db& db_;
    bool done_ = false;
};

} // namespace spanscope
