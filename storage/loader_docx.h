// DOCX (Office Open XML, ECMA-376): a ZIP container of XML, read through libzip and libxml2.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

class ZipContainer;

/// The text of a DOCX document (word/document.xml), in reading order: paragraphs (headings and
/// the body alike) set apart by blank lines; list items one per line with their label ("1.",
/// "a)", "•", from word/numbering.xml; at most kMaxListLabelBytes, 32 bytes, of list_number.h,
/// a longer w:lvlText cut there); tables a row per line, cells separated by tabs;
/// footnotes and endnotes at their reference as "[n: text]" (n counts the notes in the order
/// of their first reference; a later reference to the same note is its number alone, "[n]");
/// text boxes where they are anchored; deleted revisions, field instructions and comments left
/// out. Offset anchors: one per paragraph, `line` = its 1-based number among the document's
/// paragraphs (page and source_offset 0: a DOCX has no page layout).
/// Throws DocumentError (message starts with `path`): word/document.xml missing, or any of
/// its XML parts damaged; and what ZipContainer::read throws (encrypted, damaged, a ZIP bomb).
LoadedDocument load_docx(const std::string& path, ZipContainer& zip);

} // namespace spanscope
