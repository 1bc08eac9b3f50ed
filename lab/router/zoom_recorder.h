// Recording what the frozen model does with full attention on a document, for SEKV's trained
// zoom-in (docs/sekv.md, issue 8; the file: zoom_record.h). The document is prefilled once
// with full attention and its per-token surprisal; it is segmented exactly as SEKV seals it
// (segment_within_budget with SekvOptions' segmentation and reserve_rows at the given budget);
// the queries and outputs of the SEKV layers are taken at candidate positions through a
// RecordingMemory (memory_recording.h), so the model code does not know; the candidates whose
// attention reaches furthest back are kept (zoom_reach below), and for each kept query, SEKV
// layer and query head the recording holds the query, the output and full attention's
// probability mass on each visible span.
#pragma once

#include "engine/model/model.h"
#include "lab/router/zoom_record.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// The form of the recall probes (ZoomRecordSettings::probe_form).
enum class ZoomProbeForm {
    Copy,     ///< the runs copied after the document (zoom_recall_probes)
    Question, ///< question turns answered with the runs (zoom_question_probes.h)
    Fact,     ///< made-up facts in the text, question turns asking for them (zoom_fact_probes.h)
};

/// What decides a recording besides the model and the document.
struct ZoomRecordSettings {
    int64_t max_tokens = 4096;   ///< the document is cut to its first max_tokens tokens (BOS in)
    int queries = 32;            ///< query positions kept per document (fewer if not enough)
    int32_t tail = 64;           ///< a span is visible to query p when its end <= p - tail
    double budget = 0.35;        ///< SEKV's fast-tier budget the segmentation is made for
    int32_t first_query = 512;   ///< candidate positions: first_query, + stride, ... < n_tokens
    int32_t query_stride = 8;    ///< tokens between candidates
    int32_t min_separation = 32; ///< kept positions are at least this many tokens apart
    /// Recall probes (zoom_recall_probes): copies of this many runs of the document appended
    /// after it, so that some candidates are queries that must find one span far back, as a
    /// question about a document does; 0: none (the document alone). With probe_form Question,
    /// the number of question turns after the document instead (zoom_question_probes.h); with
    /// Fact, the number of facts inserted and asked for (zoom_fact_probes.h).
    int recall_probes = 0;
    int32_t probe_tokens = 24; ///< tokens per probe (>= 8; Fact: the most an answer may take)
    ZoomProbeForm probe_form = ZoomProbeForm::Copy; ///< copies or question turns
};

/// The settings as one line, with SEKV's segmentation options that shape the spans, e.g.
/// "max_tokens=4096 queries=32 tail=64 budget=0.35 first_query=512 query_stride=8
/// min_separation=32 alpha=1 min_span=4 max_span=32 reserve_rows=128", with " recall_probes=N
/// probe_tokens=L" when there are probes (and " probe_form=question" or " probe_form=fact" for
/// question or fact probes).
/// Two recordings with the same line, model and tokens hold the same data. Stored in
/// ZoomRecord::settings.
std::string zoom_record_settings_key(const ZoomRecordSettings& s);

/// Throws std::invalid_argument naming a setting out of range (max_tokens < 2, queries < 0,
/// tail < 0, budget not finite, first_query < 1, query_stride < 1, min_separation < 0,
/// recall_probes < 0, probe_tokens < 8, probes taking more than half of max_tokens).
void check_zoom_record_settings(const ZoomRecordSettings& s);

/// The document's token ids as recorded: BOS (where Tokenizer::add_bos() asks for one) and `text`,
/// cut to max_tokens. Throws std::invalid_argument for invalid UTF-8 or max_tokens < 1.
std::vector<int32_t> zoom_document_tokens(const Tokenizer& tok, const std::string& text,
                                          int64_t max_tokens);

/// The tokens recorded for a document with recall probes: `doc` (BOS first) cut to
/// max_tokens − recall_probes · probe_tokens tokens, then the probes: probe i copies the run of
/// probe_tokens tokens starting at 1 + (i + ½) · (n_doc − 1 − probe_tokens) / recall_probes (evenly
/// spaced depths, in order), so that the model, reading a passage again, attends back to where
/// it first read it (induction), the pattern of a question answered from a document. The probe
/// region's positions are candidates like any other (zoom_query_candidates) and are kept by their
/// reach. With recall_probes = 0, doc cut to max_tokens. probe_starts (optional): [recall_probes]
/// the copied runs' first positions. Throws std::invalid_argument when the document is too
/// short to copy from (n_doc < 1 + 2 · probe_tokens), the settings are out of range, or they
/// ask for question probes (those need the tokenizer: zoom_question_probes).
std::vector<int32_t> zoom_recall_probes(std::vector<int32_t> doc, const ZoomRecordSettings& s,
                                        std::vector<int32_t>* probe_starts = nullptr);

