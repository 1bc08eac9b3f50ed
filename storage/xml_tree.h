// The XML parts of office documents and e-books (DOCX, ODT, EPUB) as libxml2 trees: parsed
// without the network and without expanding entities, names matched with their namespace.
#pragma once

#include <libxml/tree.h>

#include <memory>
#include <string>
#include <string_view>

namespace spanscope {

struct XmlDocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};
using XmlDocPtr = std::unique_ptr<xmlDoc, XmlDocFree>;

/// Parses `bytes`, the ZIP entry `entry` of the document at `path`, as XML. No DTD or other
/// file is fetched and no entity is expanded (an entity reference stays a node the loaders
/// skip: no "billion laughs"); libxml2 bounds the nesting depth (256 levels), which keeps the
/// loaders' recursive walks shallow. The tree's memory is bounded before parsing: at most
/// 4 000 000 tags ('<') in at most 128 MiB (a part that compresses well could otherwise
/// declare its true size, pass the ZIP bounds and build a tree of several GB).
/// Throws DocumentError (message starts with `path`): the bytes are not well-formed XML ("is a
/// damaged <what> (<entry>: <libxml2's message>)"), or beyond those bounds.
XmlDocPtr parse_xml(const std::string& path, const std::string& entry, const std::string& bytes,
                    const std::string& what);

/// The element's local name ("p" for <w:p>); "" for a node that is not an element.
std::string_view local_name(const xmlNode* n);
/// Whether `n` is an element named `local` in namespace `ns` (the namespace's URI).
bool is_element(const xmlNode* n, std::string_view ns, std::string_view local);
/// The value of attribute `local` in namespace `ns` ("" for no namespace); "" when absent.
std::string attribute(const xmlNode* n, const char* ns, const char* local);
/// An attribute's integer value ("12", "-3"), or `fallback` when it is empty, not an integer, or
/// longer than 7 characters (list starts, levels, counts: never a size to allocate).
int int_value(std::string_view text, int fallback);
/// The first child element of `n` named `local` in `ns`, or nullptr.
const xmlNode* child_element(const xmlNode* n, std::string_view ns, std::string_view local);

} // namespace spanscope
