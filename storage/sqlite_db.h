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

/// A failed SQLite call; what() holds SQLite's message and the statement or file concerned.
class DbError : public std::runtime_error {
public:
    DbError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
    int code() const { return code_; }

private:
    int code_;
};

class Stmt;

class Db {
public:
    /// Open `path` read-write (create: also create it). Throws DbError.
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
    sqlite3* db_ = nullptr;
    std::string path_;
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
    /// Advance: true while a row is available. Throws DbError.
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

/// BEGIN IMMEDIATE ... COMMIT; rolled back when destroyed without commit().
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
