#include "commands.h"

#include "document_loader.h"
#include "project_support.h"
#include "prompt.h"
#include "session.h"
#include "state_cache.h"
#include "text_input.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>

namespace spanscope::cli {

nlohmann::json answer_stats_json(const Answer& ans);
std::function<void(const std::string&)> answer_printer(PromptStyle style, bool* printed_any);

namespace {

// The first `max_bytes` bytes of `s`, never cutting a UTF-8 character.
std::string utf8_prefix(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes)
        return s;
    size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    return s.substr(0, n);
}

// A chat's earlier exchanges and the documents its last answer used.
struct ChatContext {
    std::vector<std::pair<std::string, std::string>> history;
    std::vector<int64_t> documents;
};

ChatContext chat_context(Project& project, int64_t chat) {
    ChatContext c;
    std::string pending;
    for (const auto& m : project.messages(chat)) {
        if (m.role == "user") {
            pending = m.text;
            continue;
        }
        c.history.emplace_back(pending, m.text);
        const auto stats = nlohmann::json::parse(m.stats_json, nullptr, /*allow_exceptions=*/false);
        if (stats.is_object() && stats.contains("documents") && stats["documents"].is_array()) {
            c.documents.clear();
            for (const auto& d : stats["documents"])
                if (d.is_number_integer())
                    c.documents.push_back(d.get<int64_t>());
        }
    }
    return c;
}

int ask_project(const AskOptions& o) {
    using Clock = std::chrono::steady_clock;
    if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("the question is empty");
    if (!is_valid_utf8(o.question))
        throw std::runtime_error("the question is not valid UTF-8");
    // Documents and model first: a command that cannot run creates no project.
    std::vector<std::pair<std::string, LoadedDocument>> added;
    for (const auto& path : o.docs)
        added.emplace_back(std::filesystem::absolute(path).lexically_normal().string(),
                           load_document(path));
    auto model = open_model(o.model);
    auto project = Project::open(resolve_project_path(o.project), /*create=*/!o.docs.empty());
    if (o.chat > 0 && !project->has_chat(o.chat))
        throw std::runtime_error(project->path() + " has no chat " + std::to_string(o.chat));
    const auto& info = model->info();

    const auto t0 = Clock::now();
    StateCache cache(*project, *model, chunking_for(*project, *model));
    SessionOptions so;
    so.threads = o.threads;
    Session scratch(*model, so);

    // Documents: --doc-id and --doc, else those of the chat being continued, else all.
    const ChatContext chat = o.chat > 0 ? chat_context(*project, o.chat) : ChatContext{};
    std::vector<int64_t> ids = o.doc_ids;
    std::set<int64_t> computed_now; // documents whose states this ask computed
    for (const auto& [path, doc] : added) {
        const int64_t id = project->add_document(path, doc);
        std::cerr << path << ": document " << id << "\n";
        if (cache.ingest(id, scratch, &g_interrupted, print_ingest_progress).tokens_computed > 0)
            computed_now.insert(id);
        end_progress_line();
        ids.push_back(id);
    }
    if (ids.empty())
        ids = chat.documents;
    if (ids.empty())
        for (const auto& d : project->documents())
            ids.push_back(d.id);
    if (ids.empty())
        throw std::runtime_error(project->path() +
                                 " has no documents; add some with spanscope-cli ingest");
    std::vector<std::pair<int64_t, std::vector<DocumentUnit>>> docs;
    std::vector<std::string> texts;
    std::vector<std::vector<std::vector<int64_t>>> chunk_ids;
    std::set<int64_t> seen;
    for (const auto id : ids) {
        if (!seen.insert(id).second)
            continue;
        if (!project->document(id))
            throw std::runtime_error(project->path() + " has no document " + std::to_string(id) +
                                     " (see spanscope-cli project list-docs)");
        chunk_ids.emplace_back();
        docs.emplace_back(id, cache.units(id, &chunk_ids.back()));
        texts.push_back(project->document_text(id));
    }

    const auto question =
        question_tokens(model->tokenizer(), info.instruction_tuned, o.question, chat.history);
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
    // The chosen sections' states stay while this answer is assembled, whatever the limit.
    for (const auto& c : chosen)
        for (size_t d = 0; d < docs.size(); ++d)
            if (docs[d].first == c.document_id)
                cache.protect(chunk_ids[d][static_cast<size_t>(c.unit)]);

    // Assemble: each unit's stored rows at its new offset (keys re-rotated, no recompute).
    Session session(*model, so);
    int64_t offset = 0, restored = 0, recomputed_units = 0;
    for (const auto& c : chosen) {
        size_t d = 0;
        while (docs[d].first != c.document_id)
            ++d;
        const auto u = static_cast<size_t>(c.unit);
        UnitStates states;
        bool recomputed = false;
        try {
            states = cache.load_unit(docs[d].second[u], chunk_ids[d][u]);
        } catch (const StateError& e) {
            // Missing (evicted, interrupted, another model) or unusable: compute it, then use it.
            project->log_event("recomputed", "document " + std::to_string(c.document_id) +
                                                 " section " + std::to_string(c.unit + 1) + ": " +
                                                 e.what());
            cache.ingest(c.document_id, scratch, &g_interrupted, print_ingest_progress);
            end_progress_line();
            states = cache.load_unit(c.document_id, c.unit);
            recomputed = true;
            ++recomputed_units;
        }
        const int64_t rows = cache.restore_unit(states, session, offset);
        // A recomputed unit's tokens were computed by this ask, not reused (KNOWN-FAILURES 9).
        if (!recomputed && !computed_now.count(c.document_id))
            restored += rows;
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
    Answer ans = session.answer_after_context(
        question, style, o.max_tokens, sp, o.json ? nullptr : answer_printer(style, &printed_any),
        &g_interrupted);
    // Prompt tokens run through the model by this ask, counted by the sessions (the question,
    // and any section that had to be recomputed); rows restored from storage, counted as they
    // were stored into the memory.
    const int64_t recomputed_tokens = scratch.tokens_processed();
    ans.stats.tokens_computed += recomputed_tokens;
    ans.stats.tokens_reused = restored;
    ans.stats.ttft_ms += assembly_ms;
    // The sections just used stay protected until now; afterwards the limit holds again.
    project->evict_to_limit();

    std::set<int64_t> used_docs;
    for (const auto& c : chosen)
        used_docs.insert(c.document_id);
    auto stats = answer_stats_json(ans);
    stats["units"] = chosen.size();
    stats["units_left_out"] = skipped;
    stats["units_recomputed"] = recomputed_units;
    stats["tokens_recomputed"] = recomputed_tokens;
    stats["history_turns"] = chat.history.size();
    stats["assembly_ms"] = assembly_ms;
    std::string assembly = chosen.size() > 1
                               ? "position-independent: each section's cached keys re-rotated to "
                                 "its new position, nothing recomputed across sections"
                               : "exact: one section at its own positions";
    if (recomputed_units > 0)
        assembly += "; " + std::to_string(recomputed_units) +
                    " section(s) had no usable stored state and were computed first";
    stats["assembly"] = assembly;
    const int64_t chat_id = o.chat > 0 ? o.chat : project->create_chat(utf8_prefix(o.question, 80));
    project->add_message(chat_id, "user", o.question);
    nlohmann::json msg_stats = stats;
    msg_stats["documents"] = std::vector<int64_t>(used_docs.begin(), used_docs.end());
    const auto replace = nlohmann::json::error_handler_t::replace;
    project->add_message(chat_id, "assistant", ans.text, msg_stats.dump(-1, ' ', false, replace));
    if (!o.json) {
        std::cout << "\n";
        std::cerr << "(chat " << chat_id << "; " << restored << " tokens restored, "
                  << ans.stats.tokens_computed << " computed; first token after "
                  << static_cast<int64_t>(ans.stats.ttft_ms) << " ms)\n";
        return 0;
    }
    nlohmann::json j;
    j["answer"] = ans.text;
    j["stop_reason"] = ans.stop_reason;
    j["chat_id"] = chat_id;
    j["documents"] = std::vector<int64_t>(used_docs.begin(), used_docs.end());
    j["stats"] = stats;
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
