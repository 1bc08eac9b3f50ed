#include "storage/xml_tree.h"

#include "engine/text/text_input.h" // DocumentError

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#include <climits>

namespace spanscope {

XmlDocPtr parse_xml(const std::string& path, const std::string& entry, const std::string& bytes,
                    const std::string& what) {
    if (bytes.size() > static_cast<size_t>(INT_MAX))
        throw DocumentError(path + ": " + entry + " is too large for the XML parser (2 GiB)");
    // No NOENT (entities stay references), no DTDLOAD, no network; errors are taken from
    // libxml2's per-thread last error instead of going to stderr.
    const int options = int{XML_PARSE_NONET} | int{XML_PARSE_NOERROR} | int{XML_PARSE_NOWARNING} |
                        int{XML_PARSE_NOCDATA};
    xmlResetLastError();
    XmlDocPtr doc(xmlReadMemory(bytes.data(), static_cast<int>(bytes.size()), entry.c_str(),
                                nullptr, options));
    if (!doc || !xmlDocGetRootElement(doc.get())) {
        std::string why = "not well-formed XML";
        if (const xmlError* e = xmlGetLastError(); e && e->message) {
            why = e->message;
            while (!why.empty() && (why.back() == '\n' || why.back() == ' '))
                why.pop_back();
            if (e->line > 0)
                why += " at line " + std::to_string(e->line);
        }
        throw DocumentError(path + ": is a damaged " + what + " (" + entry + ": " + why + ")");
    }
    return doc;
}

std::string_view local_name(const xmlNode* n) {
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return {};
    return reinterpret_cast<const char*>(n->name);
}

bool is_element(const xmlNode* n, std::string_view ns, std::string_view local) {
    if (local_name(n) != local)
        return false;
    const std::string_view href =
        n->ns && n->ns->href ? reinterpret_cast<const char*>(n->ns->href) : "";
    return href == ns;
}

std::string attribute(const xmlNode* n, const char* ns, const char* local) {
    xmlChar* v = (ns && *ns) ? xmlGetNsProp(n, BAD_CAST local, BAD_CAST ns)
                             : xmlGetNoNsProp(n, BAD_CAST local);
    if (!v)
        return {};
    std::string out = reinterpret_cast<const char*>(v);
    xmlFree(v);
    return out;
}

const xmlNode* child_element(const xmlNode* n, std::string_view ns, std::string_view local) {
    for (const xmlNode* c = n ? n->children : nullptr; c; c = c->next)
        if (is_element(c, ns, local))
            return c;
    return nullptr;
}

} // namespace spanscope
