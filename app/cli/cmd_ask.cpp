#include "app/cli/commands.h"

#include "answering/project_answer.h"

#include "app/cli/cli_sources.h"
#include "app/cli/project_support.h"
#include "engine/linearkv/unit_prefill.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/chunking.h"
#include "engine/text/prompt.h"
#include "engine/text/text_input.h"
#include "storage/document_loader.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <iostream>

namespace spanscope::cli {

/// Prints answer pieces to stdout as they stream (the session hands on only what is surely the
/// answer's: Session::ask); leading whitespace of a completion ("Answer: 30") is dropped.
std::function<void(const std::string&)> answer_printer(bool* printed_any) {
    return [printed_any](const std::string& piece) {
        std::string p = piece;
        if (!*printed_any) {
            const auto b = p.find_first_not_of(" \t\n");
            if (b == std::string::npos)
                return;
            p = p.substr(b);
        }
        std::cout << p << std::flush;
        *printed_any = true;
    };
}

int run_ask(const AskOptions& o) {
    if (o.use_project)
        return run_ask_project(o);
    if (o.docs.empty())
        throw std::runtime_error("give documents with --doc, or a project with --project");
    // Read and check every document before loading the model or printing anything.
    struct Doc {
        std::string name, text, format;
        std::vector<SourceAnchor> offset_map;
    };
    std::vector<Doc> docs;
    // Ctrl-C from here on: OCR of a scanned page stops too.
    install_interrupt_handler();
    for (const auto& path : o.docs) {
        // The file name is shown to the model: a name that is not UTF-8 gets '?' for each
        // byte that breaks it, so that it cannot fail the prompt.
        std::string name = std::filesystem::path(path).filename().string();
        if (!is_valid_utf8(name))
            for (auto& c : name)
                if (static_cast<unsigned char>(c) >= 0x80)
                    c = '?';
        LoadedDocument loaded;
        try {
            loaded = load_document(path, cli_load_options(path));
        } catch (const Cancelled&) {
            end_progress_line();
            std::cerr << "interrupted\n";
            return interrupted_exit_code();
        } catch (...) {
            clear_progress_line();
            throw;
        }
        clear_progress_line();
        for (const auto& w : loaded.warnings)
            std::cerr << path << ": " << w << "\n";
        docs.push_back({name, std::move(loaded.text), format_name(loaded.format),
                        std::move(loaded.offset_map)});
    }
    if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("the question is empty");
    if (!is_valid_utf8(o.question))
        throw std::runtime_error("the question is not valid UTF-8");

    auto model = open_model(o.model, o.backend);
    const auto& info = model->info();
    const int64_t n_ctx = info.n_ctx_train;
    // The documents are cut and tokenised exactly as a project stores them (chunking.h), so a
    // cold answer here and a warm one from `ask --project` see the same tokens.
    ChunkingOptions co;
    const ChatFormat format = chat_format_of(info, model->tokenizer());
    co.chat_format = format;
    co.max_unit_tokens = INT64_MAX / 4; // one unit per document: a prompt too long is refused below
    std::vector<DocumentUnit> units;
    std::vector<size_t> unit_doc; // each unit's document (one unit per document)
    int64_t total = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
        for (auto& u : build_document_units(model->tokenizer(), docs[i].name, docs[i].text, co)) {
            total += u.n_tokens();
            units.push_back(std::move(u));
            unit_doc.push_back(i);
        }
    }
    const auto question = question_tokens(model->tokenizer(), format, o.question);
    total += static_cast<int64_t>(question.size());
    if (total > n_ctx)
        throw ContextOverflow("the prompt is " + std::to_string(total) +
                              " tokens, longer than the model's context window of " +
                              std::to_string(n_ctx) +
                              " tokens (a project splits long documents into sections: "
                              "spanscope-cli ingest)");

    Session session(*model, policy_setup(o.policy, *model, o.threads, print_note).options);
    const bool sekv = !session.memory().sealing_layers().empty();
    SamplingParams sp;
    sp.temperature = o.temperature;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.seed = o.seed;

