#include "app/cli/commands.h"

#include "app/cli/project_support.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

namespace spanscope::cli {

/// [{"id", "path", "tokens", "chunks", "chunks_stored", ...}] in project order; tokens and
/// chunks under the given model's chunking, chunks_stored: chunks with a stored state for that
/// model (null without a model or before the document was chunked for it).
nlohmann::json documents_json(Project& project, const Model* model) {
    std::unique_ptr<StateCache> cache;
    if (model)
        cache = std::make_unique<StateCache>(project, *model, chunking_for(project, *model));
    auto out = nlohmann::json::array();
    for (const auto& d : project.documents()) {
        nlohmann::json j{{"id", d.id},
                         {"path", d.path},
                         {"tokens", nullptr},
                         {"chunks", nullptr},
                         {"chunks_stored", nullptr}};
        if (cache) {
            const auto st = cache->status(d.id);
            if (st.chunked) {
                j["tokens"] = st.tokens;
                j["chunks"] = st.chunks;
                j["chunks_stored"] = st.chunks_stored;
            }
        }
        j["name"] = d.name;
        j["format"] = d.format;
        j["text_bytes"] = d.text_bytes;
        if (!d.warnings.empty())
            j["warnings"] = d.warnings;
        out.push_back(std::move(j));
    }
    return out;
}

int run_project(const ProjectOptions& o) {
    const std::string path = resolve_project_path(o.project);
    auto project = Project::open(path, /*create=*/false);
    std::unique_ptr<Model> model;
    const bool want_model = o.action == "list-docs";
    if (want_model) {
        try {
            model = open_model(o.model);
        } catch (const std::exception& e) {
            if (!o.model.empty())
                throw;
            std::cerr << "note: " << e.what() << " (token counts omitted)\n";
        }
    }
    if (o.action == "list-docs") {
        const auto docs = documents_json(*project, model.get());
        if (o.json) {
            std::cout << docs.dump() << "\n";
            return 0;
        }
        if (docs.empty())
            std::cerr << "no documents (add some with spanscope-cli ingest)\n";
        const bool unread = std::any_of(docs.begin(), docs.end(), [](const nlohmann::json& d) {
            return d["chunks"].is_null();
        });
        if (model && !docs.empty()) {
            // The counts are one model's: its tokenizer and its stored states.
            const std::string name = model->info().name.empty()
                                         ? std::filesystem::path(model->path()).filename().string()
                                         : model->info().name;
            std::cerr << "token and chunk counts of " << name << " (" << model->path()
                      << "): its tokenizer and its stored states; --model gives another model's\n";
            if (unread)
                std::cerr << "note: '-': not read by " << name
                          << " yet; `project info` lists the models that read them\n";
        }
        for (const auto& d : docs) {
            std::string state = "-";
            if (!d["chunks"].is_null())
                state = d["chunks_stored"] == d["chunks"]
                            ? "stored"
                            : d["chunks_stored"].dump() + "/" + d["chunks"].dump() +
                                  " chunks stored (the rest when a question needs them, or "
                                  "ingest again)";
            std::cout << d["id"] << "\t" << (d["tokens"].is_null() ? "-" : d["tokens"].dump())
                      << " tokens\t" << (d["chunks"].is_null() ? "-" : d["chunks"].dump())
                      << " chunks\t" << state << "\t" << d["path"].get<std::string>() << "\n";
        }
        return 0;
    }
    if (o.action == "show-doc") {
        const int64_t id = o.doc_ids.at(0);
        if (!project->document(id))
            throw std::runtime_error(path + " has no document " + std::to_string(id) +
                                     " (see project list-docs)");
        const std::string text = project->document_text(id);
        int64_t begin = 0, end = static_cast<int64_t>(text.size());
        if (!o.chars.empty()) {
            const auto colon = o.chars.find(':');
            size_t used_b = 0, used_e = 0;
            try {
                begin = std::stoll(o.chars.substr(0, colon), &used_b);
                end = std::stoll(o.chars.substr(colon + 1), &used_e);
            } catch (const std::exception&) {
                used_b = 0;
            }
            if (colon == std::string::npos || used_b != colon ||
                used_e != o.chars.size() - colon - 1 || begin < 0 || end <= begin ||
                end > static_cast<int64_t>(text.size()))
                throw std::runtime_error(
                    "--chars " + o.chars + ": give BEGIN:END with 0 <= BEGIN < END <= " +
                    std::to_string(text.size()) + " (the bytes of the document's text)");
        }
        std::cout << text.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
        if (end > begin && text[static_cast<size_t>(end - 1)] != '\n')
            std::cout << "\n";
        return 0;
    }
    if (o.action == "remove-doc") {
        int missing = 0;
        for (const auto id : o.doc_ids) {
            if (project->remove_document(id))
                std::cerr << "removed document " << id << "\n";
            else {
                std::cerr << "spanscope-cli: " << path << " has no document " << id << "\n";
                ++missing;
            }
        }
        return missing ? 1 : 0;
    }
    if (o.action == "vacuum") {
        const auto before = project->info().file_bytes;
        project->vacuum();
        std::cerr << "vacuumed: " << human_bytes(before) << " -> "
                  << human_bytes(project->info().file_bytes) << "\n";
        return 0;
    }
    if (o.action == "set-cache-limit") {
        project->set_cache_limit_bytes(parse_bytes(o.cache_limit));
        const auto evicted = project->evict_to_limit();
        std::cerr << "cache limit " << human_bytes(project->cache_limit_bytes()) << "; evicted "
                  << human_bytes(evicted) << "\n";
        return 0;
    }
    if (o.action == "events") {
        auto q = project->db().prepare("SELECT at, kind, message FROM events ORDER BY id");
        bool any = false;
        while (q.step()) {
            std::cout << q.text(0) << "\t" << q.text(1) << "\t" << q.text(2) << "\n";
            any = true;
        }
        if (!any)
            std::cerr << "no events\n";
        return 0;
    }
    // info
    const auto i = project->info();
    if (o.json) {
        nlohmann::json j{{"path", i.path},
                         {"schema_version", i.schema_version},
                         {"file_bytes", i.file_bytes},
                         {"documents", i.documents},
                         {"chunks", i.chunks},
                         {"chats", i.chats},
                         {"messages", i.messages},
                         {"states", i.states},
                         {"state_bytes", i.state_bytes},
                         {"cache_limit_bytes", i.cache_limit_bytes}};
        j["models"] = nlohmann::json::array();
        for (const auto& m : i.models)
            j["models"].push_back({{"fingerprint", m.fingerprint},
                                   {"name", m.name},
                                   {"chunks", m.chunks},
                                   {"states", m.states},
                                   {"bytes", m.bytes},
                                   {"tokens", m.tokens},
                                   {"bytes_per_token", m.tokens ? m.bytes / m.tokens : 0}});
        std::cout << j.dump() << "\n";
        return 0;
    }
    std::cout << "project:        " << i.path << "\n"
              << "schema version: " << i.schema_version << "\n"
              << "file size:      " << human_bytes(i.file_bytes) << "\n"
              << "documents:      " << i.documents << " (" << i.chunks << " chunks"
              << (i.models.size() > 1 ? ", for the models together" : "") << ")\n"
              << "chats:          " << i.chats << " (" << i.messages << " messages)\n"
              << "chunk states:   " << i.states << ", " << human_bytes(i.state_bytes)
              << " (cache limit " << human_bytes(i.cache_limit_bytes)
              << "; each chunk's attention rows, and per section its sliding-window tail, empty "
                 "without such layers, or recurrent state)\n";
    for (const auto& m : i.models)
        std::cout << "  model " << (m.name.empty() ? "(name not recorded)" : m.name)
                  << " (fingerprint " << m.fingerprint.substr(0, 12) << "): " << m.chunks
                  << " chunks, " << m.states << " states, " << human_bytes(m.bytes) << " for "
                  << m.tokens << " tokens (" << (m.tokens ? m.bytes / m.tokens : 0)
                  << " bytes per token)\n";
    return 0;
}

} // namespace spanscope::cli