/// The candidate query positions of a document of n_tokens tokens: first_query + k ·
/// query_stride < n_tokens, k = 0, 1, ... (empty when the document is not longer than
/// first_query).
std::vector<int32_t> zoom_query_candidates(int64_t n_tokens, const ZoomRecordSettings& s);

/// The reach of a query position p in one layer: with the layer's full attention,
///   P_h(j) = softmax_j(scale · q_h · k_{g(h), j}), j = 0..p   (g(h) = h / (n_head / n_kv_head))
///   reach = (1 / n_head) Σ_h Σ_{spans S with S.end <= p - tail} Σ_{j in S} P_h(j),
/// the mean over query heads of the attention mass on rows at least `tail` tokens back that lie
/// in the spans SEKV would hold at two resolutions for this query: how much of the query's
/// attention the zoom-in has to route. Over several layers, the recorder averages the layers'
/// reaches. q: [n_head][head_dim] rotated at p; k: [rows >= p + 1][n_kv_head][head_dim]
/// rotated at 0..; spans ascending. Computed in double.
double zoom_reach(const float* q, const float* k, int n_head, int n_kv_head, int head_dim,
                  float scale, int32_t p, const std::vector<TokenSpan>& spans, int32_t tail);

/// The positions kept from `candidates` (ascending) with their reaches [candidates.size()]:
/// greedily by descending reach (ties: the earlier position), a candidate is kept when it lies
/// at least min_separation tokens from every position kept before, until `queries` are kept.
/// Returned ascending. Throws std::invalid_argument when the sizes differ.
std::vector<int32_t> select_zoom_queries(const std::vector<int32_t>& candidates,
                                         const std::vector<double>& reach, int queries,
                                         int32_t min_separation);

/// A recorded document and what was measured making it.
struct ZoomRecording {
    ZoomRecord record;               ///< everything but the provenance strings source,
                                     ///< model_fingerprint, command and commit (the caller's)
    std::vector<int32_t> candidates; ///< the candidate positions
    std::vector<double> reach;       ///< [candidates]: mean of zoom_reach over the SEKV layers
    bool budget_met = true;          ///< the segmentation met the budget (else it has no span)
    double alpha = 0;                ///< the segmentation threshold's α used
    double prefill_seconds = 0;
    /// max |out - Σ_j P(j) v_j| over the recorded outputs, with P recomputed in double from
    /// the recorded q and k: the engine's fp32 attention against its definition (~1e-6).
    double out_check = 0;
};

/// The largest out_check a recording may have: beyond it record_zoom refuses to return it (the
/// recorded outputs would not be the attention of the recorded q, k and v, and training would
/// learn from the disagreement).
constexpr double kZoomOutCheckLimit = 1e-3;

/// A document whose recording failed the output check (kZoomOutCheckLimit): what() says by how
/// much; the caller names the document and goes on with the others.
struct ZoomOutCheckError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Record one document (its tokens, e.g. from zoom_document_tokens; at least 2 and at most
/// the model's context). threads <= 0: all cores. cancel: checked during the prefill (throws
/// Cancelled). progress(done, total) after each prefill ubatch. Throws std::invalid_argument
/// for bad settings or tokens (out-of-range id, too many or too few tokens), for a model
/// without SEKV layers (sekv_layers), Cancelled, ZoomOutCheckError when out_check exceeds
/// kZoomOutCheckLimit.
ZoomRecording record_zoom(const Model& model, const std::vector<int32_t>& tokens,
                          const ZoomRecordSettings& settings, int threads,
                          const std::atomic<bool>* cancel = nullptr,
                          const std::function<void(int64_t, int64_t)>& progress = {});

/// What to do with a document whose recording may already exist at `path`.
enum class ZoomResume {
    Record, ///< no file: record it
    Skip,   ///< a complete recording of the same document, model and settings
};

/// Skip when `path` holds a recording of `source` with these tokens, model fingerprint and
/// settings key; Record when there is no file. Throws ZoomRecordError naming the file when it
/// cannot be loaded, or holds another document, another model's or other settings' recording
/// (what differs is said; nothing is mixed or overwritten silently).
ZoomResume zoom_resume(const std::string& path, const std::string& source,
                       const std::vector<int32_t>& tokens, const std::string& model_fingerprint,
                       const std::string& settings_key);

} // namespace spanscope
