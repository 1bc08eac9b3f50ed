// The labels of numbered list items ("3", "c", "iii"), as word processors and HTML number them.
#pragma once

#include <cstddef>
#include <string>

namespace spanscope {

/// How a list numbers its items.
enum class NumberStyle { Decimal, LowerLetter, UpperLetter, LowerRoman, UpperRoman };

/// Item `n` (1-based) in `style`: 3 -> "3", "c", "C", "iii", "III". Letters continue as
/// spreadsheets' columns do (27 -> "aa"). Written in decimal instead: n < 1 in any style, and
/// n >= 4000 in a Roman style (which has no numeral for it without overlines).
std::string list_number(int n, NumberStyle style);

/// The most bytes a list item's label keeps: real labels are a few bytes ("1.", "a)", "(iv)",
/// "Article 1.2:", "1.2.3.4.5.6.7.8.9."), while a label is repeated on every item of its list,
/// so a long one (a style's prefix of kilobytes) would multiply a few bytes of markup per item
/// into megabytes of text.
constexpr size_t kMaxListLabelBytes = 32;

/// `label` cut to at most kMaxListLabelBytes bytes, at a UTF-8 character boundary.
std::string bounded_list_label(std::string label);

} // namespace spanscope
