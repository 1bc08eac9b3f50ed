// Loading JSON Lines from a string in the report tests: one helper for every loader of
// spanscope-report (ResultLoader of report_data.h, CurvesLoader of report_curves.h), which read
// a stream with add_stream(in, name) and give what they read with finish().
#pragma once

#include "lab/report/report_data.h" // InputError

#include <sstream>
#include <string>

namespace report_test {

/// What Loader reads from text, its errors naming the file `name`. Throws InputError.
template <class Loader> auto load_with(const std::string& text, const std::string& name) {
    std::istringstream in(text);
    Loader loader;
    loader.add_stream(in, name);
    return loader.finish();
}

/// The InputError message of Loader reading text as "bad.jsonl" ("" when it loads).
template <class Loader> std::string load_error_with(const std::string& text) {
    try {
        load_with<Loader>(text, "bad.jsonl");
    } catch (const spanscope::report::InputError& e) {
        return e.what();
    }
    return "";
}

} // namespace report_test
