// Project: chats and messages, settings, the event log, sizes and maintenance.
#include "storage/project.h"
#include "storage/project_clock.h"
#include "storage/project_schema.h"

#include <filesystem>

namespace spanscope {

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

int64_t Project::add_message(int64_t chat_id, const std::string& role, const std::string& text,
                             const std::string& stats_json, const std::vector<uint8_t>& zoom_trace,
                             const std::vector<SourceRecord>& sources,
                             const std::vector<std::vector<SourceRecord>>& token_sources) {
    auto check = [](const std::vector<SourceRecord>& list) {
        for (const auto& s : list)
            if (s.start_char < 0 || s.end_char <= s.start_char || !(s.share >= 0 && s.share <= 1))
                throw std::invalid_argument("a source needs a non-empty range of the document's "
                                            "text and a share in [0, 1]");
    };
    check(sources);
    for (const auto& t : token_sources)
        check(t);
    Transaction tx(*db_);
    const int64_t id = add_message(chat_id, role, text, stats_json);
    if (!zoom_trace.empty())
        db_->prepare("INSERT INTO zoom_traces(message_id, data) VALUES (?, ?)")
            .bind(1, id)
            .bind_blob(2, zoom_trace.data(), zoom_trace.size())
            .run();
    auto insert = db_->prepare(
        "INSERT INTO answer_sources(message_id, token, ordinal, document_id, start_char, "
        "end_char, page, line, share, excerpt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    auto put = [&](int64_t token, const std::vector<SourceRecord>& list) {
        for (size_t i = 0; i < list.size(); ++i) {
            const auto& s = list[i];
            insert.reset();
            insert.bind(1, id)
                .bind(2, token)
                .bind(3, static_cast<int64_t>(i))
                .bind(4, s.document_id)
                .bind(5, s.start_char)
                .bind(6, s.end_char)
                .bind(7, int64_t{s.page})
                .bind(8, int64_t{s.line})
                .bind(9, s.share)
                .bind(10, s.excerpt)
                .run();
        }
    };
    put(-1, sources);
    for (size_t t = 0; t < token_sources.size(); ++t)
        put(static_cast<int64_t>(t), token_sources[t]);
    tx.commit();
    return id;
}

std::optional<std::vector<uint8_t>> Project::zoom_trace(int64_t message_id) {
    auto q = db_->prepare("SELECT data FROM zoom_traces WHERE message_id = ?");
    q.bind(1, message_id);
    if (!q.step())
        return std::nullopt;
    return q.blob(0);
}

std::vector<MessageRecord> Project::messages(int64_t chat_id) {
    auto q = db_->prepare(
        "SELECT id, role, text, stats, created_at FROM messages WHERE chat_id = ? ORDER BY id");
    q.bind(1, chat_id);
    std::vector<MessageRecord> out;
    while (q.step())
        out.push_back({q.int64(0), q.text(1), q.text(2), q.text(3), q.text(4), {}, {}});
    auto s = db_->prepare("SELECT s.message_id, s.document_id, s.start_char, s.end_char, s.page, "
                          "s.line, s.share, s.excerpt, s.token FROM answer_sources s JOIN "
                          "messages m ON m.id = s.message_id WHERE m.chat_id = ? ORDER BY "
                          "s.message_id, s.token, s.ordinal");
    s.bind(1, chat_id);
    size_t at = 0;
    while (s.step()) {
        const int64_t message = s.int64(0);
        while (at < out.size() && out[at].id < message)
            ++at;
        if (at == out.size())
            break;
        if (out[at].id != message)
            continue;
        SourceRecord r{s.int64(1),
                       s.int64(2),
                       s.int64(3),
                       static_cast<int32_t>(s.int64(4)),
                       static_cast<int32_t>(s.int64(5)),
                       s.real(6),
                       s.text(7)};
        // Rows the write path would refuse (a file changed by hand or damaged) are not shown.
        if (r.start_char < 0 || r.end_char <= r.start_char || !(r.share >= 0 && r.share <= 1) ||
            s.int64(4) < 0 || s.int64(4) > INT32_MAX || s.int64(5) < 0 || s.int64(5) > INT32_MAX)
            continue;
        const int64_t token = s.int64(8);
        if (token < 0) {
            out[at].sources.push_back(std::move(r));
        } else if (token < kMaxSourceTokenIndex) { // a token index the file cannot make us allocate
            auto& per = out[at].token_sources;
            if (per.size() <= static_cast<size_t>(token))
                per.resize(static_cast<size_t>(token) + 1);
            per[static_cast<size_t>(token)].push_back(std::move(r));
        }
    }
    return out;
}

std::vector<ChatRecord> Project::chats() {
    auto q = db_->prepare("SELECT c.id, c.title, c.created_at, (SELECT count(*) FROM messages m "
                          "WHERE m.chat_id = c.id) FROM chats c ORDER BY c.id");
    std::vector<ChatRecord> out;
    while (q.step())
        out.push_back({q.int64(0), q.text(1), q.text(2), q.int64(3)});
    return out;
}

bool Project::rename_chat(int64_t chat_id, const std::string& title) {
    if (title.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::invalid_argument("a chat needs a title");
    db_->prepare("UPDATE chats SET title = ? WHERE id = ?").bind(1, title).bind(2, chat_id).run();
    return db_->changes() > 0;
}

bool Project::delete_chat(int64_t chat_id) {
    db_->prepare("DELETE FROM chats WHERE id = ?").bind(1, chat_id).run();
    return db_->changes() > 0;
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
    auto q = db_->prepare(
        "SELECT s.fingerprint, coalesce(n.value, ''), count(*), sum(s.bytes), "
        "sum(CASE WHEN s.kind = 1 THEN s.rows ELSE 0 END), count(DISTINCT s.chunk_id) "
        "FROM chunk_states s LEFT JOIN settings n ON n.key = 'model_name:' || s.fingerprint "
        "GROUP BY s.fingerprint ORDER BY min(s.rowid)");
    while (q.step()) {
        ProjectInfo::PerModel m;
        m.fingerprint = q.text(0);
        m.name = q.text(1);
        m.states = q.int64(2);
        m.bytes = q.int64(3);
        m.tokens = q.int64(4);
        m.chunks = q.int64(5);
        i.models.push_back(std::move(m));
    }
    return i;
}

void Project::vacuum() {
    db_->exec("PRAGMA wal_checkpoint(TRUNCATE); VACUUM");
}

} // namespace spanscope
