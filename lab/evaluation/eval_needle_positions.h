// Where the needle a question asks for lies in the session that answers it.
//
// `spanscope-lab eval` prefills a sample's context as the units of one document
// (build_document_units, engine/text/chunking.h), one after another from position 0: each unit
// opens with BOS and its header (in the turn format "<start_of_turn>user\n" too), then the
// context's tokens, then a trailer. The offsets that needle placement records
// (meta "needle_offsets", eval_needles.h) count tokens of the context alone, from its first
// token; in the session the same token is at the header's length plus that offset. The mapping
// below does not rely on that count: it follows each token's byte offset in the text
// (TextChunk::token_chars), so it holds whatever the header and however the context was cut.
#pragma once

#include "engine/sekv/segmentation.h"
#include "engine/text/chunking.h"
#include "lab/evaluation/eval_tasks.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace spanscope::eval {

/// Bytes [begin, end) of a text.
struct ByteRange {
    int64_t begin = 0, end = 0;
};

/// The bytes of s.context holding the statement (without its separator) of the needle whose
/// value the question asks for: the first asked one (meta "asked"[0]) where the task names them,
/// else the first needle (meta "needles"[0]; at the requested depth). nullopt for tasks other
/// than the needle tasks (names starting "niah"). Throws std::logic_error when the statement is
/// not in the context, nlohmann::json's out_of_range or type_error for an "asked" index past the
/// needles or meta fields of another type (a sample the tasks did not make).
std::optional<ByteRange> asked_needle_bytes(const EvalSample& s);

/// The session positions [begin, end) of the tokens that hold any of the bytes `bytes` of the
/// text `units` were built from, the units prefilled one after another from position 0. A token
/// holds the bytes from its token_chars to the next text token's (its chunk's char_end for the
/// last); header and trailer tokens hold none. Throws std::invalid_argument when no token holds
/// any of them (an empty or out-of-text range).
TokenSpan text_positions(const std::vector<DocumentUnit>& units, const ByteRange& bytes);

} // namespace spanscope::eval
