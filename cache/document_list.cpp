#include "document_list.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace spanscope {

namespace {
constexpr const char* kKey = "document_list";

std::vector<int64_t> ids_of(const nlohmann::json& j, const char* key) {
    std::vector<int64_t> ids;
    if (!j.contains(key))
        return ids;
    const auto& a = j.at(key);
    if (!a.is_array())
        throw std::invalid_argument(std::string(key) + " is not a list");
    for (const auto& v : a) {
        if (!v.is_number_integer())
            throw std::invalid_argument(std::string(key) + " holds something else than an id");
        ids.push_back(v.get<int64_t>());
    }
    return ids;
}
} // namespace

DocumentListState project_document_list(Project& project, std::string* warning) {
    std::vector<int64_t> existing;
    for (const auto& d : project.documents())
        existing.push_back(d.id);
    std::sort(existing.begin(), existing.end());
    const std::set<int64_t> present(existing.begin(), existing.end());

    std::vector<int64_t> stored_order, stored_excluded;
    auto q = project.db().prepare("SELECT value FROM settings WHERE key = ?");
    q.bind(1, kKey);
    if (q.step()) {
        try {
            const auto j = nlohmann::json::parse(q.text(0));
            if (!j.is_object())
                throw std::invalid_argument("not a JSON object");
            stored_order = ids_of(j, "order");
            stored_excluded = ids_of(j, "excluded");
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
    for (const auto id : stored_order)
        if (present.count(id) && seen.insert(id).second)
            s.order.push_back(id);
    for (const auto id : existing)
        if (seen.insert(id).second)
            s.order.push_back(id);
    const std::set<int64_t> listed(stored_order.begin(), stored_order.end());
    for (const auto id : stored_excluded)
        if (present.count(id) && listed.count(id) &&
            std::find(s.excluded.begin(), s.excluded.end(), id) == s.excluded.end())
            s.excluded.push_back(id);
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
    const nlohmann::json j{{"order", state.order}, {"excluded", state.excluded}};
    project.db()
        .prepare("INSERT OR REPLACE INTO settings(key, value) VALUES (?, ?)")
        .bind(1, kKey)
        .bind(2, j.dump())
        .run();
}

} // namespace spanscope
