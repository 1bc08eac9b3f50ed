// Answering a question from a project's documents: choose the units that fit, restore their
// stored chunk states (computing the missing ones), prefill the question with the chat's
// history and generate; the exchange is saved in the project's chats (docs/linearkv.md, §4).
// Shared by spanscope-cli (ask --project) and the desktop application.
#pragma once

#include "answering/answer_sources.h"
#include "answering/chat_history.h"
#include "answering/state_cache.h"
#include "answering/unit_choice.h"
#include "engine/linearkv/pic_assembly.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/sampler.h"
#include "storage/project.h"
#include "storage/zoom_trace_blob.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spanscope {

struct ProjectQuestion {
    std::string question;               ///< UTF-8, not blank
    std::vector<int64_t> document_ids;  ///< in the order the context holds them (duplicates
                                        ///< dropped); empty: the documents the chat's last
                                        ///< answer was asked about, in that order (all of them,
                                        ///< ranked again), else every document in project order
                                        ///< (ascending ids)
    int64_t chat_id = 0;                ///< 0: a new chat titled by the question
    std::vector<int64_t> computed_now;  ///< documents whose states the caller just computed:
                                        ///< their tokens count as computed, not reused
    int64_t tokens_computed_before = 0; ///< tokens the caller computed for this answer (its
                                        ///< ingest of computed_now), added to tokens_computed
    double compute_ms_before = 0; ///< the wall time they took (ms), added to prefill_ms and to
                                  ///< ttft_ms (the answer waited for them)
    int max_tokens = 128;
    SamplingParams sampling;
    /// How sections after the first are joined (LinearKV, pic_assembly.h): "none" keeps their
    /// cached rows as they are; "epic" and "full" recompute some or all of their tokens with the
    /// sections before them in context (the global policy must then be full). "cacheblend"
    /// needs sliding-window rows the store does not keep and is refused.
    RecomputeOptions recompute;
    /// Measure where the answer's tokens looked and keep its sources (ProjectAnswer::sources);
    /// false only to measure what that costs (the benchmark of sources).
    bool sources = true;
};

struct ProjectAnswer {
    Answer answer; ///< stats.tokens_reused: rows restored from the store; stats.tokens_computed:
                   ///< every prompt token run through the model (recomputed units included)
    int64_t chat_id = 0;
    int64_t message_id = 0;         ///< the answer's message (its zoom trace is kept with it)
    std::vector<int64_t> documents; ///< documents the answer was built from, in the order used
    int units = 0, units_left_out = 0, units_recomputed = 0;
    /// The sections in the context, in the order assembled (the user's documents in their
    /// order, units in text order), with their rank scores when not all fit (unit_choice.h).
    std::vector<ChosenUnit> units_used;
    /// How the sections were ranked when not all fit: "bm25", "bm25+sekv (reciprocal rank
    /// fusion, k = 60)", "sekv (...)" (no word matched), or "none: ..." (no word matched and no
    /// SEKV summaries stored: the first that fit); empty when all fit.
    std::string ranking;
    int64_t tokens_recomputed = 0; ///< tokens of units whose state was computed for this answer
    /// Earlier exchanges of the chat sent with the question, and those not sent: answered by
    /// another model, or about other documents (chat_history.h).
    size_t history_turns = 0, history_left_out = 0;
    double assembly_ms = 0;  ///< choosing, restoring (and recomputing) the units, ms
    std::string assembly;    ///< how the units were put together, in words
    AssemblyStats recompute; ///< the selector's recompute pass (zero for none)
    /// The statistics as saved with the answer's message: answer_stats_json's, the counts
    /// above, "units_used" [{document_id, unit (0-based), tokens, and when ranked rank, fused,
    /// bm25, sekv}], "ranking" and "ranking_query_tokens" (BOS + question forwarded once for its
    /// SEKV queries; not in tokens_computed, which counts prompt tokens; its time is in
    /// assembly_ms) when not all sections fit.
    nlohmann::json stats;
    std::vector<std::string> notes; ///< things the user should know (sections left out)
    /// The passages the answer's tokens attended to most (answer_sources.h), top first, at
    /// most kAnswerSources; saved with the message. Empty when nothing was generated or the
    /// backend does not report attention mass (the message's statistics then say
    /// "sources_not_measured").
    std::vector<SourceRecord> sources;
    /// Each answer token's own top sources (at most kTokenSources, [tokens][top first], excerpts
    /// of at most 120 bytes), saved with the message; only for answers with a zoom trace (sekv:
    /// a word of the answer can be selected in the window), empty otherwise.
    std::vector<std::vector<SourceRecord>> token_sources;
};

