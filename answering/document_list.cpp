#include "answering/document_list.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace spanscope {

namespace {
constexpr const char* kKey = "document_list";

// A stored entry: [id, path]. SQLite gives a new document the id of a removed one when that
// one had the largest id, so an id alone could name another document later; its file tells them
// apart (and stays when a document is updated in place from the same file).
using Entry = std::pair<int64_t, std::string>;

std::vector<Entry> entries_of(const nlohmann::json& j, const char* key) {
    std::vector<Entry> out;
    if (!j.contains(key))
        return out;
    const auto& a = j.at(key);
    if (!a.is_array())
        throw std::invalid_argument(std::string(key) + " is not a list");
    for (const auto& v : a) {
        if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_string())
            throw std::invalid_argument(std::string(key) + " holds something else than [id, path]");
        out.emplace_back(v[0].get<int64_t>(), v[1].get<std::string>());
    }
    return out;
}
} // namespace

DocumentListState project_document_list(Project& project, std::string* warning) {
    std::map<int64_t, std::string> present; // id -> path
    for (const auto& d : project.documents())
        present[d.id] = d.path;
    const auto is_present = [&](const Entry& e) {
        const auto it = present.find(e.first);
        return it != present.end() && it->second == e.second;
    };

    std::vector<Entry> stored_order, stored_excluded;
    auto q = project.db().prepare("SELECT value FROM settings WHERE key = ?");
    q.bind(1, kKey);
    if (q.step()) {
        try {
            const auto j = nlohmann::json::parse(q.text(0));
            if (!j.is_object())
                throw std::invalid_argument("not a JSON object");
            stored_order = entries_of(j, "order");
            stored_excluded = entries_of(j, "excluded");
        } catch (const std::exception& e) {
            stored_order.clear();
            stored_excluded.clear();
            if (warning)
                *warning = project.path() + " has an unusable document list (" + e.what() +
                           "); the documents are listed by id, all in context";
        }
    }
    DocumentListState s;
    std::set<int64_t> seen;
    for (const auto& e : stored_order)
        if (is_present(e) && seen.insert(e.first).second)
            s.order.push_back(e.first);
    for (const auto& [id, added] : present) // ascending ids
        if (seen.insert(id).second)
            s.order.push_back(id);
    std::set<Entry> listed(stored_order.begin(), stored_order.end());
    std::set<int64_t> excluded;
    for (const auto& e : stored_excluded)
        if (is_present(e) && listed.count(e) && excluded.insert(e.first).second)
            s.excluded.push_back(e.first);
    return s;
}

void set_project_document_list(Project& project, const DocumentListState& state) {
    const std::set<int64_t> order(state.order.begin(), state.order.end());
    if (order.size() != state.order.size())
        throw std::invalid_argument("the document order names a document twice");
    for (const auto id : state.excluded)
        if (!order.count(id))
            throw std::invalid_argument("document " + std::to_string(id) +
                                        " is left out of the context but not in the list");
    std::map<int64_t, std::string> path;
    for (const auto& d : project.documents())
        path[d.id] = d.path;
    auto entries = [&](const std::vector<int64_t>& ids) {
        auto a = nlohmann::json::array();
        for (const auto id : ids)
            if (const auto it = path.find(id); it != path.end()) // removed meanwhile: dropped
                a.push_back(nlohmann::json::array({id, it->second}));
        return a;
    };
    const nlohmann::json j{{"order", entries(state.order)}, {"excluded", entries(state.excluded)}};
    project.db()
        .prepare("INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)")
        .bind(1, kKey)
        .bind(2, j.dump())
        .run();
}

} // namespace spanscope
