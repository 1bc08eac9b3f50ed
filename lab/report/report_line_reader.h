// Reading the fields of one JSON result line, naming the file and line in every error (shared by
// the evaluation and the position-independent caching results). Internal to spanscope-report.
#pragma once

#include "lab/report/report_data.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <optional>
#include <string>

namespace spanscope::report {

using json = nlohmann::json;

/// A malformed line: "NAME:LINE: what".
[[noreturn]] inline void bad_line(const std::string& name, int line_no, const std::string& what) {
    throw InputError(name + ":" + std::to_string(line_no) + ": " + what);
}

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix, kept short.
inline std::string parse_message(const json::parse_error& e) {
    std::string m = e.what();
    if (!m.empty() && m.front() == '[') {
        const auto close = m.find("] ");
        if (close != std::string::npos)
            m = m.substr(close + 2);
    }
    if (m.size() > 160)
        m = m.substr(0, 157) + "...";
    return m;
}

/// Exact text of a double for the de-duplication key.
inline std::string key_number(double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

/// `path` opened for reading its lines. Throws InputError for a directory or a file that
/// cannot be opened.
inline std::ifstream open_lines(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError("cannot read " + path + ": it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw InputError("cannot open " + path + ": " + std::strerror(errno));
    return in;
}

/// fn(line, number) for each line of `in`, numbered from 1. Throws InputError "cannot read
/// NAME" when reading fails.
inline void for_each_line(std::istream& in, const std::string& name,
                          const std::function<void(const std::string&, int)>& fn) {
    std::string line;
    int line_no = 0;
    while (std::getline(in, line))
        fn(line, ++line_no);
    if (in.bad())
        throw InputError("cannot read " + name);
}

/// The JSON object of one line (a trailing CR dropped); nullopt for a blank line, which carries
/// nothing. Throws InputError "NAME:LINE: ..." when the line is not a JSON object.
inline std::optional<json> parse_object_line(const std::string& raw, const std::string& name,
                                             int line_no) {
    std::string line = raw;
    if (!line.empty() && line.back() == '\r')
        line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
        return std::nullopt;
    json obj;
    try {
        obj = json::parse(line);
    } catch (const json::parse_error& e) {
        bad_line(name, line_no, "not valid JSON: " + parse_message(e));
    }
    if (!obj.is_object())
        bad_line(name, line_no, "not a JSON object");
    return obj;
}

/// Reads the fields of one line, naming the line in every error.
class LineReader {
public:
    LineReader(const json& obj, const std::string& name, int line_no)
        : obj_(obj), name_(name), line_no_(line_no) {}

    [[noreturn]] void fail(const std::string& what) const { bad_line(name_, line_no_, what); }

    /// The member, nullptr when absent or null.
    const json* find(const char* key) const {
        const auto it = obj_.find(key);
        return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }
    const json& need(const char* key) const {
        const json* v = find(key);
        if (!v)
            fail(std::string("result line without \"") + key + "\"");
        return *v;
    }
    std::string string(const char* key) const {
        const json& v = need(key);
        if (!v.is_string())
            fail(std::string("\"") + key + "\" is not a string");
        return v.get<std::string>();
    }
    double number(const char* key) const { return number_of(need(key), key); }
    double number_of(const json& v, const std::string& what) const {
        if (!v.is_number())
            fail("\"" + what + "\" is not a number");
        const double d = v.get<double>();
        if (!std::isfinite(d))
            fail("\"" + what + "\" is not finite");
        return d;
    }
    /// An integral number (1 and 1.0 both count).
    long long integer(const char* key) const {
        const double d = number(key);
        if (d != std::floor(d) || std::fabs(d) > 9.0e15)
            fail(std::string("\"") + key + "\" is not an integer");
        return static_cast<long long>(d);
    }
    std::optional<double> optional_number(const json* parent, const char* key,
                                          const std::string& what) const {
        if (!parent)
            return std::nullopt;
        const auto it = parent->find(key);
        if (it == parent->end() || it->is_null())
            return std::nullopt;
        return number_of(*it, what);
    }

private:
    const json& obj_;
    const std::string& name_;
    int line_no_;
};

} // namespace spanscope::report
