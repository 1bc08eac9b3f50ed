#include "storage/xml_tree.h"

#include "engine/text/text_input.h" // DocumentError

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

#include <algorithm>

namespace spanscope {

XmlDocPtr parse_xml(const std::string& path, const std::string& entry, const std::string& bytes,
                    const std::string& what) {
    constexpr size_t kMaxBytes = size_t{128} << 20;
    constexpr size_t kMaxTags = 4000000;
    if (bytes.size() > kMaxBytes)
        throw DocumentError(path + ": " + entry + " is " + std::to_string(bytes.size() >> 20) +
                            " MiB of XML, more than the 128 MiB Spanscope reads of one part");
    if (static_cast<size_t>(std::count(bytes.begin(), bytes.end(), '<')) > kMaxTags)
        throw DocumentError(path + ": " + entry +
                            " has more than 4 000 000 XML tags, more than "
                            "Spanscope reads of one part (a ZIP bomb?)");
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

int int_value(std::string_view text, int fallback) {
    if (text.empty() || text.size() > 8)
        return fallback;
    size_t i = text[0] == '-' ? 1 : 0;
    if (i == text.size())
        return fallback;
    int v = 0;
    for (; i < text.size(); ++i) {
        if (text[i] < '0' || text[i] > '9')
            return fallback;
        v = v * 10 + (text[i] - '0');
    }
    return text[0] == '-' ? -v : v;
}

const xmlNode* child_element(const xmlNode* n, std::string_view ns, std::string_view local) {
    for (const xmlNode* c = n ? n->children : nullptr; c; c = c->next)
        if (is_element(c, ns, local))
            return c;
    return nullptr;
}

} // namespace spanscope