/// How many sources an answer keeps, and each of its tokens.
inline constexpr size_t kAnswerSources = 5;
inline constexpr size_t kTokenSources = 3;

struct ProjectAskHooks {
    std::function<void(const std::string&)> on_text;               ///< each answer piece
    std::function<void(const IngestProgress&)> on_ingest_progress; ///< recomputing a unit
    std::function<void(const std::string&)> on_note;               ///< as notes are found
    /// A note on a wait about to begin (sections computed before the answer: how many, how
    /// many tokens), over once the answer starts; unset, it goes to on_note.
    std::function<void(const std::string&)> on_wait;
    /// Once the question is saved: the chat id, and the chat's history as the question sends
    /// it (ChatContext::restarted: the chat's last answer came from another model, so the
    /// history starts afresh here).
    std::function<void(int64_t chat_id, const ChatContext& chat)> on_question_saved;
    /// Each generated token's zoom while the answer streams (called under a policy whose memory
    /// seals spans: sekv, with its SEKV layers' routing, or chunk_summary, whose steps have no
    /// layers; never under full and the other policies; unset, nothing is read or copied for
    /// it). `token`: the token's index among
    /// the answer's tokens, 0, 1, … each once and in order; `step`: the routing of the forward
    /// pass the token was sampled from, per SEKV layer and query head, with the layers' memory
    /// then (the step the zoom trace saved with the answer holds at that index; ZoomHead::mass
    /// may be empty); `sources`: where the context's span ids come from (the same for every
    /// token of an answer; ids [0, Σ n_spans)). Called on the answering thread as soon as the
    /// token is known to be part of the answer: with its text, just before on_text receives
    /// it; a token without a text piece of its own (a byte of a longer character) before the
    /// next token is sampled, or, for the last, as generation ends (before the answer is
    /// saved). A token that ends the answer (end of generation) is none of the answer's and
    /// gets no call.
    std::function<void(int token, const ZoomStep& step, const std::vector<ZoomSource>& sources)>
        on_zoom;
};

/// The selectors a project answers with: recompute_selectors() (pic_assembly.h) less
/// "cacheblend", whose check layer needs every row of the sliding-window layers, where a project
/// stores only their last window. In that order: none, epic, full.
std::vector<std::string> project_selectors();
/// Empty when a project answers with `selector`; otherwise why not, in words ("cacheblend is not
/// offered with a project: …", "'abc' is not one of none, epic or full").
std::string project_selector_problem(const std::string& selector);

/// Answer `q` from the project. `scratch` computes missing unit states. When the documents'
/// sections do not all fit the model's context (n_ctx_train less the question's tokens and
/// max_tokens), they are ranked against the question (full-text bm25 over the project's index;
/// choose_units) and the best that fit are assembled, in the order of the documents.
/// A continued chat sends its earlier exchanges as history, those since the last answer another
/// model gave (chat_context) and since the last asked about other documents (keep_history_of;
/// where the documents changed at this question, a note says so). The question is saved first; the
/// answer (also a stopped one, with what was generated) is saved with its statistics and the model
/// that gave it (answer_model's fields). Cancel set before the answer starts throws Cancelled, and
/// a failure throws as below; either way an empty answer is saved that records it (and the model).
/// Throws std::invalid_argument (blank or non-UTF-8 question, unknown chat or document, a
/// global policy other than full and sekv: the baselines select rows during a prefill, a
/// selector not in project_selectors()),
/// ContextOverflow (no section fits with the question), Cancelled, ProjectError.
ProjectAnswer ask_project(Project& project, const Model& model, StateCache& cache, Session& scratch,
                          const SessionOptions& session_options, const ProjectQuestion& q,
                          const ProjectAskHooks& hooks = {},
                          const std::atomic<bool>* cancel = nullptr);

/// The sections an answer used, in words: "3 of 7 sections used: document 1 (sections 1, 3),
/// document 2 (section 2)" (sections 1-based as shown to users; units_used holds 0-based).
std::string units_used_text(const ProjectAnswer& answer);

/// The statistics of an answer (the fields of `ask --json`'s "stats"): token counts, ms,
/// tokens/s, bytes; "policy"; under sekv "router" ("trained" or "training-free") and, with
/// two-stage routing, "rerank" (candidates per expanded span, AnswerStats::rerank); with SEKV
/// layers also "memory" {fast_tier_bytes,
/// host_tier_bytes, full_kv_bytes} summed over them, "fast_tier_fraction", "budget" and
/// "within_budget" (the fraction measured after the answer against the budget), "expansions" (spans
/// expanded per generated token, mean over layers and heads), "spans" and "memory_per_layer".
nlohmann::json answer_stats_json(const Answer& answer);

} // namespace spanscope
