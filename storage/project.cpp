#include "project.h"

#include "project_schema.h"
#include "tokenizer.h"

#include <xxhash.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

namespace spanscope {

namespace {

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string now_iso() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

template <class T> std::vector<uint8_t> to_blob(const std::vector<T>& v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!v.empty())
        std::memcpy(b.data(), v.data(), b.size());
    return b;
}

template <class T> std::vector<T> from_blob(const std::vector<uint8_t>& b, const char* what) {
    if (b.size() % sizeof(T) != 0)
        throw ProjectError(std::string("stored ") + what + " has a size of " +
                           std::to_string(b.size()) + " bytes, not a multiple of " +
                           std::to_string(sizeof(T)));
    std::vector<T> v(b.size() / sizeof(T));
    if (!b.empty())
        std::memcpy(v.data(), b.data(), b.size());
    return v;
}

std::string content_hash(const std::string& text) {
    const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (const auto byte : c.digest) {
        s += digits[byte >> 4];
        s += digits[byte & 15];
    }
    return s;
}

std::vector<std::string> split_lines(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b < s.size()) {
        const size_t e = s.find('\n', b);
        out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos)
            break;
        b = e + 1;
    }
    return out;
}

DocumentRecord read_document(Stmt& q) {
    DocumentRecord d;
    d.id = q.int64(0);
    d.position = q.int64(1);
    d.path = q.text(2);
    d.name = q.text(3);
    d.format = q.text(4);
    d.encoding = q.text(5);
    d.content_hash = q.text(6);
    d.added_at = q.text(7);
    d.text_bytes = q.int64(8);
    d.warnings = split_lines(q.text(9));
    return d;
}

constexpr const char* kDocumentColumns =
    "id, position, path, name, format, encoding, content_hash, added_at, length(CAST(text AS "
    "BLOB)), warnings FROM documents";

} // namespace

std::string resolve_project_path(const std::string& value) {
    std::string dir;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x)
        dir = std::string(x) + "/spanscope/projects";
    else if (const char* h = std::getenv("HOME"); h && *h)
        dir = std::string(h) + "/.local/share/spanscope/projects";
    else
        dir = "spanscope-projects";
    if (value.empty())
        return dir + "/default.spanscope";
    if (value.find('/') != std::string::npos)
        return value;
    return dir + "/" + value + (value.ends_with(".spanscope") ? "" : ".spanscope");
}

Project::Project(std::unique_ptr<Db> db) : db_(std::move(db)) {}
Project::~Project() = default;

namespace {
// Make a new project atomically: the schema is written into a temporary file beside `path`,
// which is then linked into place, so a process killed at any moment leaves either no project
// or a complete empty one (never a file that later runs refuse).
void create_project_file(const std::string& path) {
    // A name of this process's own: two processes creating the same project never touch each
    // other's file (a killed creation leaves a stray PATH.creating-PID behind, nothing else).
    const std::string tmp = path + ".creating-" + std::to_string(::getpid());
    std::filesystem::remove(tmp);
    std::filesystem::remove(tmp + "-wal");
    std::filesystem::remove(tmp + "-shm");
    try {
        Db db(tmp, /*create=*/true);
        db.exec("PRAGMA journal_mode = WAL");
        migrate(db, 0);
    } catch (const DbError& e) {
        std::filesystem::remove(tmp);
        throw ProjectError(path + ": cannot be created (" + e.what() + ")");
    }
    // link() fails rather than replace a file another process created meanwhile (EEXIST: that
    // complete project is used).
    if (::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        const std::string why = std::strerror(errno);
        std::filesystem::remove(tmp);
        throw ProjectError(path + ": cannot be created (" + why + ")");
    }
    std::filesystem::remove(tmp);
}
} // namespace

