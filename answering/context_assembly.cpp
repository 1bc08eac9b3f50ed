#include "answering/context_assembly.h"

#include "answering/sekv_relevance.h"
#include "answering/unit_choice.h"
#include "engine/text/prompt.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

namespace spanscope {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

} // namespace

ContextAssembly assemble_context(Project& project, const Model& model, StateCache& cache,
                                 Session& scratch, Session& session,
                                 const std::vector<int64_t>& ids,
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
    ContextAssembly a;
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
                    queries = question_queries(
                        model,
                        question_tokens(model.tokenizer(),
                                        chat_format_of(model.info(), model.tokenizer()),
                                        q.question),
                        layers, session.pool(), cancel);
                    a.ranking_tokens = queries->n_tokens + queries->first_pos;
                }
                candidates[ci].sekv = sekv_relevance(*queries, *st, model.info());
                with_sekv += candidates[ci].sekv.has_value();
            }
        // Sections whose bm25 term counts twice (choose_units): a word matched, no summaries.
        const auto doubled =
            std::count_if(candidates.begin(), candidates.end(),
                          [](const UnitCandidate& c) { return c.bm25 && !c.sekv; });
        const std::string partial =
            with_sekv > 0 && doubled > 0
                ? "; " + std::to_string(doubled) + " of " + std::to_string(candidates.size()) +
                      " sections without SEKV summaries count their bm25 rank twice"
                : "";
        a.ranking = with_sekv > 0 && matched > 0
                        ? "bm25+sekv (reciprocal rank fusion, k = 60" + partial + ")"
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
        // The sections by their documents' names, as the document list shows them.
        const auto named = sections_text(a.chosen, [&project](int64_t id) {
            const auto doc = project.document(id);
            return doc ? doc->name : "document " + std::to_string(id);
        });
        notes.push_back("the documents do not fit the context window; answering from " +
                        std::to_string(a.chosen.size()) + " of " + std::to_string(a.candidates) +
                        " sections" +
                        (a.ranking.starts_with("none")
                             ? ", the first that fit (no section contains a word of the question)"
                             : ", those ranked most relevant to the question (" + a.ranking + ")") +
                        ": " + named);
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

    // Sections without stored states are computed first, each alone (ingest_unit); the
    // progress spans them all: tokens done and to do, and the time left, are the answer's.
    int64_t to_compute = 0, computed = 0;
    int sections_to_compute = 0;
    for (const auto& c : a.chosen) {
        const size_t d = doc_index(c.document_id);
        const auto u = static_cast<size_t>(c.unit);
        const int64_t n = cache.tokens_to_compute(docs[d].second[u], chunk_ids[d][u]);
        to_compute += n;
        sections_to_compute += n > 0;
    }
    const auto& tell_wait = hooks.on_wait ? hooks.on_wait : hooks.on_note;
    if (sections_to_compute > 0 && tell_wait)
        // Why the first token waits: said before the wait, not found out after it (a note on
        // the wait, not on the answer: not among `notes`).
        tell_wait(std::to_string(sections_to_compute) + " of the " +
                  std::to_string(a.chosen.size()) + " sections used " +
                  (sections_to_compute == 1 ? "has" : "have") +
                  " no stored states for this model (read with another model, evicted, or "
                  "never finished): computing " +
                  std::to_string(to_compute) + " tokens first");
    std::function<void(const IngestProgress&)> progress;
    if (hooks.on_ingest_progress)
        progress = [&](IngestProgress p) {
            // A stored blob found unusable adds its section's tokens to what was foreseen.
            const int64_t left_here = p.tokens_to_do - p.tokens_done;
            p.tokens_done += computed;
            p.tokens_to_do = std::max(to_compute, p.tokens_done + left_here);
            p.seconds_left =
                p.tokens_per_s > 0 ? (p.tokens_to_do - p.tokens_done) / p.tokens_per_s : 0;
            hooks.on_ingest_progress(p);
        };

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
            // This section alone: those the ranking left out stay uncomputed until one is chosen.
            const auto t = Clock::now();
            computed +=
                cache.ingest_unit(c.document_id, c.unit, scratch, cancel, progress).tokens_computed;
            a.compute_ms += ms_since(t);
            states = cache.load_unit(c.document_id, c.unit);
            recomputed = true;
            ++a.recomputed_units;
        }
        const int64_t rows = cache.restore_unit(states, session, a.offset);
        if (states.recurrent)
            a.unit_states.push_back(states.recurrent->recurrent);
        auto text = a.texts.find(c.document_id);
        if (text == a.texts.end())
            text = a.texts.emplace(c.document_id, project.document_text(c.document_id)).first;
        if (session.memory().sealing_layers().empty())
            append_section_passages(docs[d].second[u], text->second, nullptr, c.document_id,
                                    a.offset, a.passages);
        if (!session.memory().sealing_layers().empty()) {
            bool built = false;
            const auto st = cache.sekv_state(docs[d].second[u], chunk_ids[d][u], states,
                                             session.options().sekv, &built);
            append_section_passages(docs[d].second[u], text->second, &st.segmentation,
                                    c.document_id, a.offset, a.passages);
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
        const auto t = Clock::now();
        a.pic = recompute_documents(model, session.memory(), a.tokens, a.starts, ro, session.pool(),
                                    &recomputed, cancel, &unit_states);
        a.compute_ms += ms_since(t);
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

} // namespace spanscope
