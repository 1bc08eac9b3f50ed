#include "storage/html_notes.h"

#include "storage/xml_tree.h"

#include <algorithm>
#include <string_view>
#include <vector>

namespace spanscope {

namespace {

/// Whether the space-separated list `tokens` holds `token`.
bool has_token(const std::string& tokens, std::string_view token) {
    size_t start = 0;
    while (start < tokens.size()) {
        const size_t end = std::min(tokens.find(' ', start), tokens.size());
        if (std::string_view(tokens).substr(start, end - start) == token)
            return true;
        start = end + 1;
    }
    return false;
}

/// An element's structural marks, each read once: EPUB 3's epub:type and the ARIA role.
struct Marks {
    std::string type, role;
};

Marks marks_of(const xmlNode* n) {
    return {attribute(n, "", "epub:type"), attribute(n, "", "role")};
}

bool is_note(const Marks& m) {
    return has_token(m.type, "footnote") || has_token(m.type, "endnote") ||
           has_token(m.type, "rearnote") || has_token(m.type, "note") ||
           has_token(m.role, "doc-footnote") || has_token(m.role, "doc-endnote");
}

bool is_note_reference(const Marks& m) {
    return has_token(m.type, "noteref") || has_token(m.role, "doc-noteref");
}

bool is_backlink(const Marks& m) {
    return has_token(m.role, "doc-backlink") || has_token(m.type, "backlink");
}

/// The next node after `n` in document order within `top`'s subtree; `descend`: into n's
/// children.
const xmlNode* next_node(const xmlNode* n, const xmlNode* top, bool descend) {
    if (descend && n->children)
        return n->children;
    while (n && n != top) {
        if (n->next)
            return n->next;
        n = n->parent;
    }
    return nullptr;
}

/// The visible text of `top` with whitespace collapsed, backlinks left out.
std::string visible_text(const xmlNode* top) {
    std::string out;
    for (const xmlNode* n = top->children; n;) {
        bool descend = true;
        if (n->type == XML_ELEMENT_NODE && is_backlink(marks_of(n)))
            descend = false;
        else if ((n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) && n->content)
            for (const char* c = reinterpret_cast<const char*>(n->content); *c; ++c) {
                const bool space = *c == ' ' || *c == '\t' || *c == '\n' || *c == '\r';
                if (!space)
                    out += *c;
                else if (!out.empty() && out.back() != ' ')
                    out += ' ';
            }
        else if (n->type == XML_ELEMENT_NODE && !out.empty() && out.back() != ' ')
            out += ' '; // a block inside the note (its paragraphs) ends a word
        n = next_node(n, top, descend);
    }
    const size_t begin = out.find_first_not_of(' ');
    if (begin == std::string::npos)
        return {};
    const size_t end = out.find_last_not_of(' ');
    return out.substr(begin, end - begin + 1);
}

} // namespace

HtmlNotes find_html_notes(xmlDoc* doc) {
    std::unordered_map<std::string, const xmlNode*> notes; // by id
    std::vector<const xmlNode*> references;
    HtmlNotes out;
    const xmlNode* top = reinterpret_cast<const xmlNode*>(doc);
    for (const xmlNode* n = top->children; n; n = next_node(n, top, true)) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        const Marks marks = marks_of(n);
        if (is_backlink(marks))
            out.skipped.insert(n);
        else if (is_note_reference(marks))
            references.push_back(n);
        else if (is_note(marks))
            if (const std::string id = attribute(n, "", "id"); !id.empty())
                notes.emplace(id, n);
    }
    for (const xmlNode* ref : references) {
        const std::string href = attribute(ref, "", "href");
        if (!href.starts_with("#"))
            continue;
        const auto it = notes.find(href.substr(1));
        if (it == notes.end())
            continue;
        // The note's text at its first reference only: a page that references one note many
        // times must not multiply its text (a few kilobytes of references would make
        // gigabytes of text).
        const bool first = out.skipped.insert(it->second).second;
        const std::string label = visible_text(ref);
        const std::string text = first ? visible_text(it->second) : std::string();
        out.replacement[ref] = "[" + label + (text.empty() ? "" : ": " + text) + "]";
    }
    return out;
}

} // namespace spanscope
