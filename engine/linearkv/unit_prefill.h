// Prefill of a document unit chunk by chunk (docs/linearkv.md): the chunks are run in order with
// the earlier chunks in context, and after each chunk the sliding-window layers are trimmed to
// what a continuation still sees (kv_rows.h), which is exactly the state a prefill resumed from
// storage starts from. So a unit prefilled in one go, one resumed after an interruption and one
// restored from storage hold identical memory.
#pragma once

#include "engine/session/session.h"
#include "engine/text/chunking.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace spanscope {

/// After chunk `index` of the unit: its rows' surprisal ([chunk tokens], Session::prefill's
/// convention: row i's surprisal of the token after it, the last row's of the next chunk's first
/// token, NaN after the unit's last token) and the next-token logits after it [n_vocab].
using ChunkDone = std::function<void(size_t index, const std::vector<float>& surprisal,
                                     const std::vector<float>& logits)>;

/// Prefill unit.chunks[first...] into `session`, whose memory must hold the unit's earlier
/// chunks at positions offset + [0, chunks[first].token_begin) (session.n_past() equals
/// offset + chunks[first].token_begin; offset is where the unit starts in the session).
/// progress(tokens done, tokens to do) after each ubatch; cancel checked before each ubatch.
/// Returns the logits after the unit's last token. Throws std::invalid_argument when n_past
/// does not match, and whatever Session::prefill throws (Cancelled, ContextOverflow).
std::vector<float> prefill_unit(Session& session, const DocumentUnit& unit, size_t first,
                                int64_t offset, const ChunkDone& on_chunk = {},
                                const std::atomic<bool>* cancel = nullptr,
                                const std::function<void(int64_t, int64_t)>& progress = {},
                                bool surprisal = true);

} // namespace spanscope
