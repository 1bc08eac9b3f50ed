#include "storage/project_schema.h"

#include "storage/project.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <array>
#include <cstring>
#include <vector>

namespace spanscope {

namespace {

// Migration k brings the schema from version k - 1 to version k. Never edit a released one:
// add the next (tests/unit/test_project.cpp opens the committed fixture of every version).
const char* const kMigrations[] = {
    // 1: the first schema.
    R"sql(
CREATE TABLE schema_version(version INTEGER NOT NULL);
INSERT INTO schema_version VALUES (0);
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents(
    id INTEGER PRIMARY KEY,
    position INTEGER NOT NULL,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    format TEXT NOT NULL,
    encoding TEXT NOT NULL,
    content_hash TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    offset_map BLOB NOT NULL,      -- SourceAnchor entries: 4 x int64 little-endian each
    warnings TEXT NOT NULL,        -- one per line
    added_at TEXT NOT NULL);
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    chunking TEXT NOT NULL,        -- tokenizer hash and chunking options
    unit INTEGER NOT NULL,         -- section of the document (own position space)
    ordinal INTEGER NOT NULL,      -- chunk within the unit
    units INTEGER NOT NULL,        -- sections of the document under this chunking
    char_begin INTEGER NOT NULL, char_end INTEGER NOT NULL,
    token_begin INTEGER NOT NULL, token_end INTEGER NOT NULL,
    tokens BLOB NOT NULL,          -- int32 little-endian ids
    token_chars BLOB NOT NULL,     -- int32 little-endian text offsets, -1 for header tokens
    checksum INTEGER NOT NULL,     -- XXH3-64 of the row's numbers and blobs (project.cpp)
    UNIQUE(document_id, chunking, unit, ordinal));
CREATE TABLE chunk_states(       -- what is known of a blob without reading it
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    kind INTEGER NOT NULL,         -- chunk_state.h StateKind
    bytes INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    last_used INTEGER NOT NULL,    -- milliseconds since the epoch
    PRIMARY KEY(chunk_id, fingerprint, kind));
-- The blobs in a table of their own: summing sizes or marking a use never reads or rewrites one.
CREATE TABLE chunk_state_blobs(
    chunk_id INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    kind INTEGER NOT NULL,
    blob BLOB NOT NULL,
    PRIMARY KEY(chunk_id, fingerprint, kind),
    FOREIGN KEY(chunk_id, fingerprint, kind) REFERENCES chunk_states(chunk_id, fingerprint, kind)
        ON DELETE CASCADE);
CREATE INDEX chunk_states_lru ON chunk_states(last_used);
CREATE TABLE segmentations(
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    fingerprint TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY(chunk_id, fingerprint));
CREATE TABLE chats(id INTEGER PRIMARY KEY, title TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE messages(
    id INTEGER PRIMARY KEY,
    chat_id INTEGER NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
    role TEXT NOT NULL CHECK(role IN ('user', 'assistant')),
    text TEXT NOT NULL,
    stats TEXT NOT NULL,
    created_at TEXT NOT NULL);
CREATE TABLE zoom_traces(
    message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
    data BLOB NOT NULL);
CREATE TABLE events(id INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL,
                    message TEXT NOT NULL);
)sql",
    // 2: a full-text index of every unit's text (SQLite FTS5) to rank sections by relevance to
    // a question when not all fit the context. One row per unit and chunking, its rowid the
    // unit's first chunk (ordinal 0), its text the bytes [first char_begin, last char_end) of
    // the document text. Written with the chunks (Project::insert_chunks); deleting the first
    // chunk (a removed or updated document, dropped chunks) deletes it.
    R"sql(
CREATE VIRTUAL TABLE unit_text USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2');
INSERT INTO unit_text(rowid, text)
    SELECT f.id, CAST(substr(CAST(d.text AS BLOB), u.b + 1, u.e - u.b) AS TEXT)
    FROM (SELECT document_id, chunking, unit, min(char_begin) AS b, max(char_end) AS e
          FROM chunks GROUP BY document_id, chunking, unit) AS u
    JOIN chunks AS f ON f.document_id = u.document_id AND f.chunking = u.chunking
                    AND f.unit = u.unit AND f.ordinal = 0
    JOIN documents AS d ON d.id = u.document_id;
CREATE TRIGGER chunks_delete_unit_text AFTER DELETE ON chunks WHEN old.ordinal = 0 BEGIN
    DELETE FROM unit_text WHERE rowid = old.id;
END;
)sql",
    // 3: the pages of a PDF read by OCR (no text layer), as "2,3,7": the document view marks them.
    R"sql(
ALTER TABLE documents ADD COLUMN ocr_pages TEXT NOT NULL DEFAULT '';
)sql",
    // 4: the sources of an answer (the passages its tokens attended to most, answer_sources.h):
    // token -1 for the answer's, t >= 0 for its token t's; the document by id (no reference: a
    // removed document's sources keep their excerpt), the passage as bytes of its text, its
    // page (0: none) and line, the share of the answer's (the token's) attention over the
    // documents, an excerpt. Ordinal 0 is the top source.
    R"sql(
CREATE TABLE answer_sources(
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    token INTEGER NOT NULL,
    ordinal INTEGER NOT NULL,
    document_id INTEGER NOT NULL,
    start_char INTEGER NOT NULL,
    end_char INTEGER NOT NULL,
    page INTEGER NOT NULL,
    line INTEGER NOT NULL,
    share REAL NOT NULL,
    excerpt TEXT NOT NULL,
    PRIMARY KEY(message_id, token, ordinal));
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
    throw ProjectError(path + ": " + why + "; the file was not changed");
}

