// Cutting a document into chunks and units (docs/linearkv.md).
//
// A *unit* is what is prefilled on its own: its own BOS (where the model wants one) and document
// header (prompt.h, document_unit_header), positions from 0.
// A document is one unit unless it is longer than max_unit_tokens; then it is split at chunk
// boundaries into sections ("part k of N"), each its own unit and position space.
// A *chunk* (~target_tokens) is cut at paragraph boundaries (a blank line), then at sentence
// boundaries, then between words; it is the unit of persistence, progress and resume. Each
// chunk's text is tokenised on its own, and the unit's token sequence is the concatenation of
// its chunks' tokens: the same ids whether the unit is prefilled now or restored later
// (tests/README.md, failure mode 8).
// Each chunk is encoded where it stands (Tokenizer::start_after the header or the chunk before
// it), so a vocabulary with a space prefix (Llama 2, Mistral 7B) puts its space only where
// llama.cpp puts it on the whole prompt: after a special piece, never at a chunk that continues
// text. Where the cuts fall, and what that means for the ids against one encoding of the whole
// text:
// - paragraphs: right after the blank line's last newline (spaces that indent the next
//   paragraph go with it): no SentencePiece piece spans a line end (Llama 2 and Mistral spell
//   it as the byte <0x0A>; Gemma's newline runs are user-defined pieces), so the ids are the
//   whole text's (tests/unit/test_spm_space_prefix.cpp, against llama.cpp);
// - sentences and words: after the whitespace that ends them ("end. " | "Next"), so the next
//   chunk's first word lacks the "▁" it has in the whole text ("▁" "Next" for "▁Next"), in
//   every vocabulary: a piece boundary the model rarely saw, once per such cut;
// - a word longer than max(16, 2 × target_tokens) bytes is cut inside, at a UTF-8 character
//   boundary: its pieces on either side are the ones of each half.
#pragma once

#include "engine/text/chat_format.h"
#include "engine/text/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {

struct ChunkingOptions {
    int64_t target_tokens = 1024; ///< tokens per chunk (about; paragraphs are kept whole)
    int64_t max_unit_tokens = 0;  ///< most tokens per unit; must be > 0
    ChatFormat chat_format = ChatFormat::Completion; ///< the unit header's format (prompt.h)
};

struct TextChunk {
    int64_t char_begin = 0, char_end = 0; ///< bytes of the document text [begin, end)
    int64_t token_begin = 0;              ///< position of tokens[0] within its unit
    std::vector<int32_t> tokens;          ///< ids (the unit's first chunk starts with its header)
    /// Byte offset into the document text where each token's text starts; -1 for tokens that
    /// are not document text (BOS, header, trailer). [tokens.size()]
    std::vector<int64_t> token_chars;
    int64_t token_end() const { return token_begin + static_cast<int64_t>(tokens.size()); }
};

struct DocumentUnit {
    int index = 0; ///< 0-based section number
    int64_t char_begin = 0, char_end = 0;
    std::vector<TextChunk> chunks;
    int64_t n_tokens() const { return chunks.empty() ? 0 : chunks.back().token_end(); }
};

/// Byte ranges [begin, end) of `text` for chunks of about target_tokens tokens, covering the
/// whole text in order. Throws std::invalid_argument when target_tokens < 1.
std::vector<std::pair<int64_t, int64_t>>
split_into_chunks(const Tokenizer& tok, const std::string& text, int64_t target_tokens);

/// The units of a document: `name` is shown to the model in the header ("Document: NAME").
/// Throws std::invalid_argument (empty text, invalid UTF-8, options out of range, or a chunk
/// that alone exceeds max_unit_tokens).
std::vector<DocumentUnit> build_document_units(const Tokenizer& tok, const std::string& name,
                                               const std::string& text,
                                               const ChunkingOptions& options);

} // namespace spanscope
