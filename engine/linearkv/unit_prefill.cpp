#include "engine/linearkv/unit_prefill.h"

#include "engine/memory/kv_rows.h"

#include <stdexcept>
#include <string>

namespace spanscope {

std::vector<float> prefill_unit(Session& session, const DocumentUnit& unit, size_t first,
                                int64_t offset, const ChunkDone& on_chunk,
                                const std::atomic<bool>* cancel,
                                const std::function<void(int64_t, int64_t)>& progress,
                                bool surprisal) {
    if (first >= unit.chunks.size())
        throw std::invalid_argument("no chunk to prefill");
    if (session.n_past() != offset + unit.chunks[first].token_begin)
        throw std::invalid_argument("the session holds " + std::to_string(session.n_past()) +
                                    " tokens; chunk " + std::to_string(first) + " starts at " +
                                    std::to_string(offset + unit.chunks[first].token_begin));
    const int64_t total = unit.n_tokens() - unit.chunks[first].token_begin;
    int64_t done_before = 0;
    std::vector<float> logits, surp;
    for (size_t c = first; c < unit.chunks.size(); ++c) {
        const auto& chunk = unit.chunks[c];
        const int32_t next = c + 1 < unit.chunks.size() ? unit.chunks[c + 1].tokens.front() : -1;
        surp.assign(chunk.tokens.size(), 0.0f);
        auto chunk_progress = [&](int64_t done, int64_t) {
            if (progress)
                progress(done_before + done, total);
        };
        logits = session.prefill(chunk.tokens, cancel, chunk_progress,
                                 surprisal ? surp.data() : nullptr, next);
        done_before += static_cast<int64_t>(chunk.tokens.size());
        trim_sliding_layers(session.memory(), session.model().info(), session.n_past(),
                            session.ubatch());
        if (on_chunk)
            on_chunk(c, surp, logits);
    }
    return logits;
}

} // namespace spanscope
