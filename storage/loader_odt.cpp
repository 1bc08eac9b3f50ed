#include "storage/loader_odt.h"

#include "storage/paragraph_text.h"
#include "storage/xml_tree.h"
#include "storage/zip_container.h"

#include <algorithm>
#include <map>
#include <vector>

namespace spanscope {

namespace {

constexpr std::string_view kText = "urn:oasis:names:tc:opendocument:xmlns:text:1.0";
constexpr std::string_view kTable = "urn:oasis:names:tc:opendocument:xmlns:table:1.0";
constexpr std::string_view kOffice = "urn:oasis:names:tc:opendocument:xmlns:office:1.0";
constexpr std::string_view kDraw = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0";
constexpr std::string_view kStyle = "urn:oasis:names:tc:opendocument:xmlns:style:1.0";
constexpr std::string_view kManifest = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0";
constexpr std::string_view kSvg = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0";
constexpr const char* kWhat = "ODT document";
/// The most spaces one text:s stands for (its text:c asks for more).
constexpr int kMaxSpaceRun = 16;

/// One level of a list style (text:list-level-style-number or -bullet).
struct ListLevel {
    bool bullet = true;
    std::string bullet_char = "•";
    NumberStyle style = NumberStyle::Decimal;
    std::string prefix, suffix;
    int start = 1;
    int display_levels = 1; ///< text:display-levels: how many levels' numbers the label shows
};

using ListStyle = std::map<int, ListLevel>; ///< by text:level (1-based)

/// The manifest declares encryption data for an entry when the document has a password.
bool manifest_says_encrypted(const std::string& path, ZipContainer& zip) {
    const auto bytes = zip.read("META-INF/manifest.xml");
    if (!bytes)
        return false;
    const XmlDocPtr doc = parse_xml(path, "META-INF/manifest.xml", *bytes, kWhat);
    for (const xmlNode* e = xmlDocGetRootElement(doc.get())->children; e; e = e->next)
        if (is_element(e, kManifest, "file-entry") &&
            child_element(e, kManifest, "encryption-data"))
            return true;
    return false;
}

class OdtReader {
public:
    OdtReader(const std::string& path, ZipContainer& zip) : path_(path), zip_(zip) {}

    LoadedDocument read() {
        if (manifest_says_encrypted(path_, zip_))
            throw DocumentError(path_ + ": is encrypted with a password; open it in its "
                                        "program, remove the password and add it again");
        const std::string content = zip_.read_required("content.xml", "an ODT document");
        const XmlDocPtr doc = parse_xml(path_, "content.xml", content, kWhat);
        const xmlNode* root = xmlDocGetRootElement(doc.get());
        if (!is_element(root, kOffice, "document-content"))
            throw DocumentError(path_ + ": is not an ODT document (content.xml is not "
                                        "OpenDocument content)");
        if (const auto styles = zip_.read("styles.xml")) {
            const XmlDocPtr s = parse_xml(path_, "styles.xml", *styles, kWhat);
            read_list_styles(xmlDocGetRootElement(s.get()));
        }
        read_list_styles(root); // automatic styles of content.xml

        const xmlNode* body = child_element(root, kOffice, "body");
        const xmlNode* office_text = child_element(body, kOffice, "text");
        if (!office_text)
            throw DocumentError(path_ + ": is not a text document (an OpenDocument " +
                                "spreadsheet, drawing or presentation?): Spanscope reads ODT");
        blocks(office_text, {});
        return text_.take_document(DocumentFormat::Odt);
    }

private:
    /// Every text:list-style under `n` (office:styles, office:automatic-styles), by name.
    void read_list_styles(const xmlNode* n) {
        for (const xmlNode* c = n->children; c; c = c->next) {
            if (c->type != XML_ELEMENT_NODE)
                continue;
            if (!is_element(c, kText, "list-style")) {
                if (is_element(c, kOffice, "styles") || is_element(c, kOffice, "automatic-styles"))
                    read_list_styles(c);
                continue;
            }
            ListStyle& style = list_styles_[attribute(c, kStyle.data(), "name")];
            for (const xmlNode* l = c->children; l; l = l->next) {
                const bool number = is_element(l, kText, "list-level-style-number");
                if (!number && !is_element(l, kText, "list-level-style-bullet"))
                    continue;
                ListLevel level;
                level.bullet = !number;
                if (!number) {
                    const std::string b = attribute(l, kText.data(), "bullet-char");
                    if (!b.empty())
                        level.bullet_char = bounded_list_label(b);
                } else {
                    const std::string f = attribute(l, kStyle.data(), "num-format");
                    if (f.empty()) { // no number shown
                        level.bullet = true;
                        level.bullet_char.clear();
                    }
                    level.style = f == "a"   ? NumberStyle::LowerLetter
                                  : f == "A" ? NumberStyle::UpperLetter
                                  : f == "i" ? NumberStyle::LowerRoman
                                  : f == "I" ? NumberStyle::UpperRoman
                                             : NumberStyle::Decimal;
                    level.prefix = bounded_list_label(attribute(l, kStyle.data(), "num-prefix"));
                    level.suffix = bounded_list_label(attribute(l, kStyle.data(), "num-suffix"));
                    level.start = int_value(attribute(l, kText.data(), "start-value"), 1);
                    level.display_levels =
                        int_value(attribute(l, kText.data(), "display-levels"), 1);
                }
                style[int_value(attribute(l, kText.data(), "level"), 1)] = level;
            }
        }
    }

