#include "storage/loader_html.h"

#include "engine/text/text_input.h" // is_valid_utf8
#include "storage/html_notes.h"
#include "storage/list_number.h"
#include "storage/loader_text.h" // detect_encoding, code_unit_bytes
#include "storage/xml_tree.h"    // int_value

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string_view>
#include <unordered_map>

namespace spanscope {

namespace {

/// How an element shapes the text around it.
enum class Role {
    Inline,    ///< text flows through it (a, b, span, ...)
    Skip,      ///< neither it nor its content is text (script, style, head, ...)
    Line,      ///< starts and ends a line (div, li, tr, dt, ...)
    Paragraph, ///< starts and ends a paragraph: a blank line (p, h1, table, ...)
    Cell,      ///< separated from its neighbours by a tab (td, th)
    Break,     ///< br: one line break each
};

Role role_of(std::string_view name) {
    static constexpr std::string_view kSkip[] = {"script",   "style",  "head",   "template",
                                                 "noscript", "iframe", "object", "svg"};
    static constexpr std::string_view kParagraph[] = {
        "p",        "h1",         "h2",     "h3",      "h4",  "h5",        "h6",      "pre",
        "table",    "blockquote", "ul",     "ol",      "dl",  "section",   "article", "header",
        "footer",   "nav",        "aside",  "figure",  "hr",  "address",   "main",    "form",
        "fieldset", "details",    "center", "listing", "xmp", "plaintext", "textarea"};
    static constexpr std::string_view kLine[] = {
        "div",     "li",     "tr",     "dt",    "dd",    "caption", "figcaption",
        "summary", "option", "legend", "body",  "html",  "dialog",  "menu",
        "thead",   "tbody",  "tfoot",  "title", "label", "output"};
    if (name == "br")
        return Role::Break;
    if (name == "td" || name == "th")
        return Role::Cell;
    for (auto n : kSkip)
        if (n == name)
            return Role::Skip;
    for (auto n : kParagraph)
        if (n == name)
            return Role::Paragraph;
    for (auto n : kLine)
        if (n == name)
            return Role::Line;
    return Role::Inline;
}

/// Elements whose whitespace is kept as written.
bool keeps_whitespace(std::string_view name) {
    return name == "pre" || name == "listing" || name == "xmp" || name == "plaintext" ||
           name == "textarea";
}

bool is_html_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

std::string_view name_of(const xmlNode* n) {
    return n->name ? reinterpret_cast<const char*>(n->name) : "";
}

struct DocFree {
    void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};

/// Builds the text: separators are held back until the next visible character, so that
/// runs of block boundaries and whitespace become one line break, blank line or space.
class TextWriter {
public:
    /// `line_starts`: byte offset of each source line (index 0 = line 1), empty when the source
    /// is not byte-compatible with ASCII (UTF-16) and byte offsets of lines are unknown.
    explicit TextWriter(std::vector<int64_t> line_starts) : line_starts_(std::move(line_starts)) {}

    void request_break(int level) { pending_break_ = std::max(pending_break_, level); }
    void add_break() { pending_break_ = std::min(2, pending_break_ + 1); }
    void request_separator(char c) {
        if (pending_sep_ != '\t')
            pending_sep_ = c;
    }
    void note_element_line(long line) { element_line_ = std::max(element_line_, line); }

    /// Appends the content of a text node. `node_line` is what libxml2 recorded: the line where
    /// the parser was when it delivered the node's first piece of text (up to an entity or
    /// about 1000 bytes), so the node starts that many newlines earlier, and not before the
    /// last start tag.
    void text(std::string_view s, long node_line, bool preformatted) {
        const size_t first_piece = std::min<size_t>(s.size(), 1000);
        const long newlines = std::count(s.begin(), s.begin() + first_piece, '\n');
        long line = std::max(node_line - newlines, element_line_);
        if (preformatted && pre_fresh_) {
            // The newline right after <pre> is not content (HTML 4.01, 9.3.4); libxml2 keeps it.
            if (s.starts_with("\r\n"))
                s.remove_prefix(2), ++line;
            else if (s.starts_with("\n"))
                s.remove_prefix(1), ++line;
            else if (s.starts_with("\r")) // DocBook writes &#13; there
                s.remove_prefix(1);
            pre_fresh_ = false;
        }
        for (size_t i = 0; i < s.size(); ++i) {
            const char c = s[i];
            if (preformatted) {
                if (c == '\n' || c == '\r') {
                    if (c == '\n')
                        ++line;
                    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n')
                        continue;
                    flush();
                    out_ += '\n';
                    continue;
                }
            } else if (is_html_space(c)) {
                line += c == '\n';
                request_separator(' ');
                continue;
            }
            flush();
            if (line != anchor_line_)
                anchor(line);
            if (!label_.empty()) {
                out_ += label_;
                out_ += ' ';
                label_.clear();
            }
            out_ += c;
        }
    }

