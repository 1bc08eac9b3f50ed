#include "storage/project.h"

#include "engine/text/text_input.h" // is_valid_utf8
#include "storage/project_clock.h"
#include "storage/project_schema.h"

#include <xxhash.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

namespace spanscope {

namespace {

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

// A chunk row's checksum: XXH3-64 over its numbers and its two blobs, as a signed integer.
int64_t chunk_checksum(int64_t unit, int64_t ordinal, int64_t char_begin, int64_t char_end,
                       int64_t token_begin, int64_t token_end, const std::vector<uint8_t>& tokens,
                       const std::vector<uint8_t>& chars) {
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (const int64_t v : {unit, ordinal, char_begin, char_end, token_begin, token_end})
        XXH3_64bits_update(st, &v, sizeof v);
    XXH3_64bits_update(st, tokens.data(), tokens.size());
    XXH3_64bits_update(st, chars.data(), chars.size());
    const uint64_t h = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    int64_t out;
    std::memcpy(&out, &h, sizeof out);
    return out;
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

/// "2,3,7" from the ocr_pages column; entries that are not page numbers are skipped (a damaged
/// column loses marks, never the document).
std::vector<int32_t> parse_page_list(const std::string& s) {
    std::vector<int32_t> out;
    size_t b = 0;
    while (b < s.size()) {
        const size_t e = std::min(s.find(',', b), s.size());
        const std::string item = s.substr(b, e - b);
        if (!item.empty() && item.size() <= 9 &&
            item.find_first_not_of("0123456789") == std::string::npos)
            out.push_back(static_cast<int32_t>(std::stol(item)));
        b = e + 1;
    }
    return out;
}

std::string page_list_text(const std::vector<int32_t>& pages) {
    std::string out;
    for (const int32_t p : pages) {
        if (!out.empty())
            out += ',';
        out += std::to_string(p);
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
    d.ocr_pages = parse_page_list(q.text(10));
    return d;
}

constexpr const char* kDocumentColumns =
    "id, position, path, name, format, encoding, content_hash, added_at, length(CAST(text AS "
    "BLOB)), warnings, ocr_pages FROM documents";

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
    } catch (const std::exception& e) { // DbError, or ProjectError (no FTS5)
        std::filesystem::remove(tmp);
        std::filesystem::remove(tmp + "-wal");
        std::filesystem::remove(tmp + "-shm");
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
        // Locked by another connection: the file is fine, the caller can try again.
        if (e.lock_conflict())
            throw;
        throw ProjectError(path + ": cannot be read as a project (" + e.what() +
                               "); the file was not changed",
                           e.code());
    }
    if (version <= 0)
        throw ProjectError(path + ": is an SQLite database but not a Spanscope project; the file "
                                  "was not changed");
    if (version > kSchemaVersion)
        migrate(*db, version); // throws: newer than this build
    require_fts5(*db);         // before anything is written
    try {
        db->exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                 "PRAGMA foreign_keys = ON");
        migrate(*db, version);
    } catch (const DbError& e) {
        throw ProjectError(path + ": cannot be opened as a project (" + e.what() + ")", e.code());
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
    auto same = db_->prepare("SELECT id, text FROM documents WHERE content_hash = ?");
    same.bind(1, hash);
    int64_t replace = 0; // a document whose text is replaced
    if (same.step()) {
        const int64_t id = same.int64(0);
        const bool intact = content_hash(same.text(1)) == hash;
        same.reset();
        if (intact) {
            tx.commit();
            if (outcome)
                *outcome = AddOutcome::Unchanged;
            return id;
        }
        replace = id; // the stored copy is damaged: this one repairs it
    }
    if (!replace) {
        auto by_path =
            db_->prepare("SELECT id FROM documents WHERE path = ? ORDER BY id DESC LIMIT 1");
        by_path.bind(1, source_path);
        if (by_path.step())
            replace = by_path.int64(0);
    }
    if (replace) {
        // The file changed since it was added (or its stored text was damaged): new text, new
        // chunks (their states go with them).
        const int64_t id = replace;
        db_->prepare("DELETE FROM chunks WHERE document_id = ?").bind(1, id).run();
        db_->prepare("UPDATE documents SET name = ?, format = ?, encoding = ?, content_hash = ?, "
                     "text = ?, offset_map = ?, warnings = ?, added_at = ?, ocr_pages = ? "
                     "WHERE id = ?")
            .bind(1, name)
            .bind(2, format)
            .bind(3, doc.source_encoding)
            .bind(4, hash)
            .bind(5, doc.text)
            .bind_blob(6, blob.data(), blob.size())
            .bind(7, warnings)
            .bind(8, now_iso())
            .bind(9, page_list_text(doc.ocr_pages))
            .bind(10, id)
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
        "offset_map, warnings, added_at, ocr_pages) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, position)
        .bind(2, source_path)
        .bind(3, name)
        .bind(4, format)
        .bind(5, doc.source_encoding)
        .bind(6, hash)
        .bind(7, doc.text)
        .bind_blob(8, blob.data(), blob.size())
        .bind(9, warnings)
        .bind(10, now_iso())
        .bind(11, page_list_text(doc.ocr_pages));
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
    auto q = db_->prepare("SELECT text, content_hash, path FROM documents WHERE id = ?");
    q.bind(1, id);
    if (!q.step())
        throw ProjectError(path() + ": no document " + std::to_string(id));
    std::string text = q.text(0);
    // The content hash doubles as the text's checksum: damaged text is never answered from.
    if (content_hash(text) != q.text(1))
        throw ProjectError(path() + ": the stored text of document " + std::to_string(id) +
                           " is damaged (its hash does not match); ingest " + q.text(2) +
                           " again to replace it, or remove the document");
    return text;
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
        "token_begin, token_end, tokens, token_chars, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?)");
    // Each unit's text goes into the full-text index with its chunks (schema migration 2): the
    // bytes [first chunk's char_begin, last chunk's char_end) of the document text.
    auto doc = db_->prepare("SELECT text FROM documents WHERE id = ?");
    doc.bind(1, document_id);
    const std::string text = doc.step() ? doc.text(0) : std::string();
    doc.reset();
    auto index = db_->prepare("INSERT INTO unit_text(rowid, text) VALUES (?, ?)");
    for (const auto& u : units) {
        int64_t begin = INT64_MAX, end = 0;
        for (const auto& ch : u.chunks) {
            begin = std::min(begin, ch.char_begin);
            end = std::max(end, ch.char_end);
        }
        if (u.chunks.empty() || begin < 0 || end > static_cast<int64_t>(text.size()) || begin > end)
            throw std::invalid_argument("unit " + std::to_string(u.index) + " of document " +
                                        std::to_string(document_id) +
                                        " lies outside the document's text");
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
                .bind_blob(11, offsets.data(), offsets.size())
                .bind(12,
                      chunk_checksum(u.index, static_cast<int64_t>(c), ch.char_begin, ch.char_end,
                                     ch.token_begin, ch.token_end(), tokens, offsets));
            ins.run();
            if (c == 0)
                index.bind(1, db_->last_insert_id())
                    .bind(2, std::string_view(text).substr(static_cast<size_t>(begin),
                                                           static_cast<size_t>(end - begin)))
                    .run();
        }
    }
    tx.commit();
    return true;
}

std::vector<DocumentUnit> Project::load_units(int64_t document_id, const std::string& key,
                                              std::vector<std::vector<int64_t>>* chunk_ids) {
    auto q = db_->prepare(
        "SELECT id, unit, ordinal, char_begin, char_end, token_begin, token_end, tokens, "
        "token_chars, checksum FROM chunks WHERE document_id = ? AND chunking = ? ORDER BY unit, "
        "ordinal");
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
        const auto token_blob = q.blob(7), chars_blob = q.blob(8);
        if (chunk_checksum(unit, ordinal, c.char_begin, c.char_end, c.token_begin, q.int64(6),
                           token_blob, chars_blob) != q.int64(9))
            throw damaged("checksum mismatch in chunk " + std::to_string(ordinal) + " of section " +
                          std::to_string(unit + 1));
        if (token_blob.size() % 4 != 0 || chars_blob.size() % 4 != 0)
            throw damaged("a blob is not a whole number of int32 values");
        c.tokens = from_blob<int32_t>(token_blob, "token ids");
        const auto chars = from_blob<int32_t>(chars_blob, "token offsets");
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

} // namespace spanscope
