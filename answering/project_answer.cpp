#include "answering/project_answer.h"

#include <algorithm>

#include "answering/context_assembly.h"
#include "engine/text/prompt.h"
#include "engine/text/text_input.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>

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

// Record in an answer's statistics the model that gave it (chat_history.h, answer_model).
void record_model(nlohmann::json& stats, const Model& model, const StateCache& cache) {
    const std::string file = std::filesystem::path(model.path()).filename().string();
    stats["model_id"] = cache.model_id();
    stats["model_file"] = file;
    stats["model_name"] = model.info().name.empty() ? file : model.info().name;
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
    j["cache_fraction"] = whole_cache_fraction(s); // every layer, both tiers
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
    if (!a.units_used.empty())
        s += ": " + sections_text(a.units_used,
                                  [](int64_t id) { return "document " + std::to_string(id); });
    return s;
}

namespace {

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

namespace {

// The refusals that need neither a document nor the question's tokens.
void check_question(Project& project, const SessionOptions& options, const ProjectQuestion& q) {
    if (q.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::invalid_argument("the question is empty");
    if (!is_valid_utf8(q.question))
        throw std::invalid_argument("the question is not valid UTF-8");
    if (q.chat_id > 0 && !project.has_chat(q.chat_id))
        throw std::invalid_argument(project.path() + " has no chat " + std::to_string(q.chat_id));
    if (options.global_policy != "full" && options.global_policy != "sekv")
        throw std::invalid_argument(
            "a project answers with the full or sekv policy; '" + options.global_policy +
            "' selects its rows from a prefill of the text (its attention statistics are not "
            "stored): ask with --doc instead");
    if (const auto problem = project_selector_problem(q.recompute.selector); !problem.empty())
        throw std::invalid_argument(problem);
    if (q.recompute.selector != "none" && options.global_policy != "full")
        throw std::invalid_argument("the " + q.recompute.selector +
                                    " selector recomputes rows of the full policy; ask with "
                                    "--policy full (SEKV joins sections without recompute)");
}

// The documents to answer from: the given ones, else those of the chat being continued, else
// all; duplicates dropped, each checked.
std::vector<int64_t> documents_to_answer_from(Project& project, const ProjectQuestion& q,
                                              const ChatContext& chat) {
    std::vector<int64_t> ids;
    std::set<int64_t> seen;
    for (const auto id : q.document_ids.empty() ? chat.documents : q.document_ids)
        if (seen.insert(id).second)
            ids.push_back(id);
    if (ids.empty())
        for (const auto& d : project.documents())
            ids.push_back(d.id);
    if (ids.empty())
        throw std::invalid_argument(project.path() + " has no documents to answer from");
    for (const auto id : ids)
        if (!project.document(id))
            throw std::invalid_argument(project.path() + " has no document " + std::to_string(id));
    return ids;
}

// The refusals that need the question's tokens and the model, before the question is saved.
void check_room(const Model& model, const std::vector<int32_t>& question,
                const ProjectQuestion& q) {
    const auto& info = model.info();
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
}

// Whether SEKV served the answer: it routed, or its sections' spans are in the context.
bool sekv_served(const Answer& ans, const ContextAssembly& a) {
    return !ans.zoom.empty() || !a.sources.empty();
}

// How the sections were put together, in words (ProjectAnswer::assembly).
std::string assembly_text(const ContextAssembly& a, const ProjectQuestion& q) {
    std::string text =
        a.chosen.size() <= 1 ? "exact: one section at its own positions"
        : q.recompute.selector == "none"
            ? "position-independent: each section's cached keys re-rotated to its new "
              "position, nothing recomputed across sections"
            : "position-independent, keys re-rotated; selector " + q.recompute.selector +
                  " recomputed " + std::to_string(a.pic.recompute_set) +
                  " tokens with the sections "
                  "before them in context";
    if (a.recomputed_units > 0)
        text += "; " + std::to_string(a.recomputed_units) +
                " section(s) had no usable stored state and were computed first";
    return text;
}

// The statistics saved with the answer (ProjectAnswer::stats).
nlohmann::json answer_record(const ProjectAnswer& out, const ContextAssembly& a,
                             const ProjectQuestion& q, const Model& model) {
    nlohmann::json stats = answer_stats_json(out.answer);
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
    stats["history_left_out"] = out.history_left_out;
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
    if (sekv_served(out.answer, a)) {
        // Disk tier of each SEKV layer: its rows in the chunk states (f16) and its structures.
        const auto& info = model.info();
        const int64_t row_f16 = 2 * int64_t{2} * info.n_head_kv * info.head_dim;
        for (auto& l : stats["memory_per_layer"])
            for (const auto& b : a.structure_bytes)
                if (l["layer"] == b.layer)
                    l["disk_tier_bytes"] = a.offset * row_f16 + b.fast + b.host;
        stats["sekv_states_built"] = a.sekv_built;
    }
    return stats;
}

// The zoom trace saved with the answer (storage/zoom_trace_blob.h); empty without SEKV.
// `masses_cleared`: the heads whose attention masses were not shares and were left out, so that
// the answer is saved whatever its masses (clear_invalid_masses).
std::vector<uint8_t> zoom_trace_of(const Answer& ans, const ContextAssembly& a, const Model& model,
                                   int& masses_cleared) {
    masses_cleared = 0;
    if (!sekv_served(ans, a))
        return {};
    StoredZoomTrace t;
    t.trace = ans.zoom;
    masses_cleared = clear_invalid_masses(t.trace);
    t.trace.n_spans = static_cast<int>(a.spans);
    t.sources = a.sources;
    t.tokens = ans.tokens;
    t.tokens.resize(t.trace.steps.size());
    for (const auto id : t.tokens)
        t.token_texts.push_back(model.tokenizer().token_bytes(id));
    return encode_zoom_trace(t);
}

// Streams each generated token's zoom step to ProjectAskHooks::on_zoom while the session
// generates (engine/session/session.cpp, Session::generate). The session records a token's
// step right after sampling it, from the SEKV layers' last routing (that of the forward pass
// the token was sampled from), and tells no one; what it does tell is the logits before each
// sample (on_logits) and the token's text after it (on_text). So the step is read from the
// same layers at on_logits, exactly as the session will record it, and handed on once the
// token is known to be part of the answer:
// - at its text piece: inside the loop a piece always follows an answer token; after the loop
//   only the streamer's flush comes (Utf8Streamer::flush: nothing, or U+FFFD for the bytes of
//   an unfinished character), so a lone U+FFFD cannot tell the two apart and waits;
// - at the next on_logits (the loop went on, so the token was kept);
// - when generation ended, from the answer's own trace (its last steps, which are exact).
// A step read for a token that then ends the answer (end of generation) is never handed on.
class ZoomStream {
public:
    using Hook = decltype(ProjectAskHooks::on_zoom);

    ZoomStream(const Session& session, const Hook& hook, const std::vector<ZoomSource>& sources)
        : session_(session), hook_(hook), sources_(sources) {}

    bool routes() const { return !session_.memory().sealing_layers().empty(); }

    // The session is about to sample the next token from the last forward pass.
    void before_sample() {
        hand_on(); // a step still waiting: its token was kept, the loop went on
        pending_ = session_.zoom_step();
        has_pending_ = true;
    }

    // A text piece came, before on_text hands it on.
    void before_text(const std::string& piece) {
        constexpr std::string_view kReplacement = "\xef\xbf\xbd";
        if (piece != kReplacement)
            hand_on();
    }

    // Generation ended: the steps not handed on yet, from the answer's trace.
    void finish(const ZoomTrace& trace) {
        has_pending_ = false;
        for (size_t i = static_cast<size_t>(handed_); i < trace.steps.size(); ++i)
            hook_(handed_++, trace.steps[i], sources_);
    }

private:
    void hand_on() {
        if (!has_pending_)
            return;
        has_pending_ = false;
        hook_(handed_++, pending_, sources_);
    }

    const Session& session_;
    const Hook& hook_;
    const std::vector<ZoomSource>& sources_;
    ZoomStep pending_;
    bool has_pending_ = false;
    int handed_ = 0; ///< steps handed on: the index of the next
};

// The session's answer after the assembled context, with on_zoom fed when it is set.
Answer answer_streaming_zoom(Session& session, const std::vector<int32_t>& question,
                             ChatFormat format, const ProjectQuestion& q,
                             const ProjectAskHooks& hooks, const std::vector<ZoomSource>& sources,
                             const std::atomic<bool>* cancel) {
    if (!hooks.on_zoom)
        return session.answer_after_context(question, format, q.max_tokens, q.sampling,
                                            hooks.on_text, cancel);
    ZoomStream zoom(session, hooks.on_zoom, sources);
    if (!zoom.routes())
        return session.answer_after_context(question, format, q.max_tokens, q.sampling,
                                            hooks.on_text, cancel);
    auto ans = session.answer_after_context(
        question, format, q.max_tokens, q.sampling,
        [&](const std::string& piece) {
            zoom.before_text(piece);
            if (hooks.on_text)
                hooks.on_text(piece);
        },
        cancel, [&](const std::vector<float>&) { zoom.before_sample(); });
    zoom.finish(ans.zoom);
    return ans;
}

} // namespace

ProjectAnswer ask_project(Project& project, const Model& model, StateCache& cache, Session& scratch,
                          const SessionOptions& session_options, const ProjectQuestion& q,
                          const ProjectAskHooks& hooks, const std::atomic<bool>* cancel) {
    check_question(project, session_options, q);
    const auto& info = model.info();
    const auto t0 = Clock::now();
    const int64_t computed_before = scratch.tokens_processed();
    ChatContext chat =
        q.chat_id > 0 ? chat_context(project, q.chat_id, cache.model_id()) : ChatContext{};
    const auto ids = documents_to_answer_from(project, q, chat);
    // Turns about other documents are not sent: their answers would answer this question.
    const size_t turns_cut = keep_history_of(chat, ids);
    const ChatFormat format = chat_format_of(info, model.tokenizer());
    const auto question = question_tokens(model.tokenizer(), format, q.question, chat.history);
    check_room(model, question, q);

    // The question is kept whatever happens next.
    ProjectAnswer out;
    out.chat_id = q.chat_id > 0 ? q.chat_id : project.create_chat(utf8_prefix(q.question, 80));
    project.add_message(out.chat_id, "user", q.question);
    if (hooks.on_question_saved)
        hooks.on_question_saved(out.chat_id, chat);
    out.history_turns = chat.history.size();
    out.history_left_out = chat.turns_left_out;
    // Said where the documents changed (the last turn was about others), not at every later
    // question of the chat.
    if (turns_cut > 0 && chat.history.empty()) {
        std::string note = "the documents asked about changed: ";
        note += std::to_string(turns_cut);
        note +=
            turns_cut == 1 ? " earlier turn of this chat is" : " earlier turns of this chat are";
        note += " not sent as history, so that answers about other documents do not answer for "
                "these";
        out.notes.push_back(std::move(note));
        if (hooks.on_note)
            hooks.on_note(out.notes.back());
    }
    ContextAssembly a;
    try {
        Session session(model, session_options);
        if (q.recompute.selector != "none")
            session.memory() = make_assembled_memory(model.info(), session.n_ctx());
        a = assemble_context(project, model, cache, scratch, session, ids, question, q, hooks,
                             cancel, out.notes);
        out.assembly_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        // Where each answer token looks, over the documents' passages (not on the GPU backend,
        // whose memories do not report attention mass).
        if (q.sources && !a.passages.empty() && session.reports_sources())
            session.set_source_ranges(passage_ranges(a.passages));
        out.answer = answer_streaming_zoom(session, question, format, q, hooks, a.sources, cancel);
    } catch (const std::exception& e) {
        // Record why there is no answer; the question stays in the chat.
        const bool cancelled = dynamic_cast<const Cancelled*>(&e) != nullptr;
        nlohmann::json j{{"stop_reason", cancelled ? "stopped" : "error"}};
        if (!cancelled)
            j["error"] = e.what();
        record_model(j, model, cache);
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
    ans.stats.ttft_ms += out.assembly_ms + q.compute_ms_before;
    // The rate over every prompt token computed for this answer and the time computing them
    // took, not the question's alone (rows restored from storage are not computed).
    ans.stats.prefill_ms += a.compute_ms + q.compute_ms_before;
    if (ans.stats.prefill_ms > 0)
        ans.stats.prefill_tokens_per_s =
            static_cast<double>(ans.stats.tokens_computed) / (ans.stats.prefill_ms / 1000.0);
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
    out.assembly = assembly_text(a, q);
    out.stats = answer_record(out, a, q, model);
    int masses_cleared = 0;
    auto trace = zoom_trace_of(ans, a, model, masses_cleared);
    nlohmann::json msg = out.stats;
    msg["documents"] = out.documents;
    // What the answer was asked about, in the user's order: a continued chat answers from
    // these, ranked again, not only from the sections this answer's ranking kept.
    msg["documents_asked"] = ids;
    msg["stop_reason"] = ans.stop_reason;
    record_model(msg, model, cache);
    if (masses_cleared > 0) {
        msg["zoom_masses_cleared"] = masses_cleared;
        if (hooks.on_note)
            hooks.on_note("the zoom trace of this answer is saved without the attention masses "
                          "of " +
                          std::to_string(masses_cleared) +
                          " query heads' steps: they were not shares in [0, 1]");
    }
    if (!ans.source_mass.empty()) {
        std::map<int64_t, std::vector<SourceAnchor>> maps;
        const auto text_of = [&a](int64_t id) -> const std::string& { return a.texts.at(id); };
        const auto offset_map_of = [&](int64_t id) -> const std::vector<SourceAnchor>& {
            auto it = maps.find(id);
            if (it == maps.end())
                it = maps.emplace(id, project.document_offset_map(id)).first;
            return it->second;
        };
        out.sources = top_sources(a.passages, passage_shares(ans.source_mass, a.passages.size()),
                                  kAnswerSources, text_of, offset_map_of);
        // A word's own sources are shown where a word can be selected: answers with a zoom
        // trace (sekv).
        if (!ans.zoom.empty())
            out.token_sources =
                token_sources(a.passages, ans.source_mass, kTokenSources, text_of, offset_map_of);
    } else if (q.sources && !a.passages.empty() && !ans.tokens.empty()) {
        msg["sources_not_measured"] = "the memory of the " + session_options.global_policy +
                                      " policy on this backend does not report attention mass";
    }
    out.message_id = project.add_message(out.chat_id, "assistant", ans.text, dump(msg),
                                         std::move(trace), out.sources, out.token_sources);
    return out;
}

} // namespace spanscope