    const auto t0 = std::chrono::steady_clock::now();
    Answer ans;
    bool printed_any = false;
    // On a terminal, the documents' prefill says how far it is (a long document takes a while
    // before the first answer token); redirected, stderr stays for notes and errors.
    const bool show_progress = isatty(STDERR_FILENO) == 1;
    const int64_t doc_tokens = total - static_cast<int64_t>(question.size());
    int64_t done_before = 0;
    const auto progress = [&](int64_t done, int64_t) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const int64_t n = done_before + done;
        std::string line = "reading the documents: " + std::to_string(n) + " of " +
                           std::to_string(doc_tokens) + " tokens";
        if (s > 0)
            line += ", " + std::to_string(static_cast<int64_t>(static_cast<double>(n) / s)) +
                    " tokens/s";
        show_progress_line(line);
    };
    // The passages an answer may cite: documents are numbered from 1 in the order given.
    std::vector<SourcePassage> passages;
    try {
        for (size_t ui = 0; ui < units.size(); ++ui) {
            const auto& u = units[ui];
            const auto d = unit_doc[ui];
            // SEKV holds each document at two resolutions once it is prefilled; its
            // segmentation needs every token's surprisal, computed in the same passes.
            const int64_t offset = session.n_past();
            std::vector<float> surprisal;
            const ChunkDone keep = [&](size_t, const std::vector<float>& s,
                                       const std::vector<float>&) {
                surprisal.insert(surprisal.end(), s.begin(), s.end());
            };
            prefill_unit(session, u, 0, offset, sekv ? keep : ChunkDone{}, &g_interrupted,
                         show_progress ? progress : std::function<void(int64_t, int64_t)>{},
                         /*surprisal=*/sekv);
            done_before += u.n_tokens();
            if (sekv) {
                const auto sealed = session.seal_context(
                    surprisal.data(), static_cast<int32_t>(offset), u.n_tokens());
                append_section_passages(u, docs[d].text, &sealed.segmentation,
                                        static_cast<int64_t>(d) + 1, offset, passages);
            } else {
                append_section_passages(u, docs[d].text, nullptr, static_cast<int64_t>(d) + 1,
                                        offset, passages);
            }
        }
        if (!passages.empty() && session.reports_sources())
            session.set_source_ranges(passage_ranges(passages));
        clear_progress_line(); // the line cleared before the answer
        const int64_t processed_before_question = session.tokens_processed();
        const double prefill_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        ans = session.answer_after_context(question, format, o.max_tokens, sp,
                                           o.json ? nullptr : answer_printer(&printed_any),
                                           &g_interrupted);
        ans.stats.ttft_ms += prefill_ms;
        ans.stats.tokens_reused = 0;
        ans.stats.tokens_computed += processed_before_question; // the documents, then the question
        ans.stats.prefill_ms += prefill_ms;
        ans.stats.prefill_tokens_per_s =
            ans.stats.tokens_computed / (ans.stats.prefill_ms / 1000.0);
    } catch (const Cancelled&) {
        end_progress_line();
        std::cerr << "interrupted\n";
        return interrupted_exit_code();
    }
    if (ans.stop_reason == "stopped") { // Ctrl-C during the answer
        std::cerr << "\ninterrupted\n";
        return interrupted_exit_code();
    }
    std::vector<SourceRecord> sources;
    if (!ans.source_mass.empty())
        sources = top_sources(
            passages, passage_shares(ans.source_mass, passages.size()), kAnswerSources,
            [&](int64_t id) -> const std::string& {
                return docs[static_cast<size_t>(id - 1)].text;
            },
            [&](int64_t id) -> const std::vector<SourceAnchor>& {
                return docs[static_cast<size_t>(id - 1)].offset_map;
            });
    const auto document_of = [&](int64_t id) {
        const auto& d = docs[static_cast<size_t>(id - 1)];
        return CitedDocument{d.name, d.format};
    };
    if (!o.json) {
        std::cout << "\n";
        print_sources(std::cout, sources, document_of);
        return 0;
    }
    nlohmann::json j;
    j["answer"] = ans.text;
    j["stop_reason"] = ans.stop_reason;
    j["stats"] = answer_stats_json(ans);
    j["sources"] = sources_json(sources, document_of); // document_id: the --doc's place, from 1
    if (ans.source_mass.empty() && !passages.empty() && !ans.tokens.empty())
        j["sources_not_measured"] = "the memory of the " + session.options().global_policy +
                                    " policy on this backend does not report attention mass";
    // replace: a byte-fallback answer may end in an incomplete UTF-8 sequence.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
}

} // namespace spanscope::cli
