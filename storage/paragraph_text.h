// The text of a word-processor document (DOCX, ODT) built paragraph by paragraph, with one
// offset anchor per paragraph.
#pragma once

#include "storage/document_loader.h" // SourceAnchor

#include <string>
#include <string_view>
#include <vector>

namespace spanscope {

/// How a list numbers its items.
enum class NumberStyle { Decimal, LowerLetter, UpperLetter, LowerRoman, UpperRoman };

/// Item `n` (1-based; n < 1 is written as decimal) in `style`: 3 -> "3", "c", "C", "iii",
/// "III"; letters continue as spreadsheets' columns do (27 -> "aa").
inline std::string list_number(int n, NumberStyle style) {
    if (n < 1 || style == NumberStyle::Decimal)
        return std::to_string(n);
    std::string out;
    if (style == NumberStyle::LowerLetter || style == NumberStyle::UpperLetter) {
        const char a = style == NumberStyle::LowerLetter ? 'a' : 'A';
        for (int k = n; k > 0; k = (k - 1) / 26)
            out.insert(out.begin(), static_cast<char>(a + (k - 1) % 26));
        return out;
    }
    static constexpr struct {
        int value;
        const char* upper;
        const char* lower;
    } kRoman[] = {{1000, "M", "m"}, {900, "CM", "cm"}, {500, "D", "d"}, {400, "CD", "cd"},
                  {100, "C", "c"},  {90, "XC", "xc"},  {50, "L", "l"},  {40, "XL", "xl"},
                  {10, "X", "x"},   {9, "IX", "ix"},   {5, "V", "v"},   {4, "IV", "iv"},
                  {1, "I", "i"}};
    if (n >= 4000)
        return std::to_string(n);
    for (const auto& r : kRoman)
        for (; n >= r.value; n -= r.value)
            out += style == NumberStyle::UpperRoman ? r.upper : r.lower;
    return out;
}

/// Paragraphs are set apart by a blank line, except consecutive list items and consecutive
/// rows of one table, which are set apart by a line break. Inside a table cell, paragraphs are
/// joined by a space and cells by a tab. A paragraph with no visible character is dropped.
class ParagraphText {
public:
    /// Starts source paragraph number `number` (1-based, counted over the whole document).
    /// `tight`: a list item or a table row, joined to a tight predecessor by one line break.
    void begin(int32_t number, bool tight) {
        if (cell_depth_ > 0) {
            if (!current_.empty() && current_.back() != '\t' && current_.back() != ' ')
                current_ += ' ';
            return;
        }
        current_.clear();
        number_ = number;
        tight_ = tight;
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
            text_ += tight_ && last_tight_ ? "\n" : "\n\n";
        SourceAnchor a;
        a.text_offset = static_cast<int64_t>(text_.size());
        a.line = number_;
        anchors_.push_back(a);
        text_.append(current_, lead, std::string::npos);
        current_.clear();
        last_tight_ = tight_;
    }

    std::string take_text() { return std::move(text_); }
    std::vector<SourceAnchor> take_anchors() { return std::move(anchors_); }

private:
    std::string text_;
    std::vector<SourceAnchor> anchors_;
    std::string current_;
    int32_t number_ = 0;
    bool tight_ = false;
    bool last_tight_ = false;
    int cell_depth_ = 0;
};

} // namespace spanscope
