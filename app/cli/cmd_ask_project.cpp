#include "commands.h"

#include "document_loader.h"
#include "project_support.h"
#include "prompt.h"
#include "session.h"
#include "state_cache.h"
#include "text_input.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <set>

namespace spanscope::cli {

nlohmann::json answer_stats_json(const Answer& ans);
std::function<void(const std::string&)> answer_printer(PromptStyle style, bool* printed_any);

int run_ask_project(const AskOptions& o) {
    using Clock = std::chrono::steady_clock;
    install_interrupt_handler();
    if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("the question is empty");
    if (!is_valid_utf8(o.question))
        throw std::runtime_error("the question is not valid UTF-8");
    auto project = Project::open(resolve_project_path(o.project), /*create=*/!o.docs.empty());
    if (o.chat > 0 && !project->has_chat(o.chat))
        throw std::runtime_error(project->path() + " has no chat " + std::to_string(o.chat));
    auto model = open_model(o.model);
    const auto& info = model->info();

    const auto t0 = Clock::now();
    StateCache cache(*project, *model, chunking_for(*project, *model));
    SessionOptions so;
    so.threads = o.threads;
    Session scratch(*model, so);

    // Documents: those named with --doc-id, those added with --doc, or all.
    std::vector<int64_t> ids = o.doc_ids;
    for (const auto& path : o.docs) {
        const auto doc = load_document(path);
        const int64_t id = project->add_document(path, doc);
        cache.ingest(id, scratch, &g_interrupted, print_ingest_progress);
        ids.push_back(id);
    }
    if (ids.empty())
        for (const auto& d : project->documents())
            ids.push_back(d.id);
    if (ids.empty())
        throw std::runtime_error(project->path() +
                                 " has no documents; add some with spanscope-cli ingest");
    std::vector<std::pair<int64_t, std::vector<DocumentUnit>>> docs;
    std::vector<std::string> texts;
    std::set<int64_t> seen;
    for (const auto id : ids) {
        if (!seen.insert(id).second)
            continue;
        if (!project->document(id))
            throw std::runtime_error(project->path() + " has no document " + std::to_string(id) +
                                     " (see spanscope-cli project list-docs)");
        docs.emplace_back(id, cache.units(id));
        texts.push_back(project->document_text(id));
    }

    const auto question = question_tokens(model->tokenizer(), info.instruction_tuned, o.question);
    const int64_t budget = info.n_ctx_train - static_cast<int64_t>(question.size()) - o.max_tokens;
    int skipped = 0;
    const auto chosen = choose_units(docs, texts, o.question, budget, &skipped);
    if (chosen.empty())
        throw ContextOverflow("no document section fits the context window of " +
                              std::to_string(info.n_ctx_train) + " tokens with this question");
    if (skipped > 0)
        std::cerr << "note: the documents do not fit the context window; answering from the "
                  << chosen.size() << " sections that share the most words with the question ("
                  << skipped << " left out)\n";

    // Assemble: each unit's stored rows at its new offset (keys re-rotated, no recompute).
    Session session(*model, so);
    int64_t offset = 0, restored = 0, recomputed_units = 0;
    for (const auto& c : chosen) {
        UnitStates states;
        try {
            states = cache.load_unit(c.document_id, c.unit);
        } catch (const StateError& e) {
            // Missing (evicted, never ingested, other model) or unusable: compute, then use.
            project->log_event("recomputed", "document " + std::to_string(c.document_id) +
                                                 " unit " + std::to_string(c.unit) + ": " +
                                                 e.what());
            cache.ingest(c.document_id, scratch, &g_interrupted, print_ingest_progress);
            states = cache.load_unit(c.document_id, c.unit);
            ++recomputed_units;
        }
        restored += cache.restore_unit(states, session, offset);
        offset += c.tokens;
    }
    session.adopt_memory(offset);
    const double assembly_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

    const PromptStyle style =
        info.instruction_tuned ? PromptStyle::GemmaChat : PromptStyle::Completion;
    bool printed_any = false;
    SamplingParams sp;
    sp.temperature = o.temperature;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.seed = o.seed;
    Answer ans;
    try {
        ans = session.answer_after_context(question, style, o.max_tokens, sp,
                                           o.json ? nullptr : answer_printer(style, &printed_any),
                                           &g_interrupted);
    } catch (const Cancelled&) {
        std::cerr << "\ninterrupted\n";
        return 130;
    }
    // Prompt tokens run through the model by this ask, counted by the sessions (the question,
    // and any unit that had to be recomputed); rows restored from storage, counted as they
    // were stored into the memory.
    ans.stats.tokens_computed += scratch.tokens_processed();
    ans.stats.tokens_reused = restored;
    ans.stats.ttft_ms += assembly_ms;

    std::set<int64_t> used_docs;
    for (const auto& c : chosen)
        used_docs.insert(c.document_id);
    auto stats = answer_stats_json(ans);
    stats["units"] = chosen.size();
    stats["units_left_out"] = skipped;
    stats["units_recomputed"] = recomputed_units;
    stats["assembly_ms"] = assembly_ms;
    stats["assembly"] = used_docs.size() > 1 || chosen.size() > 1
                            ? "position-independent: cached units re-rotated to their new "
                              "positions, no recompute"
                            : "exact: one unit at its own positions";
    const int64_t chat = o.chat > 0 ? o.chat : project->create_chat(o.question.substr(0, 80));
    project->add_message(chat, "user", o.question);
    nlohmann::json msg_stats = stats;
    msg_stats["documents"] = std::vector<int64_t>(used_docs.begin(), used_docs.end());
    project->add_message(chat, "assistant", ans.text,
                         msg_stats.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!o.json) {
        std::cout << "\n";
        std::cerr << "(chat " << chat << "; " << restored << " tokens restored, "
                  << ans.stats.tokens_computed << " computed; first token after "
                  << static_cast<int64_t>(ans.stats.ttft_ms) << " ms)\n";
        return 0;
    }
    nlohmann::json j;
    j["answer"] = ans.text;
    j["stop_reason"] = ans.stop_reason;
    j["chat_id"] = chat;
    j["documents"] = std::vector<int64_t>(used_docs.begin(), used_docs.end());
    j["stats"] = stats;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
}

} // namespace spanscope::cli
