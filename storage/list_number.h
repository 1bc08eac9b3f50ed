// The labels of numbered list items ("3", "c", "iii"), as word processors and HTML number them.
#pragma once

#include <string>

namespace spanscope {

/// How a list numbers its items.
enum class NumberStyle { Decimal, LowerLetter, UpperLetter, LowerRoman, UpperRoman };

/// Item `n` (1-based) in `style`: 3 -> "3", "c", "C", "iii", "III". Letters continue as
/// spreadsheets' columns do (27 -> "aa"). Written in decimal instead: n < 1 in any style, and
/// n >= 4000 in a Roman style (which has no numeral for it without overlines).
std::string list_number(int n, NumberStyle style);

} // namespace spanscope
