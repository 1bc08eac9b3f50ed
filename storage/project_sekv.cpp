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

} // namespace spanscope
