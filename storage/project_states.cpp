// Project: chunk states — the names of the models they belong to, storing, checking presence,
// least-recently-used eviction.
#include "storage/project.h"
#include "storage/project_clock.h"

#include <cstring>
#include <set>

namespace spanscope {

void Project::name_model(const std::string& fingerprint, const std::string& name) {
    const std::string key = "model_name:" + fingerprint;
    auto q = db_->prepare("SELECT value FROM settings WHERE key = ?");
    q.bind(1, key);
    if (q.step() && q.text(0) == name)
        return;
    db_->prepare("INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)")
        .bind(1, key)
        .bind(2, name)
        .run();
}

bool Project::has_state(int64_t chunk_id, const std::string& fingerprint, StateKind kind) {
    auto q = db_->prepare(
        "SELECT 1 FROM chunk_states WHERE chunk_id = ? AND fingerprint = ? AND kind = ?");
    q.bind(1, chunk_id).bind(2, fingerprint).bind(3, static_cast<int64_t>(kind));
    return q.step();
}

bool Project::has_state_of_other_fingerprint(int64_t chunk_id, const std::string& fingerprint,
                                             StateKind kind) {
    auto q = db_->prepare(
        "SELECT 1 FROM chunk_states WHERE chunk_id = ? AND fingerprint <> ? AND kind = ?");
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
                                 const std::vector<uint8_t>& tail_blob, int64_t drop_tail_of,
                                 const std::vector<uint8_t>* recurrent_blob) {
    Transaction tx(*db_);
    // REPLACE of the metadata row deletes the old blob (cascade); the new one follows.
    auto meta = db_->prepare("INSERT OR REPLACE INTO chunk_states(chunk_id, fingerprint, kind, "
                             "bytes, rows, last_used) VALUES (?, ?, ?, ?, ?, ?)");
    auto data = db_->prepare("INSERT INTO chunk_state_blobs(chunk_id, fingerprint, kind, blob) "
                             "VALUES (?, ?, ?, ?)");
    const int64_t t = now_ms();
    std::vector<std::pair<StateKind, const std::vector<uint8_t>*>> blobs{
        {StateKind::AttentionRows, &rows_blob}, {StateKind::SlidingTail, &tail_blob}};
    if (recurrent_blob)
        blobs.emplace_back(StateKind::RecurrentStates, recurrent_blob);
    for (const auto& [kind, blob] : blobs) {
        meta.bind(1, chunk_id)
            .bind(2, fingerprint)
            .bind(3, static_cast<int64_t>(kind))
            .bind(4, static_cast<int64_t>(blob->size()))
            .bind(5, chunk_state_rows(*blob))
            .bind(6, t);
        meta.run();
        data.bind(1, chunk_id)
            .bind(2, fingerprint)
            .bind(3, static_cast<int64_t>(kind))
            .bind_blob(4, blob->data(), blob->size());
        data.run();
    }
    // A SEKV state built from this chunk's earlier rows (project_sekv.cpp: keyed
    // "fingerprint/options") must not be held beside the new ones (tests/README.md, failure mode
    // 8).
    db_->prepare("DELETE FROM segmentations WHERE chunk_id = ? AND substr(fingerprint, 1, ?) = ?")
        .bind(1, chunk_id)
        .bind(2, static_cast<int64_t>(fingerprint.size() + 1))
        .bind(3, fingerprint + "/")
        .run();
    if (drop_tail_of > 0)
        for (const auto kind : {StateKind::SlidingTail, StateKind::RecurrentStates})
            db_->prepare(
                   "DELETE FROM chunk_states WHERE chunk_id = ? AND fingerprint = ? AND kind = ?")
                .bind(1, drop_tail_of)
                .bind(2, fingerprint)
                .bind(3, static_cast<int64_t>(kind))
                .run();
    tx.commit();
}

namespace {

/// Delete every state of these chunks for this model, SEKV states included, inside the
/// caller's transaction.
void delete_state_rows(Db& db, const std::vector<int64_t>& chunk_ids,
                       const std::string& fingerprint) {
    auto del = db.prepare("DELETE FROM chunk_states WHERE chunk_id = ? AND fingerprint = ?");
    // SEKV states are keyed "fingerprint/options" (project_sekv.cpp) and go with the states.
    auto del_sekv = db.prepare(
        "DELETE FROM segmentations WHERE chunk_id = ? AND substr(fingerprint, 1, ?) = ?");
    for (const auto id : chunk_ids) {
        del.bind(1, id).bind(2, fingerprint).run();
        del_sekv.bind(1, id)
            .bind(2, static_cast<int64_t>(fingerprint.size() + 1))
            .bind(3, fingerprint + "/")
            .run();
    }
}

} // namespace

void Project::delete_states(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint) {
    Transaction tx(*db_);
    delete_state_rows(*db_, chunk_ids, fingerprint);
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
            // The states and the event that says where they went, in one transaction: a crash
            // never leaves a unit evicted without its event.
            Transaction tx(*db_);
            delete_state_rows(*db_, chunk_ids, fp);
            log_event("evicted", what + ": " + std::to_string(bytes) +
                                     " bytes of chunk states (least recently used; cache limit " +
                                     std::to_string(limit) + " bytes)");
            tx.commit();
            evicted += bytes;
            found = true;
            break;
        }
        if (!found)
            return evicted;
    }
}

} // namespace spanscope