    /// The list a text:list-item belongs to: its style and its items' numbers so far.
    struct ListFrame {
        const ListStyle* style = nullptr;
        int level = 1;
        int number = 0;
        int group = 0; ///< the ParagraphText group of the outermost list
    };

    std::string label(std::vector<ListFrame>& lists) const {
        ListFrame& f = lists.back();
        const ListLevel fallback;
        const ListLevel* level = &fallback;
        if (f.style) {
            if (const auto it = f.style->find(f.level); it != f.style->end())
                level = &it->second;
        }
        f.number = f.number == 0 ? level->start : f.number + 1;
        if (level->bullet)
            return level->bullet_char;
        std::string numbers;
        const int shown = std::min<int>(level->display_levels, static_cast<int>(lists.size()));
        for (size_t i = lists.size() - static_cast<size_t>(shown);
             i < lists.size() && numbers.size() <= kMaxListLabelBytes; ++i) {
            const ListFrame& outer = lists[i];
            NumberStyle s = level->style;
            if (outer.style)
                if (const auto it = outer.style->find(outer.level); it != outer.style->end())
                    s = it->second.style;
            if (!numbers.empty())
                numbers += '.';
            numbers += list_number(outer.number, s);
        }
        // At most kMaxListLabelBytes, however long the style's prefix and suffix or deep the
        // list: the label is repeated on every item.
        return bounded_list_label(level->prefix + numbers + level->suffix);
    }

    /// Block content: headings, paragraphs, lists, tables, sections.
    void blocks(const xmlNode* parent, std::vector<ListFrame> lists) {
        for (const xmlNode* n = parent->children; n; n = n->next) {
            if (n->type != XML_ELEMENT_NODE)
                continue;
            if (is_element(n, kText, "p") || is_element(n, kText, "h")) {
                paragraph(n, "", 0);
            } else if (is_element(n, kText, "list")) {
                list(n, lists);
            } else if (is_element(n, kTable, "table")) {
                table(n);
            } else if (is_element(n, kText, "tracked-changes") ||
                       is_element(n, kOffice, "annotation") ||
                       is_element(n, kText, "sequence-decls") ||
                       is_element(n, kText, "variable-decls") ||
                       is_element(n, kText, "user-field-decls") ||
                       is_element(n, kOffice, "forms")) {
                continue;
            } else {
                blocks(n, lists); // text:section, text:table-of-content's index-body, ...
            }
        }
    }

    void list(const xmlNode* l, std::vector<ListFrame> lists) {
        ListFrame frame;
        const std::string style_name = attribute(l, kText.data(), "style-name");
        if (const auto it = list_styles_.find(style_name); it != list_styles_.end())
            frame.style = &it->second;
        else if (!lists.empty())
            frame.style = lists.back().style; // a nested list keeps its outer list's style
        frame.level = static_cast<int>(lists.size()) + 1;
        const bool outermost = lists.empty();
        frame.group = outermost ? text_.new_group() : lists.front().group;
        // A list that continues an earlier one (text:continue-numbering, or text:continue-list
        // naming it) goes on from the last number of the last list of its style.
        if (outermost && (attribute(l, kText.data(), "continue-numbering") == "true" ||
                          !attribute(l, kText.data(), "continue-list").empty()))
            frame.number = last_numbers_[style_name];
        lists.push_back(frame);
        for (const xmlNode* item = l->children; item; item = item->next) {
            const bool header = is_element(item, kText, "list-header");
            if (!header && !is_element(item, kText, "list-item"))
                continue;
            const std::string item_label = header ? "" : label(lists);
            bool first = true;
            for (const xmlNode* c = item->children; c; c = c->next) {
                if (is_element(c, kText, "p") || is_element(c, kText, "h")) {
                    paragraph(c, first ? item_label : "", lists.front().group);
                    first = false;
                } else if (is_element(c, kText, "list")) {
                    list(c, lists);
                }
            }
        }
        if (outermost)
            last_numbers_[style_name] = lists.back().number;
    }

    void paragraph(const xmlNode* p, const std::string& item_label, int group) {
        ++paragraphs_;
        text_.begin(paragraphs_, group);
        if (!item_label.empty())
            text_.append(item_label + " ");
        inline_content(p, text_);
        text_.end();
    }

