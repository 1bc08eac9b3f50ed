// Footnotes of an HTML page (an EPUB's chapter, pandoc's HTML) moved to their references, as
// the DOCX and ODT loaders place theirs.
#pragma once

#include <libxml/tree.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace spanscope {

/// The notes of a parsed HTML document that are marked as notes and referenced in it.
struct HtmlNotes {
    /// Each note reference (an <a>) and the text that replaces it: "[label: note text]", the
    /// label being the reference's own text ("1"), the note's text its visible text with runs
    /// of whitespace collapsed (its backlinks left out). A later reference to a note already
    /// placed is its label alone ("[1]"): the text is not repeated.
    std::unordered_map<const xmlNode*, std::string> replacement;
    /// Elements whose text is not read where they stand: the notes moved to their references,
    /// and every backlink from a note to its reference ("↩").
    std::unordered_set<const xmlNode*> skipped;
};

/// Finds notes by their marks: EPUB 3's structural semantics (epub:type "footnote", "endnote",
/// "rearnote" or "note"; "noteref" on the reference) and the DPUB-ARIA roles
/// ("doc-footnote", "doc-endnote", "doc-noteref", "doc-backlink"). A reference moves a note
/// only when its href is "#id" of a note in the same document; notes that nothing here
/// references stay where they are. Walks the tree without recursion.
HtmlNotes find_html_notes(xmlDoc* doc);

} // namespace spanscope
