// A command-line check that a number is finite. CLI11's Range, PositiveNumber and
// NonNegativeNumber compare with < and >, which NaN passes ("--budget nan" would be taken), so
// every floating-point option also carries this check, before its range.
#pragma once

#include <CLI/CLI.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace spanscope::cli {

/// Refuses a value that parses as NaN or ±infinity ("nan is not a finite number"); other
/// values (also ones that do not parse) are left to the option's own conversion and checks.
inline CLI::Validator finite_number() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            const char* rest = end;
            while (rest && std::isspace(static_cast<unsigned char>(*rest)))
                ++rest;
            if (end != s.c_str() && *rest == '\0' && !std::isfinite(v))
                return s + " is not a finite number";
            return {};
        },
        "", "FINITE");
}

} // namespace spanscope::cli
