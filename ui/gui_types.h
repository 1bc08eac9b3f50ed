// Values the desktop application's workers and views pass between threads (queued signals):
// document rows, chats, messages, answer statistics and generation settings.
#pragma once

#include "answering/policy_settings.h"
#include "ui/answer_citations.h"

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace spanscope::gui {

/// One row of the document list. `key` identifies a row before the document has an id (the
/// absolute path of the file being read).
struct DocumentRow {
    enum class Status {
        Queued,
        Extracting,
        Prefilling,
        Ready,
        Partial,     ///< some chunks stored (an ingest was interrupted or cancelled, or an
                     ///< answer computed only the sections it chose)
        Unprefilled, ///< stored, not yet prefilled for the model now loaded
        NoModel,     ///< in the project; no model is loaded, so nothing can be said of its states
        Cancelled,   ///< never read: the ingest was cancelled before this file
        Failed
    };
    QString key;
    qint64 id = 0; ///< 0 until the document is in the project
    QString path, name;
    Status status = Status::Queued;
    qint64 tokens = 0;
    qint64 chunks = 0, chunks_stored = 0;
    double tokens_per_s = 0;
    double seconds_left = 0;
    int ocr_page = 0, ocr_page_count = 0; ///< Extracting: the page OCR reads (1-based) of how many
    QString error;                        ///< Failed: why, in words
    QStringList warnings;   ///< from the loader (encoding converted, pages without text)
    bool in_context = true; ///< checked in the list: questions are asked about it
};

/// Words for a row's status: "ready", "prefilling 3/12 chunks", "failed: …".
QString status_text(const DocumentRow& row);

struct ChatRow {
    qint64 id = 0;
    QString title;
    qint64 messages = 0;
};

struct MessageRow {
    qint64 id = 0; ///< 0 while it streams
    bool from_user = false;
    QString text;
    QString details; ///< assistant: one line of statistics, or why there is no answer
    bool streaming = false;
    bool sekv = false;        ///< assistant: answered with the sekv policy (it has a zoom trace)
    qint64 full_kv_bytes = 0; ///< sekv: what full would hold for the SEKV layers (bytes)
    /// Where each generated token starts in the shown (trimmed) text, and where the last ends
    /// ([tokens + 1]; empty until its zoom trace is loaded). A token outside the shown text
    /// (a trimmed newline) has an empty range.
    QList<int> token_starts = {};
    int selected_token = -1; ///< the token whose zoom is shown, -1: none
    /// A note line of the chat view, no message of the project: where the chat's history
    /// started afresh under another model (history_note_text). `text` holds it.
    bool note = false;
    /// assistant: the model the answer records (its identity and file name; empty when none
    /// is recorded: answering/chat_history.h, AnswerModel).
    QString model_id = {}, model_shown = {};
    /// assistant: its sources, top first (the chat's "Sources" block; answer_citations.h).
    QList<Citation> citations = {};
    /// assistant: each answer token's own sources ([tokens][top first]; empty when none were
    /// saved), shown in place of the answer's while that token is selected.
    QList<QList<Citation>> token_citations = {};
    int selected_citation = -1; ///< the citation shown in the document view, -1: none
};

/// The citations a message's Sources block shows: those of its selected token when it has
/// some (token_citations), else the answer's.
const QList<Citation>& shown_citations(const MessageRow& m);
/// True when shown_citations(m) are the selected token's own.
bool shows_token_citations(const MessageRow& m);

/// The chat view's note where a chat continued under another model starts its history afresh
/// (answering/chat_history.h): "Continued with AFTER: none of the turns above is sent to it as
/// history (the last were answered by BEFORE)." (model file names).
QString history_note_text(const QString& before, const QString& after);

/// The statistics of one answer, for the status bar and the chat.
struct AnswerStats {
    qint64 chat_id = 0;
    QString text;
    QString stop_reason; ///< Answer::stop_reason (engine/session/session.h): "eog", "max_tokens", …
    double ttft_ms = 0;
    double decode_tokens_per_s = 0;
    double prefill_tokens_per_s = 0;
    qint64 tokens_reused = 0, tokens_computed = 0, generated_tokens = 0;
    qint64 kv_bytes = 0;       ///< key/value memory of the answer (bytes)
    qint64 peak_rss_bytes = 0; ///< of the process so far
    QStringList notes;
    qint64 message_id = 0; ///< the answer's message in the project (0: not saved)
    QString policy;        ///< memory policy of the global layers: "full" or "sekv" ("": unknown)
    // sekv only: the router that answered, the SEKV layers' memory and zoom.
    QString router;                ///< "trained" or "training-free" ("": unknown, or not sekv)
    int rerank = 0;                ///< two-stage routing's candidates per expanded span; 0: off
    double fast_tier_fraction = 0; ///< fast-tier bytes / what full would hold for the layers
    double cache_fraction = 0;     ///< whole cache, both tiers / full (whole_cache_fraction)
    QList<int> sekv_layers;        ///< the layers SEKV served (0-based), ascending
    double expansions = 0;         ///< spans expanded per generated token, per layer and head
    qint64 spans = 0;              ///< spans in the answer's context
    qint64 full_kv_bytes = 0;      ///< what full would hold for the SEKV layers
    // LinearKV (a selector other than none joined the documents): what it recomputed.
    QString selector;         ///< "epic", "full"; empty: none (rows reused as stored)
    qint64 recompute_set = 0; ///< tokens recomputed through every layer
    struct LayerRows {
        int layers = 0;
        qint64 recomputed = 0, reused = 0; ///< key/value rows, summed over the layers
    };
    LayerRows global_rows, sliding_rows; ///< attention layers without and with a window
    // The documents' sections the answer used (all of them unless they exceeded the context:
    // then the best ranked that fit, in context order).
    struct Section {
        qint64 document_id = 0;
        int unit = 0; ///< 0-based section of the document
        qint64 tokens = 0;
    };
    QList<Section> sections_used;
    int sections_left_out = 0;
    QString ranking;           ///< how they were ranked ("bm25", "bm25+sekv"); empty: all fitted
    QString state_init;        ///< hybrid models: the recurrent layers' initialiser; empty: none
    QList<Citation> citations; ///< the answer's sources, top first (ProjectAnswer::sources)
    QList<QList<Citation>> token_citations; ///< each token's own (ProjectAnswer::token_sources)
};

/// "first token 863 ms · 31 tokens/s · 2 048 reused / 14 computed", then the policy: " · sekv:
/// fast tier 31 % of full, 4.2 spans expanded per token, trained router" (the router when
/// known; ", two-stage routing (4 candidates per expanded span)" after it when the answer used
/// it) or " · full memory", then with a selector " · epic recomputed 212 tokens (global layers 3 %
/// of rows, sliding 4 %)", and when sections were left out " · 2 of 8 sections used (bm25)", and
/// for a hybrid model " · recurrent state: single-block".
QString stats_text(const AnswerStats& s);
/// Why an answer ended, after its statistics, where the user would not see it from the text:
/// " · stopped" (the user stopped it), " · cut at the longest answer, N tokens"
/// (max_tokens), " · the context window is full" (context_full); empty for the model's own end
/// (eog) and anything else.
QString stop_reason_text(const QString& stop_reason, qint64 generated_tokens);

struct GenerationSettings {
    int max_tokens = 128;
    double temperature = 0; ///< 0: greedy
    int top_k = 40;
    double top_p = 0.95;
    quint64 seed = 0;
};

/// The memory policy answers use (docs/architecture.md, Memory, §3.4), as chosen in Settings.
/// The defaults are the answering service's (spanscope::PolicySettings: sekv, docs/sekv.md).
struct MemorySettings {
    /// "full" or "sekv" (global-attention layers)
    QString policy = QString::fromStdString(spanscope::PolicySettings{}.policy);
    /// sekv: fast-tier bytes as a fraction of what full holds
    double budget = spanscope::PolicySettings{}.budget;
    /// sekv: target fraction of spans a query zooms into
    double expand_rate = spanscope::PolicySettings{}.expand_rate;
    /// sekv: τ calibrated on each query's own relevances, so that every query head zooms into
    /// expand_rate of the spans (SekvRouterOptions::tau_per_query), instead of once on the
    /// question's queries.
    bool tau_per_query = spanscope::PolicySettings{}.tau_per_query;
    /// sekv: the router, "trained" (learned for the model, from a parameter file),
    /// "training-free", or "" (trained when a parameter file for
    /// the model is installed, else training-free; answering/router_choice.h).
    QString router;
    /// Two-stage routing's candidates per expanded span (SekvRouterOptions::rerank, 2 to
    /// kMaxRerank); 0: off (one stage). Kept as chosen; it applies only where
    /// rerank_in_effect says so.
    int rerank = spanscope::PolicySettings{}.rerank;
    /// sekv, not training-free: the router's parameter file ("": the installed one).
    QString router_params_file;
    bool sekv() const { return policy == QLatin1String("sekv"); }
    /// Whether the router takes a parameter file: every router but the training-free one.
    bool takes_router_params_file() const;
    /// The parameter file in effect: router_params_file where the router takes one, else none.
    QString router_params_file_in_effect() const;
    /// Whether two-stage routing applies on `backend` ("cpu" or "cuda"; the answering
    /// service's rule, answering/policy_settings.h two_stage_routing_applies).
    bool two_stage_applies(const QString& backend) const;
    /// The N of two-stage routing the engine is asked for on `backend`: rerank where it
    /// applies, else 0.
    int rerank_in_effect(const QString& backend) const {
        return two_stage_applies(backend) ? rerank : 0;
    }
    /// These settings as the answering service takes them (answering/policy_settings.h) on
    /// `backend`: under full the policy and budget only (Settings keeps SEKV's, greyed out);
    /// under sekv, two-stage routing only where it applies and the parameter file in effect.
    spanscope::PolicySettings policy_settings(const QString& backend) const;
    /// What the documents' SEKV states depend on ("" for full): spans shown under one key are
    /// those answers under the same key use (the router's rank gates shape them too).
    QString spans_key() const;
    bool operator==(const MemorySettings&) const = default;
};

/// How documents after the first are joined in context (LinearKV, docs/linearkv.md;
/// pic_assembly.h), as chosen in Settings.
struct ReuseSettings {
    /// "none": every document's cached rows as stored (keys moved to their new positions);
    /// "epic": the first tokens of each later document recomputed; "full": everything
    /// recomputed (a cold prefill). epic and full need the full memory policy.
    QString selector = QStringLiteral("none");
    double recompute = 0.15; ///< epic: the share of the context's tokens recomputed, (0, 1]
    /// Hybrid models: the state their recurrent layers start from after the documents
    /// ("single-block": the last document's; "exact": every document's composed; "zero").
    QString state_init = QStringLiteral("single-block");
    bool operator==(const ReuseSettings&) const = default;
};

/// Progress of an ingest over all files being added.
struct IngestStatus {
    int file = 0, files = 0; ///< file being read (0-based) of those added together
    QString name;
    qint64 chunk = 0, chunks = 0;
    qint64 tokens_done = 0, tokens_to_do = 0;
    double tokens_per_s = 0, seconds_left = 0;
    /// While a scanned PDF is read: the page OCR reads (1-based) of how many (0: not reading).
    int ocr_page = 0, ocr_page_count = 0;
};

/// `value` in the user's locale with at most `decimals` decimals and no trailing zeros
/// ("0.625", "20").
QString trimmed_number(double value, int decimals);

/// "1 token", "2 048 tokens": a count and the noun in the number it takes (English).
QString count_text(qint64 n, const QString& one, const QString& many);

/// Register the types above for queued connections (once, before the workers start).
void register_gui_types();

} // namespace spanscope::gui

Q_DECLARE_METATYPE(spanscope::gui::DocumentRow)
Q_DECLARE_METATYPE(spanscope::gui::ChatRow)
Q_DECLARE_METATYPE(spanscope::gui::MessageRow)
Q_DECLARE_METATYPE(spanscope::gui::AnswerStats)
Q_DECLARE_METATYPE(spanscope::gui::GenerationSettings)
Q_DECLARE_METATYPE(spanscope::gui::MemorySettings)
Q_DECLARE_METATYPE(spanscope::gui::ReuseSettings)
Q_DECLARE_METATYPE(spanscope::gui::IngestStatus)
