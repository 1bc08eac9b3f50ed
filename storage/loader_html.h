// HTML: the visible text of a page, from libxml2's forgiving HTML parser.
#pragma once

#include "storage/document_loader.h"

#include <string>

namespace spanscope {

/// Load `bytes` (the decompressed file content) as HTML: the text of the body without script,
/// style, head, template, noscript and iframe; block elements (p, div, h1-h6, li, tr, br, pre,
/// table, section, ...) end lines or paragraphs (blank lines), table cells are separated by a
/// tab, whitespace is collapsed outside pre/textarea, entities are decoded; list items start
/// with their label ("2.", "b." for <ol type="a">, "•" in other lists) and a list nested in an
/// item continues line by line. Footnotes marked as
/// such (EPUB 3's epub:type, DPUB-ARIA roles) are read at their reference as "[label: text]"
/// (html_notes.h). The charset comes
/// from a byte-order mark or the meta tag; without one, UTF-8 if the bytes are valid UTF-8,
/// else uchardet's guess. The offset map gives the source line of each line of text (one
/// anchor per source line that has text).
/// Throws DocumentError (message starts with `path`): libxml2 cannot make a document of it, a
/// file larger than 2 GiB. (An HTML file without text is refused by load_document.)
LoadedDocument load_html(const std::string& path, const std::string& bytes);

} // namespace spanscope
