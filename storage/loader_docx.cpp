#include "storage/loader_docx.h"

#include "storage/paragraph_text.h"
#include "storage/xml_tree.h"
#include "storage/zip_container.h"

#include <array>
#include <map>
#include <optional>

namespace spanscope {

namespace {

// Transitional (what Word and LibreOffice write) and Strict OOXML name the namespace apart.
constexpr std::string_view kW = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
constexpr std::string_view kWStrict = "http://purl.oclc.org/ooxml/wordprocessingml/main";
constexpr std::string_view kMc = "http://schemas.openxmlformats.org/markup-compatibility/2006";
constexpr const char* kWhat = "DOCX document";

/// One level of a list definition (w:lvl of word/numbering.xml).
struct Level {
    bool bullet = false;
    bool unnumbered = false; ///< numFmt "none": an item without a label
    NumberStyle style = NumberStyle::Decimal;
    std::string text = "%1."; ///< w:lvlText: %k stands for level k's number
    int start = 1;
};

/// What the document's paragraphs need of word/numbering.xml: each w:num's levels.
struct Numbering {
    std::map<int, std::array<Level, 9>> lists; ///< by w:numId
};

class DocxReader {
public:
    DocxReader(const std::string& path, ZipContainer& zip) : path_(path), zip_(zip) {}

    LoadedDocument read() {
        const std::string body_xml = zip_.read_required("word/document.xml", "a DOCX document");
        const XmlDocPtr doc = parse_xml(path_, "word/document.xml", body_xml, kWhat);
        ns_ = root_namespace(xmlDocGetRootElement(doc.get()));
        if (ns_.empty())
            throw DocumentError(path_ + ": is not a DOCX document (word/document.xml is not "
                                        "WordprocessingML)");
        read_numbering();
        footnotes_ = read_notes("word/footnotes.xml", "footnote");
        endnotes_ = read_notes("word/endnotes.xml", "endnote");
        paragraphs_ = 0; // the notes' paragraphs are not the body's

        const xmlNode* body = child_element(xmlDocGetRootElement(doc.get()), ns_, "body");
        if (body)
            blocks(body);
        return text_.take_document(DocumentFormat::Docx);
    }

private:
    static std::string_view root_namespace(const xmlNode* root) {
        for (const std::string_view ns : {kW, kWStrict})
            if (is_element(root, ns, "document"))
                return ns;
        return {};
    }

    bool is_w(const xmlNode* n, std::string_view local) const { return is_element(n, ns_, local); }
    std::string val(const xmlNode* n) const { return n ? attribute(n, ns_.data(), "val") : ""; }

    void read_numbering() {
        const auto bytes = zip_.read("word/numbering.xml");
        if (!bytes)
            return;
        const XmlDocPtr doc = parse_xml(path_, "word/numbering.xml", *bytes, kWhat);
        std::map<int, std::array<Level, 9>> abstract;
        const xmlNode* root = xmlDocGetRootElement(doc.get());
        for (const xmlNode* a = root->children; a; a = a->next) {
            if (!is_w(a, "abstractNum"))
                continue;
            auto& levels = abstract[int_value(attribute(a, ns_.data(), "abstractNumId"), -1)];
            for (const xmlNode* l = a->children; l; l = l->next)
                if (is_w(l, "lvl"))
                    read_level(l, levels);
        }
        for (const xmlNode* n = root->children; n; n = n->next) {
            if (!is_w(n, "num"))
                continue;
            const int id = int_value(attribute(n, ns_.data(), "numId"), -1);
            const int abs = int_value(val(child_element(n, ns_, "abstractNumId")), -1);
            auto levels = abstract.count(abs) ? abstract[abs] : std::array<Level, 9>{};
            for (const xmlNode* o = n->children; o; o = o->next) {
                if (!is_w(o, "lvlOverride"))
                    continue;
                const int ilvl = int_value(attribute(o, ns_.data(), "ilvl"), -1);
                if (ilvl < 0 || ilvl > 8)
                    continue;
                if (const xmlNode* l = child_element(o, ns_, "lvl"))
                    read_level(l, levels);
                if (const xmlNode* s = child_element(o, ns_, "startOverride"))
                    levels[static_cast<size_t>(ilvl)].start = int_value(val(s), 1);
            }
            numbering_.lists[id] = levels;
        }
    }

    void read_level(const xmlNode* l, std::array<Level, 9>& levels) const {
        const int ilvl = int_value(attribute(l, ns_.data(), "ilvl"), -1);
        if (ilvl < 0 || ilvl > 8)
            return;
        Level& level = levels[static_cast<size_t>(ilvl)];
        const std::string fmt = val(child_element(l, ns_, "numFmt"));
        level.bullet = fmt == "bullet";
        level.unnumbered = fmt == "none";
        level.style = fmt == "lowerLetter"   ? NumberStyle::LowerLetter
                      : fmt == "upperLetter" ? NumberStyle::UpperLetter
                      : fmt == "lowerRoman"  ? NumberStyle::LowerRoman
                      : fmt == "upperRoman"  ? NumberStyle::UpperRoman
                                             : NumberStyle::Decimal;
        if (const xmlNode* t = child_element(l, ns_, "lvlText"))
            level.text = val(t);
        if (const xmlNode* s = child_element(l, ns_, "start"))
            level.start = int_value(val(s), 1);
    }