std::unique_ptr<Project> Project::open(const std::string& path, bool create) {
    struct stat st {};
    bool exists = ::stat(path.c_str(), &st) == 0;
    if (!exists && !create)
        throw ProjectError(path + ": no such project");
    if (!exists) {
        if (const auto parent = std::filesystem::path(path).parent_path(); !parent.empty())
            std::filesystem::create_directories(parent);
        create_project_file(path);
    }
    check_project_file(path);

    std::unique_ptr<Db> db;
    int version = 0;
    try {
        db = std::make_unique<Db>(path, /*create=*/false);
        db->exec("PRAGMA busy_timeout = 5000");
        version = read_schema_version(*db);
    } catch (const DbError& e) {
        throw ProjectError(path + ": cannot be read as a project (" + e.what() +
                           "); the file was not changed");
    }
    if (version <= 0)
        throw ProjectError(path + ": is an SQLite database but not a Spanscope project; the file "
                                  "was not changed");
    if (version > kSchemaVersion)
        migrate(*db, version); // throws: newer than this build
    try {
        db->exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                 "PRAGMA foreign_keys = ON");
        migrate(*db, version);
    } catch (const DbError& e) {
        throw ProjectError(path + ": cannot be opened as a project (" + e.what() + ")");
    }
    return std::unique_ptr<Project>(new Project(std::move(db)));
}

int Project::schema_version() {
    return read_schema_version(*db_);
}

