// The text of a word-processor document (DOCX, ODT) built paragraph by paragraph, with one
// offset anchor per paragraph.
#pragma once

#include "storage/document_loader.h" // SourceAnchor
#include "storage/list_number.h"     // for the loaders that include this

#include <string>
#include <string_view>
#include <vector>

namespace spanscope {

/// Paragraphs are set apart by a blank line, except consecutive paragraphs of one group (the
/// items of one list, the rows of one table), which are set apart by a line break. Inside a table
/// cell, paragraphs are joined by a space and cells by a tab. A paragraph with no visible character
/// is dropped.
class ParagraphText {
public:
    /// A group id no other list or table of this text has (for `begin`).
    int new_group() { return ++groups_; }
    /// Starts source paragraph number `number` (1-based, counted over the whole document).
    /// `group`: 0 for a paragraph on its own, else the list or table it belongs to (new_group);
    /// a paragraph of the same group as the one before is joined to it by one line break.
    void begin(int32_t number, int group) {
        if (cell_depth_ > 0) {
            if (!current_.empty() && current_.back() != '\t' && current_.back() != ' ')
                current_ += ' ';
            return;
        }
        current_.clear();
        number_ = number;
        group_ = group;
    }
    /// Appends text as written (spaces kept).
    void append(std::string_view s) { current_ += s; }
    /// Appends text with runs of spaces, tabs and line ends collapsed into one space (ODF's
    /// rule for its text nodes).
    void append_collapsed(std::string_view s) {
        for (const char c : s) {
            const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
            if (!space)
                current_ += c;
            else if (!current_.empty() && current_.back() != ' ' && current_.back() != '\t' &&
                     current_.back() != '\n')
                current_ += ' ';
        }
    }
    void tab() { current_ += '\t'; }
    /// A space, unless the text so far ends in whitespace (between the paragraphs of a note or
    /// a text box, which stay inside the paragraph that holds them).
    void separate() {
        if (!current_.empty() && current_.back() != ' ' && current_.back() != '\t' &&
            current_.back() != '\n')
            current_ += ' ';
    }
    void line_break() {
        while (!current_.empty() && current_.back() == ' ')
            current_.pop_back();
        current_ += '\n';
    }
    /// Inside a table cell (nested: a table in a cell stays in that cell).
    void begin_cell() {
        if (cell_depth_++ > 0 && !current_.empty() && current_.back() != ' ')
            current_ += ' ';
    }
    void end_cell() {
        if (--cell_depth_ == 0)
            current_ += '\t';
    }
    bool in_cell() const { return cell_depth_ > 0; }

    /// Ends the paragraph begun last (or the table row, outside a cell).
    void end() {
        if (cell_depth_ > 0)
            return;
        // Trailing spaces, tabs (the last cell's) and line breaks are not content.
        while (!current_.empty() &&
               (current_.back() == ' ' || current_.back() == '\t' || current_.back() == '\n'))
            current_.pop_back();
        size_t lead = 0;
        while (lead < current_.size() && (current_[lead] == ' ' || current_[lead] == '\n'))
            ++lead;
        if (lead == current_.size()) {
            current_.clear();
            return;
        }
        if (!text_.empty())
            text_ += group_ != 0 && group_ == last_group_ ? "\n" : "\n\n";
        SourceAnchor a;
        a.text_offset = static_cast<int64_t>(text_.size());
        a.line = number_;
        anchors_.push_back(a);
        text_.append(current_, lead, std::string::npos);
        current_.clear();
        last_group_ = group_;
    }

    std::string take_text() { return std::move(text_); }
    /// The text and its anchors as a loaded document of `format` (UTF-8 XML source).
    LoadedDocument take_document(DocumentFormat format) {
        LoadedDocument out;
        out.format = format;
        out.source_encoding = "UTF-8";
        out.text = std::move(text_);
        out.offset_map = std::move(anchors_);
        return out;
    }

private:
    std::string text_;
    std::vector<SourceAnchor> anchors_;
    std::string current_;
    int32_t number_ = 0;
    int group_ = 0;
    int last_group_ = 0;
    int groups_ = 0;
    int cell_depth_ = 0;
};

} // namespace spanscope
