#include "answering/project_answer.h"

#include <algorithm>

#include "answering/sekv_relevance.h"
#include "answering/sekv_unit.h"
#include "answering/unit_choice.h"
#include "engine/text/prompt.h"
#include "engine/text/tokenizer.h"

#include <chrono>
#include <optional>
#include <set>

namespace spanscope {

namespace {

using Clock = std::chrono::steady_clock;

// The first `max_bytes` bytes of `s`, never cutting a UTF-8 character.
std::string utf8_prefix(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes)
        return s;
    size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    return s.substr(0, n);
}

std::string dump(const nlohmann::json& j) {
    // replace: a byte-fallback answer may end in an incomplete UTF-8 sequence.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

nlohmann::json answer_stats_json(const Answer& ans) {
    const auto& s = ans.stats;
    nlohmann::json j = {{"prompt_tokens", s.prompt_tokens},
                        {"tokens_computed", s.tokens_computed},
                        {"tokens_reused", s.tokens_reused},
                        {"ttft_ms", s.ttft_ms},
                        {"prefill_tokens_per_s", s.prefill_tokens_per_s},
                        {"decode_tokens_per_s", s.decode_tokens_per_s},
                        {"generated_tokens", s.generated_tokens},
                        {"peak_rss_bytes", peak_rss_bytes()},
                        {"memory_fast_tier_bytes", s.memory.fast_tier_bytes},
                        {"memory_host_tier_bytes", s.memory.host_tier_bytes}};
    if (s.sekv_layers.empty()) {
        j["policy"] = "full";
        return j;
    }
    // SEKV or a baseline: the memory of the layers it serves only, per tier, and per layer.
    j["policy"] = s.policy.empty() ? "sekv" : s.policy;
    if (!s.router.empty())
        j["router"] = s.router;
    if (s.rerank > 0)
        j["rerank"] = s.rerank;
    j["memory"] = {{"fast_tier_bytes", s.sekv.fast_tier_bytes},
                   {"host_tier_bytes", s.sekv.host_tier_bytes},
                   {"full_kv_bytes", s.sekv.full_kv_bytes}};
    j["fast_tier_fraction"] = s.sekv.full_kv_bytes > 0
                                  ? static_cast<double>(s.sekv.fast_tier_bytes) /
                                        static_cast<double>(s.sekv.full_kv_bytes)
                                  : 0.0;
    // The budget is checked on what the memory actually held after the answer (the question
    // and answer at full resolution included), never assumed from the segmentation.
    j["budget"] = s.sekv_budget;
    j["within_budget"] = s.sekv_budget <= 0 || s.sekv_budget >= 1 ||
                         s.sekv.fast_tier_bytes <= s.sekv_budget * s.sekv.full_kv_bytes;
    j["expansions"] = s.expansions;
    j["spans"] = ans.zoom.n_spans;
    auto layers = nlohmann::json::array();
    for (const auto& [layer, m] : s.sekv_layers)
        layers.push_back({{"layer", layer},
                          {"fast_tier_bytes", m.fast_tier_bytes},
                          {"host_tier_bytes", m.host_tier_bytes},
                          {"full_kv_bytes", m.full_kv_bytes},
                          {"spans", m.spans}});
    j["memory_per_layer"] = layers;
    return j;
}

std::string units_used_text(const ProjectAnswer& a) {
    std::string s = std::to_string(a.units_used.size()) + " of " +
                    std::to_string(a.units_used.size() + static_cast<size_t>(a.units_left_out)) +
                    " sections used";
    // Grouped by document in the order used (a document's units are contiguous there).
    for (size_t i = 0; i < a.units_used.size();) {
        size_t j = i;
        while (j < a.units_used.size() &&
               a.units_used[j].document_id == a.units_used[i].document_id)
            ++j;
        s += (i == 0 ? ": " : ", ") + std::string("document ") +
             std::to_string(a.units_used[i].document_id) +
             (j - i == 1 ? " (section " : " (sections ");
        for (size_t k = i; k < j; ++k)
            s += (k == i ? "" : ", ") + std::to_string(a.units_used[k].unit + 1);
        s += ")";
        i = j;
    }
    return s;
}

ChatContext chat_context(Project& project, int64_t chat_id) {
    ChatContext c;
    std::string pending;
    for (const auto& m : project.messages(chat_id)) {
        if (m.role == "user") {
            pending = m.text;
            continue;
        }
        if (!m.text.empty())
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

namespace {

struct Assembly {
    std::vector<ChosenUnit> chosen;
    int skipped = 0;
    int candidates = 0;
    std::string ranking;        // how the units were ranked (empty: all fit)
    int64_t ranking_tokens = 0; // forwarded for the question's SEKV queries
    int64_t restored = 0, offset = 0;
    int recomputed_units = 0;
    // SEKV: where each section's spans sit among the context's spans, and what the SEKV
    // structures take on disk per layer (bytes).
    std::vector<ZoomSource> sources;
    int64_t spans = 0;
    int sekv_built = 0;
    std::vector<SekvLayerBytes> structure_bytes;
    // LinearKV: each section's first position, the concatenated token ids, the recompute pass.
    std::vector<int64_t> starts;
    std::vector<char> reused_section; // the section's rows count as restored
    std::vector<int32_t> tokens;
    AssemblyStats pic;
    // Hybrid models: each section's recurrent states at its end, in context order.
    std::vector<std::vector<RecurrentLayerState>> unit_states;
};

// Choose the units and restore them into `session` (computing the missing ones in scratch).
Assembly assemble(Project& project, const Model& model, StateCache& cache, Session& scratch,
                  Session& session, const std::vector<int64_t>& ids,
                  const std::vector<int32_t>& question, const ProjectQuestion& q,
                  const ProjectAskHooks& hooks, const std::atomic<bool>* cancel,
                  std::vector<std::string>& notes) {
    std::vector<std::pair<int64_t, std::vector<DocumentUnit>>> docs;
    std::vector<std::vector<std::vector<int64_t>>> chunk_ids;
    // Candidates in the order of the user's documents, units in text order: the order kept.
    std::vector<UnitCandidate> candidates;
    int64_t total = 0;
    for (const auto id : ids) {
        chunk_ids.emplace_back();
        docs.emplace_back(id, cache.units(id, &chunk_ids.back()));
        for (const auto& u : docs.back().second) {
            candidates.push_back({id, u.index, u.n_tokens(), std::nullopt, std::nullopt});
            total += u.n_tokens();
        }
    }
    const int64_t ctx = model.info().n_ctx_train;
    const int64_t budget = ctx - static_cast<int64_t>(question.size()) - q.max_tokens;
    Assembly a;
    a.candidates = static_cast<int>(candidates.size());
    if (total > budget) {
        // Rank only when something must be left out.
        int matched = 0;
        for (const auto& m : project.search_units(ids, cache.chunking_key(), q.question))
            for (auto& c : candidates)
                if (c.document_id == m.document_id && c.unit == m.unit) {
                    c.bm25 = m.bm25;
                    ++matched;
                }
        // SEKV: where summaries of a unit are stored under the session's SEKV options, the
        // question's queries (one forward pass of the question alone, no history) against them.
        const auto& sekv_options = session.options().sekv;
        const auto layers = sekv_layers(model.info(), sekv_options);
        std::optional<QuestionQueries> queries;
        int with_sekv = 0;
        size_t ci = 0;
        for (size_t d = 0; d < docs.size(); ++d)
            for (size_t u = 0; u < docs[d].second.size(); ++u, ++ci) {
                const auto st =
                    cache.stored_sekv_state(docs[d].second[u], chunk_ids[d][u], sekv_options);
                if (!st)
                    continue;
                if (!queries) {
                    queries = question_queries(model,
                                               question_tokens(model.tokenizer(),
                                                               model.info().instruction_tuned,
                                                               q.question),
                                               layers, session.pool(), cancel);
                    a.ranking_tokens = queries->n_tokens + 1;
                }
                candidates[ci].sekv = sekv_relevance(*queries, *st, model.info());
                with_sekv += candidates[ci].sekv.has_value();
            }
        a.ranking = with_sekv > 0 && matched > 0 ? "bm25+sekv (reciprocal rank fusion, k = 60)"
                    : with_sekv > 0 ? "sekv (no section contains a word of the question)"
                    : matched > 0   ? "bm25"
                                    : "none: no section contains a word of the question";
    }
    const UnitChoice choice = choose_units(candidates, budget);
    a.chosen = choice.chosen;
    a.skipped = choice.left_out;
    if (a.chosen.empty())
        throw ContextOverflow("no document section fits the context window of " +
                              std::to_string(ctx) + " tokens with this question");
    if (a.skipped > 0) {
        notes.push_back("the documents do not fit the context window; answering from " +
                        std::to_string(a.chosen.size()) + " of " + std::to_string(a.candidates) +
                        " sections" +
                        (a.ranking.starts_with("none")
                             ? " (no section contains a word of the question: the first that fit)"
                             : ", those ranked most relevant to the question (" + a.ranking + ")"));
        if (hooks.on_note)
            hooks.on_note(notes.back());
    }
    auto doc_index = [&](int64_t id) {
        size_t d = 0;
        while (docs[d].first != id)
            ++d;
        return d;
    };
    // The chosen sections' states stay while this answer is assembled, whatever the limit.
    for (const auto& c : a.chosen)
        cache.protect(chunk_ids[doc_index(c.document_id)][static_cast<size_t>(c.unit)]);

    // Assemble: each unit's stored rows at its new offset (keys re-rotated, no recompute).
    const std::set<int64_t> computed_now(q.computed_now.begin(), q.computed_now.end());
    for (const auto& c : a.chosen) {
        const size_t d = doc_index(c.document_id);
        const auto u = static_cast<size_t>(c.unit);
        UnitStates states;
        bool recomputed = false;
        try {
            states = cache.load_unit(docs[d].second[u], chunk_ids[d][u]);
        } catch (const StateError& e) {
            // Missing (evicted, interrupted, another model) or unusable: compute it, then use it.
            project.log_event("recomputed", "document " + std::to_string(c.document_id) +
                                                " section " + std::to_string(c.unit + 1) + ": " +
                                                e.what());
            cache.ingest(c.document_id, scratch, cancel, hooks.on_ingest_progress);
            states = cache.load_unit(c.document_id, c.unit);
            recomputed = true;
            ++a.recomputed_units;
        }
        const int64_t rows = cache.restore_unit(states, session, a.offset);
        if (states.recurrent)
            a.unit_states.push_back(states.recurrent->recurrent);
        if (!session.memory().sealing_layers().empty()) {
            bool built = false;
            const auto st = cache.sekv_state(docs[d].second[u], chunk_ids[d][u], states,
                                             session.options().sekv, &built);
            const int64_t n = hold_sekv_unit(session, st, a.offset);
            a.sources.push_back(
                {c.document_id, c.unit, static_cast<int>(a.spans), static_cast<int>(n), a.offset});
            a.spans += n;
            a.sekv_built += built;
            const auto bytes = sekv_layer_bytes(st);
            if (a.structure_bytes.empty())
                a.structure_bytes = bytes;
            else
                for (size_t i = 0; i < bytes.size(); ++i) {
                    a.structure_bytes[i].fast += bytes[i].fast;
                    a.structure_bytes[i].host += bytes[i].host;
                }
        }
        // A recomputed unit's tokens were computed by this ask, not reused (tests/README.md,
        // failure mode 9).
        const bool reused = !recomputed && !computed_now.count(c.document_id);
        if (reused)
            a.restored += rows;
        a.reused_section.push_back(reused);
        a.starts.push_back(a.offset);
        for (const auto& ch : docs[d].second[u].chunks)
            a.tokens.insert(a.tokens.end(), ch.tokens.begin(), ch.tokens.end());
        a.offset += c.tokens;
    }
    // Hybrid models: the recurrent layers start from the initialiser over the sections' states
    // (pic_assembly.h; restore_unit left the last section's there).
    std::vector<const std::vector<RecurrentLayerState>*> unit_states;
    for (const auto& u : a.unit_states)
        unit_states.push_back(&u);
    double init_ms = 0;
    if (model.info().hybrid() && !a.starts.empty())
        init_ms = initialise_recurrent_layers(model.info(), session.memory(), unit_states,
                                              q.recompute.state_init, a.offset);
    a.pic.init_ms = init_ms;
    if (q.recompute.selector != "none") {
        RecomputeOptions ro = q.recompute;
        ro.ubatch = session.ubatch();
        ro.epic_tokens = epic_tokens_for(ro.ratio, a.offset, std::ssize(a.starts));
        std::vector<int32_t> recomputed;
        a.pic = recompute_documents(model, session.memory(), a.tokens, a.starts, ro, session.pool(),
                                    &recomputed, cancel, &unit_states);
        a.pic.init_ms = init_ms;
        // Tokens the pass recomputed were computed, not reused (tests/README.md, failure mode 9):
        // those of sections counted as restored leave that count.
        for (const int32_t p : recomputed) {
            const auto sec =
                static_cast<size_t>(std::upper_bound(a.starts.begin(), a.starts.end(), int64_t{p}) -
                                    a.starts.begin() - 1);
            if (a.reused_section[sec])
                --a.restored;
        }
    }
    session.adopt_memory(a.offset);
    return a;
}

// The selector that needs rows a project does not store.
constexpr const char* kNeedsSlidingRows = "cacheblend";

} // namespace

std::vector<std::string> project_selectors() {
    std::vector<std::string> out;
    for (const auto& s : recompute_selectors())
        if (s != kNeedsSlidingRows)
            out.push_back(s);
    return out;
}

std::string project_selector_problem(const std::string& selector) {
    const auto offered = project_selectors();
    if (std::find(offered.begin(), offered.end(), selector) != offered.end())
        return {};
    std::string list;
    for (size_t i = 0; i < offered.size(); ++i)
        list += (i == 0 ? "" : i + 1 == offered.size() ? " or " : ", ") + offered[i];
    if (selector == kNeedsSlidingRows)
        return selector +
               " is not offered with a project: it needs every row of the sliding-window layers, "
               "and a project stores only their last window (use " +
               list + ")";
    return "'" + selector + "' is not one of " + list;
}

ProjectAnswer ask_project(Project& project, const Model& model, StateCache& cache, Session& scratch,
                          const SessionOptions& session_options, const ProjectQuestion& q,
                          const ProjectAskHooks& hooks, const std::atomic<bool>* cancel) {
    if (q.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::invalid_argument("the question is empty");
    if (!is_valid_utf8(q.question))
        throw std::invalid_argument("the question is not valid UTF-8");
    if (q.chat_id > 0 && !project.has_chat(q.chat_id))
        throw std::invalid_argument(project.path() + " has no chat " + std::to_string(q.chat_id));
    if (session_options.global_policy != "full" && session_options.global_policy != "sekv")
        throw std::invalid_argument(
            "a project answers with the full or sekv policy; '" + session_options.global_policy +
            "' selects its rows from a prefill of the text (its attention statistics are not "
            "stored): ask with --doc instead");
    if (const auto problem = project_selector_problem(q.recompute.selector); !problem.empty())
        throw std::invalid_argument(problem);
    if (q.recompute.selector != "none" && session_options.global_policy != "full")
        throw std::invalid_argument("the " + q.recompute.selector +
                                    " selector recomputes rows of the full policy; ask with "
                                    "--policy full (SEKV joins sections without recompute)");
    const auto& info = model.info();
    const auto t0 = Clock::now();
    const int64_t computed_before = scratch.tokens_processed();

    // Documents: the given ones, else those of the chat being continued, else all.
    const ChatContext chat = q.chat_id > 0 ? chat_context(project, q.chat_id) : ChatContext{};
    std::vector<int64_t> ids;
    {
        std::set<int64_t> seen;
        for (const auto id : q.document_ids.empty() ? chat.documents : q.document_ids)
            if (seen.insert(id).second)
                ids.push_back(id);
        if (ids.empty())
            for (const auto& d : project.documents())
                ids.push_back(d.id);
    }
    if (ids.empty())
        throw std::invalid_argument(project.path() + " has no documents to answer from");
    for (const auto id : ids)
        if (!project.document(id))
            throw std::invalid_argument(project.path() + " has no document " + std::to_string(id));

    // Refusals that need no document are made before the question is saved.
    const PromptStyle style =
        info.instruction_tuned ? PromptStyle::GemmaChat : PromptStyle::Completion;
    const auto question =
        question_tokens(model.tokenizer(), info.instruction_tuned, q.question, chat.history);
    if (static_cast<int64_t>(question.size()) + q.max_tokens >= info.n_ctx_train)
        throw ContextOverflow("the question (" + std::to_string(question.size()) +
                              " tokens with the chat's history) and " +
                              std::to_string(q.max_tokens) +
                              " answer tokens leave no room for a document in the context "
                              "window of " +
                              std::to_string(info.n_ctx_train) + " tokens");
    if (q.recompute.state_init == StateInitialiser::Exact)
        for (const auto& l : info.layers)
            if (l.kind == LayerKind::GatedDeltaNet)
                throw std::invalid_argument(
                    "state initialiser exact needs each section's Gated DeltaNet transition "
                    "matrix, which a project does not store; use single-block or zero");

    // The question is kept whatever happens next.
    ProjectAnswer out;
    out.chat_id = q.chat_id > 0 ? q.chat_id : project.create_chat(utf8_prefix(q.question, 80));
    project.add_message(out.chat_id, "user", q.question);
    if (hooks.on_question_saved)
        hooks.on_question_saved(out.chat_id);
    out.history_turns = chat.history.size();
    Assembly a;
    try {
        Session session(model, session_options);
        if (q.recompute.selector != "none")
            session.memory() = make_assembled_memory(model.info(), session.n_ctx());
        a = assemble(project, model, cache, scratch, session, ids, question, q, hooks, cancel,
                     out.notes);
        out.assembly_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        out.answer = session.answer_after_context(question, style, q.max_tokens, q.sampling,
                                                  hooks.on_text, cancel);
    } catch (const std::exception& e) {
        // Record why there is no answer; the question stays in the chat.
        const bool cancelled = dynamic_cast<const Cancelled*>(&e) != nullptr;
        nlohmann::json j{{"stop_reason", cancelled ? "stopped" : "error"}};
        if (!cancelled)
            j["error"] = e.what();
        project.add_message(out.chat_id, "assistant", "", dump(j));
        project.evict_to_limit();
        throw;
    }
    // Prompt tokens run through the model for this answer, counted by the sessions (the
    // scratch session's: sections that had to be computed; the answer's question is counted
    // by the answering session); rows restored from storage, counted as they were stored into
    // the memory.
    out.tokens_recomputed = scratch.tokens_processed() - computed_before;
    auto& ans = out.answer;
    ans.stats.tokens_computed +=
        out.tokens_recomputed + q.tokens_computed_before + a.pic.tokens_forwarded;
    ans.stats.tokens_reused = a.restored;
    ans.stats.ttft_ms += out.assembly_ms;
    // The sections just used stay protected until now; afterwards the limit holds again.
    project.evict_to_limit();

    for (const auto& c : a.chosen)
        if (std::find(out.documents.begin(), out.documents.end(), c.document_id) ==
            out.documents.end())
            out.documents.push_back(c.document_id);
    out.units = static_cast<int>(a.chosen.size());
    out.units_left_out = a.skipped;
    out.units_used = a.chosen;
    out.ranking = a.ranking;
    out.units_recomputed = a.recomputed_units;
    out.recompute = a.pic;
    out.assembly = a.chosen.size() <= 1 ? "exact: one section at its own positions"
                   : q.recompute.selector == "none"
                       ? "position-independent: each section's cached keys re-rotated to its new "
                         "position, nothing recomputed across sections"
                       : "position-independent, keys re-rotated; selector " + q.recompute.selector +
                             " recomputed " + std::to_string(a.pic.recompute_set) +
                             " tokens with the sections "
                             "before them in context";
    if (a.recomputed_units > 0)
        out.assembly += "; " + std::to_string(a.recomputed_units) +
                        " section(s) had no usable stored state and were computed first";
    auto& stats = out.stats;
    stats = answer_stats_json(ans);
    stats["units"] = out.units;
    stats["units_left_out"] = out.units_left_out;
    auto used = nlohmann::json::array();
    for (const auto& c : a.chosen) {
        nlohmann::json u{{"document_id", c.document_id}, {"unit", c.unit}, {"tokens", c.tokens}};
        if (c.rank > 0) {
            u["rank"] = c.rank;
            u["fused"] = c.fused;
        }
        if (c.bm25)
            u["bm25"] = *c.bm25;
        if (c.sekv)
            u["sekv"] = *c.sekv;
        used.push_back(u);
    }
    stats["units_used"] = used;
    if (!out.ranking.empty()) {
        stats["ranking"] = out.ranking;
        stats["ranking_query_tokens"] = a.ranking_tokens;
    }
    stats["units_recomputed"] = out.units_recomputed;
    stats["tokens_recomputed"] = out.tokens_recomputed;
    stats["history_turns"] = out.history_turns;
    stats["assembly_ms"] = out.assembly_ms;
    if (q.recompute.selector != "none") {
        auto kind = [](const LayerKindCount& k) {
            return nlohmann::json{{"layers", k.layers},
                                  {"rows_recomputed", k.rows_recomputed},
                                  {"rows_reused", k.rows_reused}};
        };
        stats["selector"] = q.recompute.selector;
        stats["recompute_set"] = a.pic.recompute_set;
        stats["layer_rows"] = {{"global", kind(a.pic.global)},
                               {"sliding", kind(a.pic.sliding)},
                               {"recurrent", kind(a.pic.recurrent)}};
    }
    if (model.info().hybrid()) {
        stats["state_init"] = state_initialiser_name(q.recompute.state_init);
        stats["state_init_ms"] = a.pic.init_ms;
        int recurrent_layers = 0;
        for (const auto& l : model.info().layers)
            recurrent_layers += l.recurrent();
        stats["recurrent_layers"] = recurrent_layers;
    }
    stats["assembly"] = out.assembly;
    std::vector<uint8_t> trace;
    if (!ans.zoom.empty() || !a.sources.empty()) {
        // Disk tier of each SEKV layer: its rows in the chunk states (f16) and its structures.
        const auto& info = model.info();
        const int64_t row_f16 = 2 * int64_t{2} * info.n_head_kv * info.head_dim;
        for (auto& l : stats["memory_per_layer"])
            for (const auto& b : a.structure_bytes)
                if (l["layer"] == b.layer)
                    l["disk_tier_bytes"] = a.offset * row_f16 + b.fast + b.host;
        stats["sekv_states_built"] = a.sekv_built;
        StoredZoomTrace t;
        t.trace = ans.zoom;
        t.trace.n_spans = static_cast<int>(a.spans);
        t.sources = a.sources;
        t.tokens = ans.tokens;
        t.tokens.resize(t.trace.steps.size());
        for (const auto id : t.tokens)
            t.token_texts.push_back(model.tokenizer().token_bytes(id));
        trace = encode_zoom_trace(t);
    }
    nlohmann::json msg = stats;
    msg["documents"] = out.documents;
    msg["stop_reason"] = ans.stop_reason;
    out.message_id = project.add_message(out.chat_id, "assistant", ans.text, dump(msg), trace);
    return out;
}

} // namespace spanscope