uint32_t be16(const unsigned char* p) {
    return (uint32_t{p[0]} << 8) | p[1];
}
uint32_t be32(const unsigned char* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// The file's first bytes, read through SQLite's own file layer. Closing a descriptor of a file
// drops every POSIX lock this process holds on it (fcntl), so a plain open and close here would
// silently release the locks of the project's other connections in this process (the desktop
// application's engine and store): another program closing the project would then take it for
// the last connection, checkpoint it and delete its log under them. SQLite's layer keeps such a
// descriptor open until those locks go. False when the file is shorter than `h`.
bool read_header(const std::string& path, std::array<unsigned char, 100>& h) {
    sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
    if (!vfs)
        refuse(path, "cannot be read (SQLite has no file layer)");
    std::vector<sqlite3_int64> mem(static_cast<size_t>(vfs->szOsFile) / sizeof(sqlite3_int64) + 1);
    auto* file = reinterpret_cast<sqlite3_file*>(mem.data());
    // A main database's name must come from sqlite3_create_filename (the file layer reads the
    // names of its log and journal, and its URI parameters, after it).
    const std::string wal = path + "-wal", journal = path + "-journal";
    sqlite3_filename name =
        sqlite3_create_filename(path.c_str(), journal.c_str(), wal.c_str(), 0, nullptr);
    if (!name)
        refuse(path, "cannot be read (out of memory)");
    int flags = 0;
    int rc = vfs->xOpen(vfs, name, file, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY, &flags);
    if (rc == SQLITE_OK)
        rc = file->pMethods->xRead(file, h.data(), static_cast<int>(h.size()), 0);
    if (file->pMethods)
        file->pMethods->xClose(file);
    sqlite3_free_filename(name);
    if (rc == SQLITE_IOERR_SHORT_READ)
        return false;
    if (rc != SQLITE_OK)
        refuse(path, std::string("cannot be read (") + sqlite3_errstr(rc) + ")");
    return true;
}

} // namespace

void check_project_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        refuse(path, std::string("cannot be read (") + std::strerror(errno) + ")");
    if (!S_ISREG(st.st_mode))
        refuse(path, "is not a regular file");
    if (st.st_size == 0)
        refuse(path, "is empty (0 bytes), not a Spanscope project");
    std::array<unsigned char, 100> h{};
    if (!read_header(path, h))
        refuse(path,
               "is too short (" + std::to_string(st.st_size) + " bytes) to be a Spanscope project");
    if (std::memcmp(h.data(), "SQLite format 3", 16) != 0)
        refuse(path, "is not a Spanscope project (not an SQLite database)");
    uint32_t page = be16(h.data() + 16);
    if (page == 1)
        page = 65536;
    if (page < 512 || page > 65536 || (page & (page - 1)) != 0)
        refuse(path, "is damaged (invalid page size " + std::to_string(page) + ")");
    // With a write-ahead log the main file may legitimately be shorter than its header says (a
    // checkpoint writes page 1 before it extends the file): SQLite recovers from the log.
    struct stat wal {};
    if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0)
        return;
    // The in-header page count is valid when the version-valid-for number matches the change
    // counter (SQLite file format §1.3.7).
    const uint32_t pages = be32(h.data() + 28);
    if (be32(h.data() + 92) == be32(h.data() + 24) && pages > 0 &&
        static_cast<uint64_t>(st.st_size) < uint64_t{pages} * page)
        refuse(path, "is truncated (" + std::to_string(st.st_size) + " bytes; its header says " +
                         std::to_string(uint64_t{pages} * page) + ")");
    if (st.st_size % page != 0)
        refuse(path, "is truncated (" + std::to_string(st.st_size) +
                         " bytes, not a whole number of " + std::to_string(page) + "-byte pages)");
}

int read_schema_version(Db& db) {
    auto tables = db.prepare("SELECT count(*) FROM sqlite_master");
    tables.step();
    if (tables.int64(0) == 0)
        return 0;
    auto has = db.prepare(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    has.step();
    if (has.int64(0) == 0)
        return -1;
    auto v = db.prepare("SELECT version FROM schema_version");
    if (!v.step())
        return -1;
    return static_cast<int>(v.int64(0));
}

bool sqlite_has_fts5(Db& db) {
    try {
        auto q = db.prepare("SELECT 1 FROM pragma_module_list WHERE name = 'fts5'");
        return q.step();
    } catch (const DbError&) {
        // A library built without the introspection pragmas: ask how it was compiled.
        return sqlite3_compileoption_used("ENABLE_FTS5") != 0;
    }
}

void require_fts5(Db& db) {
    if (!sqlite_has_fts5(db))
        throw ProjectError(db.path() + ": this SQLite library (" + sqlite3_libversion() +
                           ") has no FTS5 module, which Spanscope needs to search the sections of "
                           "a project; install one built with FTS5 (Debian 12's libsqlite3-0 "
                           "is); the file was not changed");
}

void migrate(Db& db, int from) {
    if (from < kSchemaVersion)
        require_fts5(db);
    if (from > kSchemaVersion)
        throw ProjectError(db.path() + ": written by a newer Spanscope (schema version " +
                           std::to_string(from) + "; this build reads up to " +
                           std::to_string(kSchemaVersion) + "); the file was not changed");
    for (int v = from + 1; v <= kSchemaVersion; ++v) {
        Transaction tx(db);
        db.exec(kMigrations[v - 1]);
        db.prepare("UPDATE schema_version SET version = ?").bind(1, int64_t{v}).run();
        tx.commit();
    }
}

} // namespace spanscope
