// The sources of an answer (docs/architecture.md, Sources): the passages of its context that its
// tokens attended to most. The engine measures each answer token's attention mass over ranges of
// context positions (Session::set_source_ranges; global layers, all query heads; under SEKV a
// summary row or an expanded span counts for the span it stands for); here the ranges are the
// documents' passages, and the answer's shares are summed over its tokens.
#pragma once

#include "engine/sekv/segmentation.h"
#include "engine/text/chunking.h"
#include "storage/document_loader.h"
#include "storage/project.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spanscope {

/// A passage of an answer's context: a stretch of one document's text at some context positions.
struct SourcePassage {
    int64_t document_id = 0;
    int32_t pos_begin = 0, pos_end = 0;   ///< context positions [begin, end)
    int64_t char_begin = 0, char_end = 0; ///< bytes [begin, end) of the document's text
};

/// The most tokens a passage cut at sentence ends holds; a longer sentence is cut after as many.
inline constexpr int64_t kMaxPassageTokens = 64;

/// Append the passages of one section (`unit` of a document whose text is `text`) held at
/// context positions from `offset`. With `spans` holding spans (the section's SEKV
/// segmentation, unit-local positions): one passage per span, beginning after the span before
/// it (the anchors and short runs between two spans go with the span after them), the tokens
/// after the last span one more. Without (or a segmentation without spans: a section too short
/// for the budget): the section's tokens cut where a sentence ends (after '.', '!', '?', or
/// '…', closing quotes and brackets, before whitespace), where a paragraph ends (a blank
/// line), after a table row (a line with a tab) and before a list item ("- ", "* ", "• ",
/// "12. ", "3) ", "(a) " starting a line), or after kMaxPassageTokens tokens; another line end
/// is a space (hard-wrapped text). Tokens that are not document text (BOS, the unit's header:
/// token_chars -1) are in no passage. A passage's bytes run from its first token's start to the
/// next token's (the section's end for the last), whitespace at its ends left out, and widened
/// to whole words where a cut falls inside one (the bytes of neighbouring passages may then
/// overlap by a word; their positions never do).
void append_section_passages(const DocumentUnit& unit, const std::string& text,
                             const Segmentation* spans, int64_t document_id, int64_t offset,
                             std::vector<SourcePassage>& out);

/// The context position ranges of `passages`, in their order (for Session::set_source_ranges).
std::vector<std::pair<int32_t, int32_t>> passage_ranges(const std::vector<SourcePassage>& passages);

/// Each passage's share of the answer's attention over all the passages: Σ over the answer's
/// tokens of its mass (`mass`: [tokens][passages], Answer::source_mass) / Σ over tokens and
/// passages; [passages], summing to 1 (all 0 when no mass fell on any passage).
/// Throws std::invalid_argument when a token's row does not have one entry per passage.
std::vector<double> passage_shares(const std::vector<std::vector<float>>& mass, size_t passages);

/// The passage's text for a citation: whitespace runs as one space, trimmed, at most max_bytes
/// bytes (cut at a UTF-8 character boundary, then "…" added).
std::string source_excerpt(const std::string& text, int64_t char_begin, int64_t char_end,
                           size_t max_bytes = 240);

/// The anchor of `offset_map` (ascending text_offset) that covers text byte `offset`: the last
/// one at or before it (the first for offsets before it); nullptr for an empty map.
const SourceAnchor* anchor_covering(const std::vector<SourceAnchor>& offset_map, int64_t offset);

/// An answer's top `top` sources, share descending (ties: context order); passages with no
/// share left out. text_of and offset_map_of give a document's text and offset map by its id
/// (each page and line is read from the anchor covering the passage's first byte); excerpts of
/// at most excerpt_bytes (source_excerpt).
std::vector<SourceRecord>
top_sources(const std::vector<SourcePassage>& passages, const std::vector<double>& shares,
            size_t top, const std::function<const std::string&(int64_t)>& text_of,
            const std::function<const std::vector<SourceAnchor>&(int64_t)>& offset_map_of,
            size_t excerpt_bytes = 240);

/// Each answer token's own top `top` sources ([tokens][top first]): top_sources over the shares
/// of that token's mass alone (`mass`: [tokens][passages]), excerpts of at most excerpt_bytes.
std::vector<std::vector<SourceRecord>>
token_sources(const std::vector<SourcePassage>& passages,
              const std::vector<std::vector<float>>& mass, size_t top,
              const std::function<const std::string&(int64_t)>& text_of,
              const std::function<const std::vector<SourceAnchor>&(int64_t)>& offset_map_of,
              size_t excerpt_bytes = 120);

/// Where a source is, in words: "NAME, page 3" (a page known: PDF), "NAME, paragraph 12"
/// (format "docx", "odt"), "NAME, line 40" (text, Markdown, HTML: their lines), else "NAME"
/// (EPUB: the line is its chapter file's).
std::string source_place(const std::string& name, const std::string& format, int32_t page,
                         int32_t line);

/// One line citing a source: "PLACE (42%): EXCERPT", the share rounded to a whole percent
/// ("<1%" below half a percent).
std::string source_citation(const SourceRecord& source, const std::string& place);

} // namespace spanscope
