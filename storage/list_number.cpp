#include "storage/list_number.h"

namespace spanscope {

std::string list_number(int n, NumberStyle style) {
    if (n < 1 || style == NumberStyle::Decimal)
        return std::to_string(n);
    std::string out;
    if (style == NumberStyle::LowerLetter || style == NumberStyle::UpperLetter) {
        const char a = style == NumberStyle::LowerLetter ? 'a' : 'A';
        for (int k = n; k > 0; k = (k - 1) / 26)
            out.insert(out.begin(), static_cast<char>(a + (k - 1) % 26));
        return out;
    }
    if (n >= 4000)
        return std::to_string(n);
    static constexpr struct {
        int value;
        const char* upper;
        const char* lower;
    } kRoman[] = {{1000, "M", "m"}, {900, "CM", "cm"}, {500, "D", "d"}, {400, "CD", "cd"},
                  {100, "C", "c"},  {90, "XC", "xc"},  {50, "L", "l"},  {40, "XL", "xl"},
                  {10, "X", "x"},   {9, "IX", "ix"},   {5, "V", "v"},   {4, "IV", "iv"},
                  {1, "I", "i"}};
    for (const auto& r : kRoman)
        for (; n >= r.value; n -= r.value)
            out += style == NumberStyle::UpperRoman ? r.upper : r.lower;
    return out;
}

std::string bounded_list_label(std::string label) {
    if (label.size() <= kMaxListLabelBytes)
        return label;
    size_t cut = kMaxListLabelBytes;
    while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80)
        --cut; // not inside a character's continuation bytes
    label.resize(cut);
    return label;
}

} // namespace spanscope
