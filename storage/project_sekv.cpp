// Project: SEKV states of units and the zoom traces of answers.
#include "storage/project.h"

namespace spanscope {

namespace {
std::string sekv_key(const std::string& fingerprint, const std::string& options_key) {
    return fingerprint + "/" + options_key;
}
} // namespace

std::optional<std::vector<uint8_t>> Project::sekv_state_blob(int64_t chunk_id,
                                                             const std::string& fingerprint,
                                                             const std::string& options_key) {
    auto q = db_->prepare("SELECT data FROM segmentations WHERE chunk_id = ? AND fingerprint = ?");
    q.bind(1, chunk_id).bind(2, sekv_key(fingerprint, options_key));
    if (!q.step())
        return std::nullopt;
    return q.blob(0);
}

void Project::put_sekv_state(int64_t chunk_id, const std::string& fingerprint,
                             const std::string& options_key, const std::vector<uint8_t>& blob) {
    db_->prepare("INSERT OR REPLACE INTO segmentations(chunk_id, fingerprint, data) VALUES (?, ?, "
                 "?)")
        .bind(1, chunk_id)
        .bind(2, sekv_key(fingerprint, options_key))
        .bind_blob(3, blob.data(), blob.size())
        .run();
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

} // namespace spanscope