    void start_preformatted() { pre_fresh_ = true; }
    /// A list item's label ("3.", "•"), written before the item's first visible character.
    void list_label(std::string label) { label_ = std::move(label); }

    std::string take_text() { return std::move(out_); }
    std::vector<SourceAnchor> take_anchors() { return std::move(anchors_); }

private:
    /// Writes the held-back separator before the next character.
    void flush() {
        if (out_.empty()) {
            pending_break_ = 0, pending_sep_ = 0;
            return;
        }
        if (pending_break_ > 0) {
            // Spaces and no-break spaces (&nbsp; used as a spacer) do not end a line.
            for (;;) {
                if (!out_.empty() && (out_.back() == ' ' || out_.back() == '\t'))
                    out_.pop_back();
                else if (out_.ends_with("\xc2\xa0"))
                    out_.resize(out_.size() - 2);
                else
                    break;
            }
            int have = 0;
            for (auto it = out_.rbegin(); it != out_.rend() && *it == '\n' && have < 2; ++it)
                ++have;
            for (int i = have; i < pending_break_; ++i)
                out_ += '\n';
        } else if (pending_sep_ && !is_html_space(out_.back())) {
            out_ += pending_sep_;
        }
        pending_break_ = 0, pending_sep_ = 0;
    }

    void anchor(long line) {
        // Lines past what libxml2 records (65535 without XML_PARSE_BIG_LINES) or before the
        // first are unknown: 0.
        const bool known = line >= 1 && line < USHRT_MAX;
        SourceAnchor a;
        a.text_offset = static_cast<int64_t>(out_.size());
        a.line = known ? static_cast<int32_t>(line) : 0;
        // The byte offset of the start of that source line: the text itself starts somewhere
        // on it. 0 where unknown (UTF-16 source, unknown line).
        if (known && static_cast<size_t>(line) <= line_starts_.size())
            a.source_offset = line_starts_[static_cast<size_t>(line) - 1];
        if (!anchors_.empty() && anchors_.back().text_offset == a.text_offset)
            anchors_.back() = a;
        else
            anchors_.push_back(a);
        anchor_line_ = line;
    }