int64_t Project::add_document(const std::string& source_path, const LoadedDocument& doc,
                              AddOutcome* outcome) {
    const std::string hash = content_hash(doc.text);
    std::vector<int64_t> map;
    for (const auto& a : doc.offset_map) {
        map.push_back(a.text_offset);
        map.push_back(a.source_offset);
        map.push_back(a.page);
        map.push_back(a.line);
    }
    std::string warnings;
    for (const auto& w : doc.warnings)
        warnings += (warnings.empty() ? "" : "\n") + w;
    // The name is shown to the model and must be UTF-8: each byte that breaks it becomes '?'.
    std::string name = std::filesystem::path(source_path).filename().string();
    if (!is_valid_utf8(name))
        for (auto& c : name)
            if (static_cast<unsigned char>(c) >= 0x80)
                c = '?';
    const auto blob = to_blob(map);
    const std::string format = std::string(format_name(doc.format)) + (doc.gzip ? "+gzip" : "");

    // Look-ups and the write in one transaction: two processes adding the same file agree.
    Transaction tx(*db_);
    auto same = db_->prepare("SELECT id FROM documents WHERE content_hash = ?");
    same.bind(1, hash);
    if (same.step()) {
        const int64_t id = same.int64(0);
        same.reset();
        tx.commit();
        if (outcome)
            *outcome = AddOutcome::Unchanged;
        return id;
    }
    auto by_path = db_->prepare("SELECT id FROM documents WHERE path = ? ORDER BY id DESC LIMIT 1");
    by_path.bind(1, source_path);
    if (by_path.step()) {
        // The file changed since it was added: new text, new chunks (their states go with them).
        const int64_t id = by_path.int64(0);
        by_path.reset();
        db_->prepare("DELETE FROM chunks WHERE document_id = ?").bind(1, id).run();
        db_->prepare("UPDATE documents SET name = ?, format = ?, encoding = ?, content_hash = ?, "
                     "text = ?, offset_map = ?, warnings = ?, added_at = ? WHERE id = ?")
            .bind(1, name)
            .bind(2, format)
            .bind(3, doc.source_encoding)
            .bind(4, hash)
            .bind(5, doc.text)
            .bind_blob(6, blob.data(), blob.size())
            .bind(7, warnings)
            .bind(8, now_iso())
            .bind(9, id)
            .run();
        tx.commit();
        if (outcome)
            *outcome = AddOutcome::Updated;
        return id;
    }
    auto pos = db_->prepare("SELECT coalesce(max(position), 0) + 1 FROM documents");
    pos.step();
    const int64_t position = pos.int64(0);
    pos.reset();
    auto ins = db_->prepare(
        "INSERT INTO documents(position, path, name, format, encoding, content_hash, text, "
        "offset_map, warnings, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, position)
        .bind(2, source_path)
        .bind(3, name)
        .bind(4, format)
        .bind(5, doc.source_encoding)
        .bind(6, hash)
        .bind(7, doc.text)
        .bind_blob(8, blob.data(), blob.size())
        .bind(9, warnings)
        .bind(10, now_iso());
    ins.run();
    const int64_t id = db_->last_insert_id();
    tx.commit();
    if (outcome)
        *outcome = AddOutcome::Added;
    return id;
}

std::vector<DocumentRecord> Project::documents() {
    std::vector<DocumentRecord> out;
    auto q = db_->prepare(std::string("SELECT ") + kDocumentColumns + " ORDER BY position");
    while (q.step())
        out.push_back(read_document(q));
    return out;
}

std::optional<DocumentRecord> Project::document(int64_t id) {
    auto q = db_->prepare(std::string("SELECT ") + kDocumentColumns + " WHERE id = ?");
    q.bind(1, id);
    if (!q.step())
        return std::nullopt;
    return read_document(q);
}

std::string Project::document_text(int64_t id) {
    auto q = db_->prepare("SELECT text FROM documents WHERE id = ?");
    q.bind(1, id);
    if (!q.step())
        throw ProjectError(path() + ": no document " + std::to_string(id));
    return q.text(0);
}

std::vector<SourceAnchor> Project::document_offset_map(int64_t id) {
    auto q = db_->prepare("SELECT offset_map FROM documents WHERE id = ?");
    q.bind(1, id);
    if (!q.step())
        throw ProjectError(path() + ": no document " + std::to_string(id));
    const auto v = from_blob<int64_t>(q.blob(0), "offset map");
    if (v.size() % 4 != 0)
        throw ProjectError(path() + ": document " + std::to_string(id) +
                           " has a damaged offset map");
    std::vector<SourceAnchor> out;
    for (size_t i = 0; i < v.size(); i += 4)
        out.push_back(
            {v[i], v[i + 1], static_cast<int32_t>(v[i + 2]), static_cast<int32_t>(v[i + 3])});
    return out;
}

bool Project::remove_document(int64_t id) {
    Transaction tx(*db_);
    db_->prepare("DELETE FROM documents WHERE id = ?").bind(1, id).run();
    const bool removed = db_->changes() > 0;
    tx.commit();
    return removed;
}

bool Project::has_chunks(int64_t document_id, const std::string& key) {
    auto q = db_->prepare("SELECT 1 FROM chunks WHERE document_id = ? AND chunking = ? LIMIT 1");
    q.bind(1, document_id).bind(2, key);
    return q.step();
}

bool Project::insert_chunks(int64_t document_id, const std::string& key,
                            const std::vector<DocumentUnit>& units) {
    Transaction tx(*db_);
    auto exists =
        db_->prepare("SELECT 1 FROM chunks WHERE document_id = ? AND chunking = ? LIMIT 1");
    exists.bind(1, document_id).bind(2, key);
    if (exists.step())
        return false; // another process chunked it meanwhile: the same chunks
    exists.reset();
    auto ins = db_->prepare(
        "INSERT INTO chunks(document_id, chunking, unit, ordinal, units, char_begin, char_end, "
        "token_begin, token_end, tokens, token_chars) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const auto& u : units)
        for (size_t c = 0; c < u.chunks.size(); ++c) {
            const auto& ch = u.chunks[c];
            std::vector<int32_t> chars(ch.token_chars.begin(), ch.token_chars.end());
            const auto tokens = to_blob(ch.tokens);
            const auto offsets = to_blob(chars);
            ins.bind(1, document_id)
                .bind(2, key)
                .bind(3, int64_t{u.index})
                .bind(4, static_cast<int64_t>(c))
                .bind(5, static_cast<int64_t>(units.size()))
                .bind(6, ch.char_begin)
                .bind(7, ch.char_end)
                .bind(8, ch.token_begin)
                .bind(9, ch.token_end())
                .bind_blob(10, tokens.data(), tokens.size())
                .bind_blob(11, offsets.data(), offsets.size());
            ins.run();
        }
    tx.commit();
    return true;
}

std::vector<DocumentUnit> Project::load_units(int64_t document_id, const std::string& key,
                                              std::vector<std::vector<int64_t>>* chunk_ids) {
    auto q = db_->prepare(
        "SELECT id, unit, ordinal, char_begin, char_end, token_begin, token_end, tokens, "
        "token_chars FROM chunks WHERE document_id = ? AND chunking = ? ORDER BY unit, ordinal");
    q.bind(1, document_id).bind(2, key);
    std::vector<DocumentUnit> units;
    if (chunk_ids)
        chunk_ids->clear();
    auto damaged = [&](const std::string& why) {
        return ProjectError(path() + ": the chunks of document " + std::to_string(document_id) +
                            " are damaged (" + why + ")");
    };
    while (q.step()) {
        const auto unit = q.int64(1), ordinal = q.int64(2);
        if (unit == static_cast<int64_t>(units.size())) {
            units.emplace_back();
            units.back().index = static_cast<int>(unit);
            if (chunk_ids)
                chunk_ids->emplace_back();
        }
        if (unit != static_cast<int64_t>(units.size()) - 1 ||
            ordinal != static_cast<int64_t>(units.back().chunks.size()))
            throw damaged("units or chunks out of sequence");
        TextChunk c;
        c.char_begin = q.int64(3);
        c.char_end = q.int64(4);
        c.token_begin = q.int64(5);
        c.tokens = from_blob<int32_t>(q.blob(7), "token ids");
        const auto chars = from_blob<int32_t>(q.blob(8), "token offsets");
        c.token_chars.assign(chars.begin(), chars.end());
        const int64_t expect_begin = units.back().chunks.empty() ? 0 : units.back().n_tokens();
        if (c.token_begin != expect_begin || c.token_end() != q.int64(6) ||
            c.token_chars.size() != c.tokens.size() || c.tokens.empty())
            throw damaged("token ranges do not add up");
        auto& u = units.back();
        if (u.chunks.empty())
            u.char_begin = c.char_begin;
        u.char_end = c.char_end;
        u.chunks.push_back(std::move(c));
        if (chunk_ids)
            chunk_ids->back().push_back(q.int64(0));
    }
    return units;
}

std::optional<ChunkingSummary> Project::chunking_summary(int64_t document_id,
                                                         const std::string& key) {
    auto q = db_->prepare("SELECT count(*), coalesce(sum(token_end - token_begin), 0), "
                          "coalesce(max(units), 0) FROM chunks WHERE document_id = ? AND "
                          "chunking = ?");
    q.bind(1, document_id).bind(2, key);
    q.step();
    if (q.int64(0) == 0)
        return std::nullopt;
    return ChunkingSummary{q.int64(1), q.int64(0), static_cast<int>(q.int64(2))};
}

void Project::delete_chunks(int64_t document_id, const std::string& key) {
    Transaction tx(*db_);
    db_->prepare("DELETE FROM chunks WHERE document_id = ? AND chunking = ?")
        .bind(1, document_id)
        .bind(2, key)
        .run();
    tx.commit();
}

bool Project::has_state(int64_t chunk_id, const std::string& fingerprint, StateKind kind) {
    auto q = db_->prepare(
        "SELECT 1 FROM chunk_states WHERE chunk_id = ? AND fingerprint = ? AND kind = ?");
    q.bind(1, chunk_id).bind(2, fingerprint).bind(3, static_cast<int64_t>(kind));
    return q.step();
}

std::optional<std::vector<uint8_t>>
Project::state_blob(int64_t chunk_id, const std::string& fingerprint, StateKind kind) {
    auto q = db_->prepare(
        "SELECT blob FROM chunk_state_blobs WHERE chunk_id = ? AND fingerprint = ? AND kind = ?");
    q.bind(1, chunk_id).bind(2, fingerprint).bind(3, static_cast<int64_t>(kind));
    if (!q.step())
        return std::nullopt;
    return q.blob(0);
}

void Project::commit_chunk_state(int64_t chunk_id, const std::string& fingerprint,
                                 const std::vector<uint8_t>& rows_blob,
                                 const std::vector<uint8_t>& tail_blob, int64_t drop_tail_of) {
    Transaction tx(*db_);
    // REPLACE of the metadata row deletes the old blob (cascade); the new one follows.
    auto meta = db_->prepare("INSERT OR REPLACE INTO chunk_states(chunk_id, fingerprint, kind, "
                             "bytes, rows, last_used) VALUES (?, ?, ?, ?, ?, ?)");
    auto data = db_->prepare("INSERT INTO chunk_state_blobs(chunk_id, fingerprint, kind, blob) "
                             "VALUES (?, ?, ?, ?)");
    auto rows_of = [](const std::vector<uint8_t>& b) {
        uint32_t n = 0;
        if (b.size() >= kChunkStateHeaderBytes)
            std::memcpy(&n, b.data() + 56, sizeof n); // n_rows (chunk_state.h)
        return static_cast<int64_t>(n);
    };
    const int64_t t = now_ms();
    for (const auto& [kind, blob] : {std::pair{StateKind::AttentionRows, &rows_blob},
                                     std::pair{StateKind::SlidingTail, &tail_blob}}) {
        meta.bind(1, chunk_id)
            .bind(2, fingerprint)
            .bind(3, static_cast<int64_t>(kind))
            .bind(4, static_cast<int64_t>(blob->size()))
            .bind(5, rows_of(*blob))
            .bind(6, t);
        meta.run();
        data.bind(1, chunk_id)
            .bind(2, fingerprint)
            .bind(3, static_cast<int64_t>(kind))
            .bind_blob(4, blob->data(), blob->size());
        data.run();
    }
    if (drop_tail_of > 0)
        db_->prepare("DELETE FROM chunk_states WHERE chunk_id = ? AND fingerprint = ? AND kind = ?")
            .bind(1, drop_tail_of)
            .bind(2, fingerprint)
            .bind(3, static_cast<int64_t>(StateKind::SlidingTail))
            .run();
    tx.commit();
}

void Project::delete_states(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint) {
    Transaction tx(*db_);
    auto del = db_->prepare("DELETE FROM chunk_states WHERE chunk_id = ? AND fingerprint = ?");
    for (const auto id : chunk_ids)
        del.bind(1, id).bind(2, fingerprint).run();
    tx.commit();
}

int64_t Project::state_bytes(const std::vector<int64_t>& chunk_ids,
                             const std::string& fingerprint) {
    auto q = db_->prepare("SELECT coalesce(sum(bytes), 0) FROM chunk_states WHERE chunk_id = ? "
                          "AND fingerprint = ?");
    int64_t total = 0;
    for (const auto id : chunk_ids) {
        q.bind(1, id).bind(2, fingerprint);
        q.step();
        total += q.int64(0);
        q.reset();
    }
    return total;
}

void Project::touch_states(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint) {
    Transaction tx(*db_);
    auto up = db_->prepare(
        "UPDATE chunk_states SET last_used = ? WHERE chunk_id = ? AND fingerprint = ?");
    const int64_t t = now_ms();
    for (const auto id : chunk_ids)
        up.bind(1, t).bind(2, id).bind(3, fingerprint).run();
    tx.commit();
}

int64_t Project::evict_to_limit(const std::vector<int64_t>& keep) {
    const int64_t limit = cache_limit_bytes();
    const std::set<int64_t> kept(keep.begin(), keep.end());
    int64_t evicted = 0;
    for (;;) {
        auto total = db_->prepare("SELECT coalesce(sum(bytes), 0) FROM chunk_states");
        total.step();
        if (total.int64(0) <= limit)
            return evicted;
        // Units (document, chunking, unit, model) by their most recent use, oldest first.
        auto q = db_->prepare(
            "SELECT c.document_id, c.chunking, c.unit, s.fingerprint, max(s.last_used) AS used, "
            "sum(s.bytes), group_concat(c.id) FROM chunk_states s JOIN chunks c ON c.id = "
            "s.chunk_id GROUP BY c.document_id, c.chunking, c.unit, s.fingerprint ORDER BY used");
        bool found = false;
        while (q.step()) {
            const std::string ids = q.text(6);
            std::vector<int64_t> chunk_ids;
            for (size_t b = 0; b < ids.size();) {
                const size_t e = ids.find(',', b);
                chunk_ids.push_back(std::stoll(ids.substr(b, e - b)));
                b = e == std::string::npos ? ids.size() : e + 1;
            }
            bool protected_unit = false;
            for (const auto id : chunk_ids)
                protected_unit = protected_unit || kept.count(id) != 0;
            if (protected_unit)
                continue;
            const int64_t bytes = q.int64(5);
            const std::string fp = q.text(3);
            const std::string what =
                "document " + std::to_string(q.int64(0)) + " unit " + std::to_string(q.int64(2));
            q.reset();
            delete_states(chunk_ids, fp);
            log_event("evicted", what + ": " + std::to_string(bytes) +
                                     " bytes of chunk states (least recently used; cache limit " +
                                     std::to_string(limit) + " bytes)");
            evicted += bytes;
            found = true;
            break;
        }
        if (!found)
            return evicted;
    }
}

int64_t Project::create_chat(const std::string& title) {
    db_->prepare("INSERT INTO chats(title, created_at) VALUES (?, ?)")
        .bind(1, title)
        .bind(2, now_iso())
        .run();
    return db_->last_insert_id();
}

bool Project::has_chat(int64_t chat_id) {
    auto q = db_->prepare("SELECT 1 FROM chats WHERE id = ?");
    q.bind(1, chat_id);
    return q.step();
}

int64_t Project::add_message(int64_t chat_id, const std::string& role, const std::string& text,
                             const std::string& stats_json) {
    db_->prepare("INSERT INTO messages(chat_id, role, text, stats, created_at) VALUES (?, ?, ?, "
                 "?, ?)")
        .bind(1, chat_id)
        .bind(2, role)
        .bind(3, text)
        .bind(4, stats_json)
        .bind(5, now_iso())
        .run();
    return db_->last_insert_id();
}

std::vector<MessageRecord> Project::messages(int64_t chat_id) {
    auto q = db_->prepare(
        "SELECT id, role, text, stats, created_at FROM messages WHERE chat_id = ? ORDER BY id");
    q.bind(1, chat_id);
    std::vector<MessageRecord> out;
    while (q.step())
        out.push_back({q.int64(0), q.text(1), q.text(2), q.text(3), q.text(4)});
    return out;
}

int64_t Project::cache_limit_bytes() {
    auto q = db_->prepare("SELECT value FROM settings WHERE key = 'cache_limit_bytes'");
    if (!q.step())
        return kDefaultCacheLimitBytes;
    return std::stoll(q.text(0));
}

void Project::set_cache_limit_bytes(int64_t bytes) {
    if (bytes < 0)
        throw std::invalid_argument("the cache limit cannot be negative");
    db_->prepare("INSERT OR REPLACE INTO settings(key, value) VALUES ('cache_limit_bytes', ?)")
        .bind(1, std::to_string(bytes))
        .run();
}

void Project::log_event(const std::string& kind, const std::string& message) {
    db_->prepare("INSERT INTO events(at, kind, message) VALUES (?, ?, ?)")
        .bind(1, now_iso())
        .bind(2, kind)
        .bind(3, message)
        .run();
}

std::vector<std::pair<std::string, std::string>> Project::events() {
    std::vector<std::pair<std::string, std::string>> out;
    auto q = db_->prepare("SELECT kind, message FROM events ORDER BY id");
    while (q.step())
        out.emplace_back(q.text(0), q.text(1));
    return out;
}

ProjectInfo Project::info() {
    ProjectInfo i;
    i.path = path();
    i.schema_version = schema_version();
    std::error_code ec;
    i.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path(), ec));
    auto count = [&](const char* sql) {
        auto q = db_->prepare(sql);
        q.step();
        return q.int64(0);
    };
    i.documents = count("SELECT count(*) FROM documents");
    i.chats = count("SELECT count(*) FROM chats");
    i.messages = count("SELECT count(*) FROM messages");
    i.chunks = count("SELECT count(*) FROM chunks");
    i.states = count("SELECT count(*) FROM chunk_states");
    i.state_bytes = count("SELECT coalesce(sum(bytes), 0) FROM chunk_states");
    i.cache_limit_bytes = cache_limit_bytes();
    auto q = db_->prepare("SELECT fingerprint, count(*), sum(bytes), sum(CASE WHEN kind = 1 THEN "
                          "rows ELSE 0 END) FROM chunk_states GROUP BY fingerprint");
    while (q.step())
        i.models.push_back({q.text(0), q.int64(1), q.int64(2), q.int64(3)});
    return i;
}

void Project::vacuum() {
    db_->exec("PRAGMA wal_checkpoint(TRUNCATE); VACUUM");
}

} // namespace spanscope