    /// The label of the next item of list `num_id` at level `ilvl` ("2.", "b)", "•", "" for a
    /// level without numbers); std::nullopt when there is no such list.
    std::optional<std::string> list_label(int num_id, int ilvl) {
        const auto it = numbering_.lists.find(num_id);
        if (it == numbering_.lists.end() || ilvl < 0 || ilvl > 8)
            return std::nullopt;
        const auto& levels = it->second;
        auto& counters = counters_[num_id];
        if (counters.empty())
            counters.assign(9, 0);
        const auto i = static_cast<size_t>(ilvl);
        counters[i] = counters[i] == 0 ? levels[i].start : counters[i] + 1;
        for (size_t deeper = i + 1; deeper < 9; ++deeper)
            counters[deeper] = 0;
        if (levels[i].bullet)
            return "•";
        if (levels[i].unnumbered)
            return "";
        // The label expanded no further than its bound (a w:lvlText of kilobytes would be
        // repeated on every item of the list).
        std::string label;
        const std::string& pattern = levels[i].text;
        for (size_t k = 0; k < pattern.size() && label.size() <= kMaxListLabelBytes; ++k) {
            if (pattern[k] == '%' && k + 1 < pattern.size() && pattern[k + 1] >= '1' &&
                pattern[k + 1] <= '9') {
                const auto level = static_cast<size_t>(pattern[k + 1] - '1');
                const int n = counters[level] == 0 ? levels[level].start : counters[level];
                label += list_number(n, levels[level].style);
                ++k;
            } else {
                label += pattern[k];
            }
        }
        return bounded_list_label(std::move(label));
    }

    /// Each note's text (its paragraphs joined by a space), by w:id.
    std::map<std::string, std::string> read_notes(const std::string& entry,
                                                  std::string_view element) {
        std::map<std::string, std::string> notes;
        const auto bytes = zip_.read(entry);
        if (!bytes)
            return notes;
        const XmlDocPtr doc = parse_xml(path_, entry, *bytes, kWhat);
        for (const xmlNode* n = xmlDocGetRootElement(doc.get())->children; n; n = n->next) {
            if (!is_w(n, element))
                continue;
            const std::string type = attribute(n, ns_.data(), "type");
            if (!type.empty() && type != "normal")
                continue; // separators
            ParagraphText note;
            note.begin(0, 0);
            inline_content(n, note, /*in_note=*/true);
            note.end();
            notes[attribute(n, ns_.data(), "id")] = note.take_text();
        }
        return notes;
    }

    /// Block-level content: paragraphs, tables, structured-document tags.
    void blocks(const xmlNode* parent) {
        for (const xmlNode* n = parent->children; n; n = n->next) {
            if (is_w(n, "p"))
                paragraph(n);
            else if (is_w(n, "tbl"))
                table(n);
            else if (is_w(n, "sdt"))
                blocks_of(child_element(n, ns_, "sdtContent"));
            else if (is_w(n, "customXml") || is_w(n, "ins") || is_w(n, "smartTag"))
                blocks(n);
            else if (is_element(n, kMc, "AlternateContent"))
                blocks_of(child_element(n, kMc, "Choice"));
        }
    }
    void blocks_of(const xmlNode* n) {
        if (n)
            blocks(n);
    }

    void paragraph(const xmlNode* p) {
        ++paragraphs_;
        const xmlNode* props = child_element(p, ns_, "pPr");
        const xmlNode* num = child_element(props, ns_, "numPr");
        std::optional<std::string> label;
        int group = 0;
        if (num) {
            const int num_id = int_value(val(child_element(num, ns_, "numId")), 0);
            const int ilvl = int_value(val(child_element(num, ns_, "ilvl")), 0);
            if (num_id != 0) // numId 0: numbering removed
                label = list_label(num_id, ilvl);
            if (label) {
                // One group per list: consecutive items of the same list are joined line by
                // line, another list starts a paragraph.
                auto [it, fresh] = list_groups_.try_emplace(num_id, 0);
                if (fresh)
                    it->second = text_.new_group();
                group = it->second;
            }
        }
        text_.begin(paragraphs_, group);
        if (label && !label->empty())
            text_.append(*label + " ");
        inline_content(p, text_, false);
        text_.end();
    }

