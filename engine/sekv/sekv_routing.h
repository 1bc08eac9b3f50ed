// The router's decisions for a SEKV layer's queries (docs/sekv.md), shared by the memories
// that hold a layer's spans — on the host (memory_sekv.h) and on the GPU
// (cuda/cuda_sekv_memory.h) — so that both expand the same spans for the same queries.
// Relevance and τ are router.h's; this file applies them per (query, head) over a layer's spans,
// with the KV-group union and the zoom trace of the last query.
#pragma once

#include "engine/kernels/attention.h"
#include "engine/kernels/thread_pool.h"
#include "engine/sekv/sekv_spans.h"
#include "engine/sekv/zoom_trace.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace spanscope {

/// The router modes, as the command line, Settings and an answer's statistics name them
/// (GenerationStats::router).
inline constexpr const char* kRouterTrained = "trained";
inline constexpr const char* kRouterTrainingFree = "training-free";
/// The attention-mass oracle of evaluations (SekvRouterOptions::oracle): the spans of most
/// attention mass, a reference for the other two, not a policy to answer with.
inline constexpr const char* kRouterOracle = "oracle";

/// A trained router for one layer (router_params.h trained_router makes it from a parameter
/// file): per query head a projection W [d_out][head_dim] and a threshold τ, and optionally per
/// KV head a sketch basis U (span_sketch.h: the spans then carry key sketches).
struct TrainedRouterLayer {
    int d_out = 0;
    std::vector<float> w;            ///< [n_head][d_out][head_dim]
    std::vector<double> tau;         ///< [n_head]
    int sketch_dim = 0;              ///< m; 0: no sketch
    std::vector<float> sketch_basis; ///< [n_kv_head][sketch_dim][head_dim]
};

struct SekvRouterOptions {
    /// Target fraction of spans expanded per query and head: τ of each head is calibrated on
    /// the queries of the first attend() after a seal (the question), the (1 - rate) quantile
    /// of their relevances (router.h calibrate_tau).
    double expand_rate = 0.2;
    int64_t budget_rows = 0; ///< > 0: at most this many reconstructed rows per query and head
    bool expand_all = false; ///< zoom into every span (exactness checks)
    /// A span any query head of a KV group zooms into is expanded for every head of the group
    /// (its rows are reconstructed for that KV head anyway), and the zoom trace records it for
    /// each of them. Not with a row budget (which holds per query head).
    bool share_group = true;
    std::shared_ptr<const TrainedRouterLayer> trained; ///< nullptr: training-free (W = 0)
    /// With a trained router: decide with the thresholds it learned (trained->tau) instead of
    /// calibrating τ to expand_rate on the question. Off by default: the learned thresholds
    /// come from queries inside documents and under-expand for a question after them
    /// (docs/sekv.md "The relevance's form").
    bool learned_tau = false;
    /// τ of each (query, head) calibrated on that query's own relevances, so that every query
    /// head asks for round(expand_rate · spans) of them (the (1 − rate) quantile of its own
    /// relevances, router.h calibrate_tau), rather than once on the question's queries. Off by
    /// default. Not with learned_tau (fixed thresholds) or a row budget.
    bool tau_per_query = false;
    /// The attention-mass oracle, a measurement rather than a cache policy: a span's relevance
    /// is its share of the attention mass over all spans, the scores taken against every key
    /// reconstructed from the span's factors (span_attention_shares), so each query head
    /// expands, of all sets of that many spans, the one holding the most attention mass (with
    /// share_group, the union of its group's sets). That
    /// is what the trained router's zoom labels ask for (the spans covering most of the
    /// teacher's mass, zoom_examples.h); it is not a bound on accuracy or KL, as a span of
    /// near-equal rows loses little to its summary whatever its mass. It reads every span's
    /// factors at every query, as full attention reads every row, and so saves no work; the
    /// host memory only (DeviceSekvMemory refuses it). Needs tau_per_query (each query head
    /// expands as many spans as τ per query asks for) and no trained router.
    bool oracle = false;
    /// Two-stage routing (0: off; else at least 2): each query head takes as candidates the
    /// spans its router (trained or training-free) ranks in the top `rerank` times its share
    /// (τ per query at rate min(1, rerank · expand_rate)), scores each candidate against the keys
    /// rebuilt from the candidate's key factors (its log-sum-exp, as span_attention_shares), and
    /// expands as many candidates, of the largest scores, as τ per query at expand_rate would
    /// have expanded. It reads the key factors of the candidates only, about rerank times the
    /// spans it expands, where the oracle reads every span's. Needs tau_per_query and not the
    /// oracle; the host memory only (DeviceSekvMemory refuses it).
    int rerank = 0;
};

/// The largest SekvRouterOptions::rerank: candidates of at most 64 times a head's share.
inline constexpr int kMaxRerank = 64;

