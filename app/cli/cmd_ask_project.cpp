#include "app/cli/commands.h"

#include "answering/project_answer.h"
#include "answering/state_cache.h"
#include "app/cli/cli_sources.h"
#include "app/cli/project_support.h"
#include "engine/session/session.h"
#include "storage/document_loader.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

namespace spanscope::cli {

std::function<void(const std::string&)> answer_printer(bool* printed_any);

namespace {

int ask_project(const AskOptions& o) {
    if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("the question is empty");
    // Documents and model first: a command that cannot run creates no project.
    std::vector<std::pair<std::string, LoadedDocument>> added;
    try {
        for (const auto& path : o.docs)
            added.emplace_back(std::filesystem::absolute(path).lexically_normal().string(),
                               load_document(path, cli_load_options(path)));
    } catch (...) {
        clear_progress_line(); // an OCR progress line does not stay before the message
        throw;
    }
    clear_progress_line();
    auto model = open_model(o.model, o.backend);
    auto project = Project::open(resolve_project_path(o.project), /*create=*/!o.docs.empty());
    if (o.chat > 0 && !project->has_chat(o.chat))
        throw std::runtime_error(project->path() + " has no chat " + std::to_string(o.chat));

    StateCache cache(*project, *model, chunking_for(*project, *model));
    SessionOptions so;
    so.threads = o.threads;
    Session scratch(*model, so);

    ProjectQuestion q;
    q.question = o.question;
    q.chat_id = o.chat;
    q.document_ids = o.doc_ids;
    q.max_tokens = o.max_tokens;
    q.sampling.temperature = o.temperature;
    q.sampling.top_k = o.top_k;
    q.sampling.top_p = o.top_p;
    q.sampling.seed = o.seed;
    q.recompute.selector = o.selector;
    q.recompute.ratio = o.recompute;
    q.recompute.state_init = parse_state_initialiser(o.state_init);
    for (const auto& [path, doc] : added) {
        const int64_t id = project->add_document(path, doc);
        std::cerr << path << ": document " << id << "\n";
        const auto t = std::chrono::steady_clock::now();
        if (cache.ingest(id, scratch, &g_interrupted, print_ingest_progress).tokens_computed > 0) {
            q.computed_now.push_back(id);
            q.compute_ms_before +=
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                    .count();
        }
        end_progress_line();
        q.document_ids.push_back(id);
    }
    q.tokens_computed_before = scratch.tokens_processed();
    for (const auto id : q.document_ids)
        if (!project->document(id))
            throw std::runtime_error(project->path() + " has no document " + std::to_string(id) +
                                     " (see spanscope-cli project list-docs)");

    bool printed_any = false;
    ProjectAskHooks hooks;
    if (!o.json)
        hooks.on_text = answer_printer(&printed_any);
    hooks.on_ingest_progress = print_ingest_progress;
    hooks.on_note = [](const std::string& note) {
        end_progress_line();
        std::cerr << "note: " << note << "\n";
    };
    // A chat continued under another model sends none of that model's turns (chat_history.h).
    hooks.on_question_saved = [&](int64_t chat_id, const ChatContext& chat) {
        if (!chat.restarted)
            return;
        end_progress_line();
        const auto& before = chat.left_out_model;
        std::cerr << "note: chat " << chat_id << " was answered by " << before.shown() << "; with "
                  << std::filesystem::path(model->path()).filename().string()
                  << " its history starts afresh (the earlier turns are not sent)\n";
    };
    if (project->documents().empty())
        throw std::runtime_error(project->path() +
                                 " has no documents; add some with spanscope-cli ingest");
    // A selector recomputes rows of the full policy: it takes the default policy's place with a
    // note (a given --policy sekv is refused with it).
    const auto setup = policy_setup(o.policy, *model, o.threads, print_note, q.recompute.selector);
    const ProjectAnswer a =
        ask_project(*project, *model, cache, scratch, setup.options, q, hooks, &g_interrupted);
    end_progress_line();
    const auto& ans = a.answer;
    if (ans.stop_reason == "stopped")
        throw Cancelled();
    const auto replace = nlohmann::json::error_handler_t::replace;
    // Each source's document as the project names it.
    std::map<int64_t, CitedDocument> cited;
    const auto document_of = [&](int64_t id) {
        auto it = cited.find(id);
        if (it == cited.end()) {
            const auto d = project->document(id);
            it = cited
                     .emplace(id, d ? CitedDocument{d->name, d->format}
                                    : CitedDocument{"document " + std::to_string(id), ""})
                     .first;
        }
        return it->second;
    };
    if (!o.json) {
        std::cout << "\n";
        print_sources(std::cout, a.sources, document_of);
        std::cerr << "(chat " << a.chat_id << "; " << units_used_text(a) << "; "
                  << ans.stats.tokens_reused << " tokens restored, " << ans.stats.tokens_computed
                  << " computed; first token after " << static_cast<int64_t>(ans.stats.ttft_ms)
                  << " ms" << (ans.stats.router.empty() ? "" : "; router " + ans.stats.router)
                  << ")\n";
        return 0;
    }
    nlohmann::json j;
    j["answer"] = ans.text;
    j["stop_reason"] = ans.stop_reason;
    j["chat_id"] = a.chat_id;
    j["documents"] = a.documents;
    j["stats"] = a.stats;
    j["sources"] = sources_json(a.sources, document_of);
    std::cout << j.dump(-1, ' ', false, replace) << "\n";
    return 0;
}

} // namespace

int run_ask_project(const AskOptions& o) {
    install_interrupt_handler();
    try {
        return ask_project(o);
    } catch (const Cancelled&) {
        end_progress_line();
        std::cerr << "interrupted: what was committed is kept\n";
        return interrupted_exit_code();
    }
}

} // namespace spanscope::cli