    /// The elements named `local` among `parent`'s children and inside the wrappers that may
    /// hold them (content controls, custom XML, tracked insertions), in order.
    void collect(const xmlNode* parent, std::string_view local,
                 std::vector<const xmlNode*>& out) const {
        for (const xmlNode* n = parent->children; n; n = n->next) {
            if (is_w(n, local))
                out.push_back(n);
            else if (is_w(n, "sdt"))
                collect_of(child_element(n, ns_, "sdtContent"), local, out);
            else if (is_w(n, "customXml") || is_w(n, "ins") || is_w(n, "smartTag"))
                collect(n, local, out);
        }
    }
    void collect_of(const xmlNode* n, std::string_view local,
                    std::vector<const xmlNode*>& out) const {
        if (n)
            collect(n, local, out);
    }

    void table(const xmlNode* tbl) {
        const int group = text_.new_group();
        std::vector<const xmlNode*> rows;
        collect(tbl, "tr", rows);
        for (const xmlNode* row : rows) {
            text_.begin(paragraphs_ + 1, group);
            std::vector<const xmlNode*> cells;
            collect(row, "tc", cells);
            for (const xmlNode* cell : cells) {
                text_.begin_cell();
                blocks(cell);
                text_.end_cell();
            }
            text_.end();
        }
    }

    /// Runs and what holds them, into `out`.
    void inline_content(const xmlNode* parent, ParagraphText& out, bool in_note) {
        for (const xmlNode* n = parent->children; n; n = n->next) {
            if (n->type != XML_ELEMENT_NODE)
                continue;
            if (is_w(n, "r")) {
                run(n, out, in_note);
            } else if (is_w(n, "p")) { // a note's or a text box's paragraphs: a space apart
                ++paragraphs_;
                out.separate();
                inline_content(n, out, in_note);
                out.separate();
            } else if (is_w(n, "del") || is_w(n, "moveFrom") || is_w(n, "pPr") || is_w(n, "rPr") ||
                       is_w(n, "instrText") || is_w(n, "delText")) {
                continue; // deleted revisions, properties, field instructions
            } else if (is_element(n, kMc, "AlternateContent")) {
                if (const xmlNode* choice = child_element(n, kMc, "Choice"))
                    inline_content(choice, out, in_note);
            } else {
                // hyperlink, ins, smartTag, sdt/sdtContent, fldSimple, txbxContent inside a
                // drawing, tr/tc of a nested table, ...: their text is where they are.
                inline_content(n, out, in_note);
            }
        }
    }

    void run(const xmlNode* r, ParagraphText& out, bool in_note) {
        for (const xmlNode* n = r->children; n; n = n->next) {
            if (is_w(n, "t")) {
                for (const xmlNode* t = n->children; t; t = t->next)
                    if ((t->type == XML_TEXT_NODE || t->type == XML_CDATA_SECTION_NODE) &&
                        t->content)
                        out.append(reinterpret_cast<const char*>(t->content));
            } else if (is_w(n, "tab") || is_w(n, "ptab")) {
                out.tab();
            } else if (is_w(n, "br") || is_w(n, "cr")) {
                out.line_break();
            } else if (is_w(n, "noBreakHyphen")) {
                out.append("-");
            } else if ((is_w(n, "footnoteReference") || is_w(n, "endnoteReference")) && !in_note) {
                const bool footnote = is_w(n, "footnoteReference");
                auto& notes = footnote ? footnotes_ : endnotes_;
                auto& numbers = footnote ? footnote_numbers_ : endnote_numbers_;
                const std::string id = attribute(n, ns_.data(), "id");
                // A later reference to a note is the first one's number alone: the note's text
                // is read once, so that references (a few bytes each, compressed to less)
                // cannot multiply it into gigabytes, and the number still names that note.
                if (const auto seen = numbers.find(id); seen != numbers.end()) {
                    out.append("[");
                    out.append(std::to_string(seen->second));
                    out.append("]");
                    continue;
                }
                numbers[id] = ++note_count_;
                const auto it = notes.find(id);
                out.append("[");
                out.append(std::to_string(note_count_));
                if (it != notes.end() && !it->second.empty()) {
                    out.append(": ");
                    out.append(it->second);
                }
                out.append("]");
            } else if (is_element(n, kMc, "AlternateContent")) {
                if (const xmlNode* choice = child_element(n, kMc, "Choice"))
                    inline_content(choice, out, in_note);
            } else if (is_w(n, "drawing") || is_w(n, "pict") || is_w(n, "object")) {
                inline_content(n, out, in_note); // text boxes: w:txbxContent's paragraphs
            }
        }
    }

    const std::string& path_;
    ZipContainer& zip_;
    std::string_view ns_;
    Numbering numbering_;
    std::map<int, std::vector<int>> counters_; ///< by w:numId: each level's last number
    std::map<int, int> list_groups_;           ///< by w:numId: its ParagraphText group
    std::map<std::string, std::string> footnotes_, endnotes_;
    std::map<std::string, int> footnote_numbers_, endnote_numbers_; ///< by w:id: its number
    ParagraphText text_;
    int32_t paragraphs_ = 0;
    int note_count_ = 0;
};

} // namespace

LoadedDocument load_docx(const std::string& path, ZipContainer& zip) {
    return DocxReader(path, zip).read();
}

} // namespace spanscope