/// Throws std::invalid_argument when the options are out of range (expand rate outside [0, 1],
/// a negative row budget), tau_per_query is combined with learned_tau or a row budget, oracle
/// comes without tau_per_query or with a trained router, rerank is 1, negative or above
/// kMaxRerank or comes without tau_per_query or with the oracle, or the
/// trained router does not match the shape (n_head, head_dim; a sketch basis of
/// n_kv_head · sketch_dim · head_dim values).
void check_router_options(const SekvRouterOptions& options, const AttentionShape& shape);

/// Relevance of every span for query head `head`'s query qh [head_dim] (router.h
/// span_relevance with the span's summary key of the head's KV group; the trained W of the
/// head when there is one, with its sketch basis the spans' sketches, which they must then
/// carry). Returns [spans.size()]. Throws std::invalid_argument for a span without a sketch of
/// the router's basis ([n_kv_head][sketch_length(m)]) when the router has one.
std::vector<double> span_relevances(const AttentionShape& shape, const SekvRouterOptions& options,
                                    const std::vector<SekvSpan>& spans, const float* qh, int head);

/// The oracle's relevance of every span for query head `head`'s query qh [head_dim]: the span's
/// share of the attention mass over all spans, exp(L_S − log Σ_S' exp L_S'), with
/// L_S = log Σ_{i∈S} exp(scale · qh·k_i) over the keys k_i = left_i · right reconstructed from
/// the span's factors of the head's KV group (the scores mixed_attention gives an expanded
/// span). head: in [0, shape.n_head), n_head a multiple of n_kv_head. Returns [spans.size()],
/// summing to 1 (a share may underflow to 0). Throws std::invalid_argument for a head outside
/// [0, n_head) or n_head not a multiple of n_kv_head, for a span without
/// factors (a summaries-only span, or one whose factors live on the GPU) or factors of another
/// shape than [size][head_dim].
std::vector<double> span_attention_shares(const AttentionShape& shape,
                                          const std::vector<SekvSpan>& spans, const float* qh,
                                          int head);

/// Two-stage routing's second stage (SekvRouterOptions::rerank) for query head `head`'s query qh
/// [head_dim]: of `candidates` (span indices), the `keep` whose keys, rebuilt from their key
/// factors of the head's KV group, take the most of qh's attention (the largest log-sum-exp of
/// scale · qh·k_i, as span_attention_shares scores them; ties to the lower index). Returns them
/// ascending. Throws std::invalid_argument as span_attention_shares for a candidate without
/// factors or a head outside the layer, and for a candidate index outside spans.
std::vector<int> rerank_candidates(const AttentionShape& shape, const std::vector<SekvSpan>& spans,
                                   const std::vector<int>& candidates, const float* qh, int head,
                                   size_t keep);

/// τ per query head [n_head]: the trained τ with learned_tau, else calibrated so that a fraction
/// options.expand_rate of the relevances of queries q [n_q][n_head][head_dim] exceed it
/// (router.h calibrate_tau). Throws std::invalid_argument for n_q < 1 or no span.
std::vector<double> calibrate_router(const AttentionShape& shape, const SekvRouterOptions& options,
                                     const std::vector<SekvSpan>& spans, const float* q,
                                     int64_t n_q);

/// The spans each (query, head) attends at full resolution.
struct SpanRouting {
    /// [n_q * n_head] (query-major): ascending span indices expanded for that query head (with
    /// share_group, the union over its KV group).
    std::vector<std::vector<int>> used;
    /// [n_q * n_head][spans]: each span's relevance (empty with summaries_only).
    std::vector<std::vector<double>> relevance;
};

/// Route queries q [n_q][n_head][head_dim] over `spans` with τ [n_head] (calibrate_router):
/// expand_all expands every span, summaries_only none (chunk_summary); otherwise the spans with
/// relevance above τ (route_spans with the row budget; with tau_per_query above the τ of that
/// query head's own relevances, and `tau` is not read), united over each KV group with
/// share_group (and no row budget). With options.oracle the relevances are
/// span_attention_shares (which throws std::invalid_argument for spans without factors); with
/// options.rerank the candidates are chosen again by rerank_candidates (the relevances stay the
/// router's).
SpanRouting route_queries(const AttentionShape& shape, const SekvRouterOptions& options,
                          bool summaries_only, const std::vector<SekvSpan>& spans,
                          const std::vector<double>& tau, const float* q, int64_t n_q,
                          ThreadPool& pool);

/// The zoom trace of the last query [n_head]: per head the spans it attended at full
/// resolution and its relevances of them.
std::vector<ZoomHead> last_query_zoom(const SpanRouting& routing, int64_t n_q, int n_head);

} // namespace spanscope
