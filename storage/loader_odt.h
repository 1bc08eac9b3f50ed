// ODT (OpenDocument Text, ISO/IEC 26300): a ZIP container of XML, read through libzip and libxml2.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

class ZipContainer;

/// The text of an ODT document (content.xml, office:text), with the same layout as load_docx:
/// headings and paragraphs, list items with their labels (from the list styles of content.xml
/// and styles.xml; at most kMaxListLabelBytes, 32 bytes, of list_number.h, a longer
/// num-prefix, num-suffix or bullet cut there), table rows with tab-separated cells, notes at
/// their citation as "[citation: text]", text frames where anchored; tracked deletions and
/// annotations left out. Runs of spaces collapse as ODF specifies (text:s, text:tab,
/// text:line-break kept; a text:s stands for at most 16 spaces, whatever its text:c).
/// Anchors: one per paragraph or heading, `line` = its 1-based number in the document.
/// Throws DocumentError: content.xml missing or damaged, the document encrypted with a
/// password (META-INF/manifest.xml declares encryption data), and what ZipContainer::read
/// throws.
LoadedDocument load_odt(const std::string& path, ZipContainer& zip);

} // namespace spanscope