    std::string out_;
    std::vector<SourceAnchor> anchors_;
    std::vector<int64_t> line_starts_;
    int pending_break_ = 0; ///< 0 none, 1 line break, 2 blank line
    char pending_sep_ = 0;  ///< ' ' or '\t' (between table cells)
    long element_line_ = 0; ///< line of the last start tag seen
    long anchor_line_ = -1; ///< line of the last anchor
    bool pre_fresh_ = false;
    std::string label_; ///< a list item's label not yet written
};

/// Whether an ancestor of `n` (within 64 levels) is a list item: a list nested in an item
/// continues the list line by line instead of starting a paragraph.
bool inside_list_item(const xmlNode* n) {
    int depth = 0;
    for (const xmlNode* p = n->parent; p && depth < 64; p = p->parent, ++depth)
        if (p->type == XML_ELEMENT_NODE && name_of(p) == "li")
            return true;
    return false;
}

/// Walks the tree in document order without recursion (a page may nest thousands deep). Notes
/// with a reference in the page are read at it (`notes`).
void extract(xmlDoc* doc, TextWriter& w) {
    const HtmlNotes notes = find_html_notes(doc);
    std::unordered_map<const xmlNode*, int> item_numbers; // each <ol>'s last item number
    int pre_depth = 0;
    auto role_of_element = [](const xmlNode* n) {
        const std::string_view name = name_of(n);
        if ((name == "ul" || name == "ol") && inside_list_item(n))
            return Role::Line;
        return role_of(name);
    };
    // An item of an <ol> is numbered from its list's start (or its own value), in the list's
    // type (1, a, A, i, I); other items get a bullet.
    auto item_label = [&](const xmlNode* li) -> std::string {
        const xmlNode* list = li->parent;
        if (!list || name_of(list) != "ol")
            return "\u2022";
        int& number = item_numbers[list];
        number = int_value(attribute(li, "", "value"),
                           number == 0 ? int_value(attribute(list, "", "start"), 1) : number + 1);
        const std::string type = attribute(list, "", "type");
        const NumberStyle style = type == "a"   ? NumberStyle::LowerLetter
                                  : type == "A" ? NumberStyle::UpperLetter
                                  : type == "i" ? NumberStyle::LowerRoman
                                  : type == "I" ? NumberStyle::UpperRoman
                                                : NumberStyle::Decimal;
        return list_number(number, style) + ".";
    };
    // Line and paragraph elements are set apart from their surroundings on both sides, table
    // cells by a tab.
    auto separate = [&](Role role) {
        if (role == Role::Line)
            w.request_break(1);
        else if (role == Role::Paragraph)
            w.request_break(2);
        else if (role == Role::Cell)
            w.request_separator('\t');
    };
    auto enter = [&](xmlNode* n) -> bool {
        switch (n->type) {
        case XML_TEXT_NODE:
        case XML_CDATA_SECTION_NODE:
            if (n->content)
                w.text(reinterpret_cast<const char*>(n->content), xmlGetLineNo(n), pre_depth > 0);
            return false;
        case XML_ELEMENT_NODE:
            break;
        default: // comments, processing instructions, DTD
            return false;
        }
        const std::string_view name = name_of(n);
        w.note_element_line(xmlGetLineNo(n));
        if (notes.skipped.count(n))
            return false;
        if (const auto it = notes.replacement.find(n); it != notes.replacement.end()) {
            w.text(it->second, xmlGetLineNo(n), false);
            return false;
        }
        const Role role = role_of_element(n);
        if (role == Role::Skip)
            return false;
        if (role == Role::Break) {
            w.add_break();
            return false;
        }
        separate(role);
        if (name == "li")
            w.list_label(item_label(n));
        if (keeps_whitespace(name)) {
            ++pre_depth;
            w.start_preformatted();
        }
        return true;
    };
    auto leave = [&](xmlNode* n) {
        if (n->type != XML_ELEMENT_NODE || notes.skipped.count(n) || notes.replacement.count(n))
            return;
        const std::string_view name = name_of(n);
        const Role role = role_of_element(n);
        if (role == Role::Skip || role == Role::Break)
            return;
        separate(role);
        if (keeps_whitespace(name))
            --pre_depth;
        if (name == "li")
            w.list_label(""); // an item without visible text: its label goes with it
    };

    xmlNode* const top = reinterpret_cast<xmlNode*>(doc);
    xmlNode* n = doc->children;
    while (n) {
        if (enter(n) && n->children) {
            n = n->children;
            continue;
        }
        // Leave n, then every ancestor whose children are done, up to the next sibling.
        for (;;) {
            leave(n);
            if (n->next) {
                n = n->next;
                break;
            }
            n = n->parent;
            if (n == nullptr || n == top) {
                n = nullptr;
                break;
            }
        }
    }
}

/// The encoding a byte-order mark announces, "" if none.
std::string bom_encoding(std::string_view b) {
    if (b.starts_with("\xef\xbb\xbf"))
        return "UTF-8";
    if (b.starts_with("\xff\xfe"))
        return "UTF-16LE";
    if (b.starts_with("\xfe\xff"))
        return "UTF-16BE";
    return "";
}

} // namespace

LoadedDocument load_html(const std::string& path, const std::string& bytes) {
    if (bytes.size() > static_cast<size_t>(INT_MAX))
        throw DocumentError(path + ": is too large for the HTML parser (more than 2 GiB)");
    // NONET: never fetch a DTD or anything else from the network. BIG_LINES: line numbers past
    // 65535 where libxml2 supports it (its HTML parser did not as of 2.9.14: such lines get 0).
    const int options = int{HTML_PARSE_NOERROR} | int{HTML_PARSE_NOWARNING} |
                        int{HTML_PARSE_NONET} | int{HTML_PARSE_RECOVER} | int{XML_PARSE_BIG_LINES};
    auto parse = [&](const char* encoding) {
        return std::unique_ptr<xmlDoc, DocFree>(htmlReadMemory(
            bytes.data(), static_cast<int>(bytes.size()), nullptr, encoding, options));
    };

    std::string encoding = bom_encoding(bytes);
    std::unique_ptr<xmlDoc, DocFree> doc = parse(nullptr);
    if (doc && doc->encoding) {
        encoding = reinterpret_cast<const char*>(doc->encoding); // the meta tag's charset
    } else if (encoding.empty()) {
        if (is_valid_utf8(bytes)) {
            encoding = "UTF-8";
        } else {
            // Undeclared and not UTF-8: libxml2 would fall back to ISO-8859-1, which turns the
            // quotes of Windows-1252 into control characters; uchardet knows better.
            encoding = detect_encoding(bytes);
            if (encoding.empty() || encoding == "ASCII" || encoding == "UTF-8")
                encoding = "ISO-8859-1";
            else
                doc = parse(encoding.c_str());
        }
    }
    if (!doc)
        throw DocumentError(path + ": cannot be read as HTML (libxml2 made no document of it)");

    // Line starts in source bytes, where lines are byte-delimited (not in UTF-16/32).
    std::vector<int64_t> line_starts;
    if (code_unit_bytes(encoding) == 1) {
        line_starts.push_back(0);
        for (size_t i = bytes.find('\n'); i != std::string::npos; i = bytes.find('\n', i + 1))
            line_starts.push_back(static_cast<int64_t>(i + 1));
    }
    TextWriter writer(std::move(line_starts));
    extract(doc.get(), writer);

    LoadedDocument out;
    out.format = DocumentFormat::Html;
    out.source_encoding = encoding;
    out.text = writer.take_text();
    out.offset_map = writer.take_anchors();
    if (!is_valid_utf8(out.text)) // libxml2 stores UTF-8; this guards the invariant
        throw DocumentError(path + ": the HTML parser produced invalid UTF-8");
    return out;
}

} // namespace spanscope