    void table(const xmlNode* t, int group = 0) {
        if (group == 0)
            group = text_.new_group();
        for (const xmlNode* c = t->children; c; c = c->next) {
            if (is_element(c, kTable, "table-row")) {
                text_.begin(paragraphs_ + 1, group);
                for (const xmlNode* cell = c->children; cell; cell = cell->next) {
                    if (!is_element(cell, kTable, "table-cell"))
                        continue; // covered (merged) cells hold nothing of their own
                    text_.begin_cell();
                    cell_content(cell);
                    text_.end_cell();
                }
                text_.end();
            } else if (c->type == XML_ELEMENT_NODE) {
                table(c, group); // table-header-rows, table-rows, table-row-group
            }
        }
    }

    void cell_content(const xmlNode* cell) {
        for (const xmlNode* n = cell->children; n; n = n->next) {
            if (is_element(n, kText, "p") || is_element(n, kText, "h")) {
                ++paragraphs_;
                text_.begin(paragraphs_, 0); // a space apart inside the cell
                inline_content(n, text_);
            } else if (is_element(n, kTable, "table")) {
                text_.begin_cell();
                table_in_cell(n);
                text_.end_cell();
            } else if (n->type == XML_ELEMENT_NODE) {
                cell_content(n); // a list in a cell
            }
        }
    }
    void table_in_cell(const xmlNode* n) {
        for (const xmlNode* c = n->children; c; c = c->next)
            if (is_element(c, kText, "p") || is_element(c, kText, "h")) {
                text_.separate();
                inline_content(c, text_);
            } else if (c->type == XML_ELEMENT_NODE) {
                table_in_cell(c);
            }
    }

    /// The text inside a paragraph or heading.
    void inline_content(const xmlNode* parent, ParagraphText& out) {
        for (const xmlNode* n = parent->children; n; n = n->next) {
            if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
                if (n->content)
                    out.append_collapsed(reinterpret_cast<const char*>(n->content));
                continue;
            }
            if (n->type != XML_ELEMENT_NODE)
                continue;
            if (is_element(n, kText, "s")) {
                // At most kMaxSpaceRun spaces per text:s: the element is at least 12 bytes of
                // markup (<s t:c="9"/>), so it never makes much more text than it takes, where
                // text:c="1000" made 40 times its size (a few kilobytes of them, compressed to
                // less, gave megabytes of spaces). A run longer than that carries no meaning
                // for reading; indents in code listings up to four levels keep their width.
                const int count =
                    std::clamp(int_value(attribute(n, kText.data(), "c"), 1), 1, kMaxSpaceRun);
                out.append(std::string(static_cast<size_t>(count), ' '));
            } else if (is_element(n, kText, "tab")) {
                out.tab();
            } else if (is_element(n, kText, "line-break")) {
                out.line_break();
            } else if (is_element(n, kText, "note")) {
                note(n, out);
            } else if (is_element(n, kOffice, "annotation") ||
                       is_element(n, kOffice, "annotation-end") ||
                       is_element(n, kText, "tracked-changes") || is_element(n, kText, "change") ||
                       is_element(n, kText, "ruby-text") || is_element(n, kSvg, "title") ||
                       is_element(n, kSvg, "desc") || is_element(n, kOffice, "binary-data")) {
                // comments, deletions, ruby annotations over the base text, an image's
                // description and its embedded bytes
                continue;
            } else if (is_element(n, kDraw, "text-box")) {
                for (const xmlNode* c = n->children; c; c = c->next)
                    if (c->type == XML_ELEMENT_NODE) {
                        out.separate();
                        inline_content(c, out);
                        out.separate();
                    }
            } else if (is_element(n, kText, "p") || is_element(n, kText, "h")) {
                out.separate(); // a paragraph inside a note body or a frame
                inline_content(n, out);
                out.separate();
            } else {
                inline_content(n, out); // span, a, bookmark, frame, list in a frame, ...
            }
        }
    }

    void note(const xmlNode* n, ParagraphText& out) {
        const xmlNode* citation = child_element(n, kText, "note-citation");
        std::string label;
        if (citation) {
            xmlChar* c = xmlNodeGetContent(citation);
            if (c) {
                label = reinterpret_cast<const char*>(c);
                xmlFree(c);
            }
        }
        ParagraphText body;
        body.begin(0, 0);
        if (const xmlNode* b = child_element(n, kText, "note-body"))
            inline_content(b, body);
        body.end();
        const std::string note_text = body.take_text();
        out.append("[" + label + (note_text.empty() ? "" : ": " + note_text) + "]");
    }

    const std::string& path_;
    ZipContainer& zip_;
    std::map<std::string, ListStyle> list_styles_;
    std::map<std::string, int> last_numbers_; ///< by list style: the last outermost list's number
    ParagraphText text_;
    int32_t paragraphs_ = 0;
};

} // namespace

LoadedDocument load_odt(const std::string& path, ZipContainer& zip) {
    return OdtReader(path, zip).read();
}

} // namespace spanscope
