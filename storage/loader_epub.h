// EPUB (2 and 3): a ZIP container of XHTML documents in the order of its package's spine.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

class ZipContainer;

/// The text of an EPUB book: META-INF/container.xml names the package document (the OPF), whose
/// spine lists the book's XHTML documents in reading order; each is read by load_html (its
/// visible text, blocks set apart) and they are joined by blank lines. A document is read once,
/// at its first place in the spine (later itemrefs naming it, or another manifest item with
/// the same href, add nothing). Spine items that are not XHTML or HTML (an image) and those
/// with no text (a cover) add nothing. Offset anchors: those of load_html, with `line` counted
/// over the spine's documents joined in order (a document's line 1 follows the last line of
/// the one before) and `source_offset` likewise in bytes.
/// Throws DocumentError (message starts with `path`): no container.xml or package document, a
/// damaged one (XML), a spine that names no document the archive holds, a spine document
/// encrypted (DRM: META-INF/encryption.xml lists it with a cipher other than font
/// obfuscation), and what ZipContainer::read throws (encrypted entries, damage, a ZIP bomb).
LoadedDocument load_epub(const std::string& path, ZipContainer& zip);

} // namespace spanscope
