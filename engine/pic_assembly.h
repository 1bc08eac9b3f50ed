// Position-independent caching (PIC, DESIGN.md §3.5): documents prefilled on their own (own
// BOS, positions from 0) are put side by side in any order; keys move to their new positions
// (re-rotated per layer with that layer's RoPE base, kv_rows.h), values stay; a selector
// chooses the recompute set U, whose tokens run through the layers again at their true
// positions and replace the cached rows.
//
// Selectors (recompute set U; the first document's rows are exact, so only `full` recomputes
// them; the question is always computed afterwards):
//   none        U = {}
//   epic        the first k tokens of every document but the first (Hu et al. 2024, "EPIC:
//               Efficient Position-Independent Context Caching for Serving Large Language
//               Models", §4, "LegoLink")
//   cacheblend  every token of documents 2..K runs layers 0..check_layer; per ubatch the share
//               `ratio` whose value vectors moved most at the check layer goes on through
//               the other layers (Yao et al. 2025, "CacheBlend", §4.2-4.3)
//   full        every token from position 0: the reference (equals a cold prefill)
#pragma once

#include "kv_rows.h"
#include "memory.h"
#include "model.h"
#include "thread_pool.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace spanscope {

/// A document prefilled on its own: its tokens (from its BOS) and every attention layer's rows
/// at document-local positions [0, tokens.size()).
struct CachedDocument {
    std::vector<int32_t> tokens;
    std::vector<LayerRows> rows; ///< one per layer of the model (every layer is attention in
                                 ///< Gemma 3), ascending layer
};

/// Prefill `tokens` (starting with the model's BOS) from position 0 with every layer's rows
/// kept, in ubatches of `ubatch` tokens. Throws std::invalid_argument for no tokens or
/// ubatch < 1, std::length_error past the model's context window, Cancelled.
CachedDocument prefill_document(const Model& model, const std::vector<int32_t>& tokens,
                                ThreadPool& pool, int64_t ubatch = 512,
                                const std::atomic<bool>* cancel = nullptr);

/// The selectors, in the order of the table above.
const std::vector<std::string>& recompute_selectors();

struct RecomputeOptions {
    std::string selector = "none"; ///< one of recompute_selectors()
    int epic_tokens = 16;          ///< epic: k, tokens at the start of each later document
    double ratio = 0.15;           ///< cacheblend: share of each forwarded ubatch that goes on
                                   ///< past the check layer, (0, 1] (pic-eval scales a share of
                                   ///< the context to it); other selectors ignore it
    int check_layer = 1;           ///< cacheblend: the layer whose value deviation selects
    int64_t ubatch = 512;          ///< tokens per forward call of the recompute pass
};

/// EPIC's k for a recompute ratio: ceil(ratio · n_past / (documents − 1)) tokens at the start
/// of each later document, so that about `ratio` of the context is recomputed (0 for a single
/// document). Throws std::invalid_argument for a ratio outside [0, 1] (or NaN).
int epic_tokens_for(double ratio, int64_t n_past, int64_t documents);

/// Throws std::invalid_argument for options `info`'s model cannot run: an unknown selector,
/// ubatch < 1, a negative EPIC k, a CacheBlend ratio outside (0, 1] or a check layer that is
/// not before the model's last layer.
void check_recompute_options(const ModelInfo& info, const RecomputeOptions& options);

/// Rows recomputed and reused, summed over the attention layers of one kind.
struct LayerKindCount {
    int layers = 0;
    int64_t rows_recomputed = 0; ///< rows the recompute pass wrote (replacing cached rows, or
                                 ///< inserted where a sliding layer kept none), over these layers
    int64_t rows_reused = 0;     ///< rows held before the pass and kept, over these layers
};

/// What an assembly reused and recomputed (counts in tokens or rows, time in ms).
struct AssemblyStats {
    int64_t tokens = 0;             ///< document tokens in context
    int64_t recompute_set = 0;      ///< |U|: tokens recomputed through every layer
    int64_t tokens_forwarded = 0;   ///< tokens that entered the recompute pass (cacheblend: all
                                    ///< of documents 2..K, most leave at the check layer)
    LayerKindCount global, sliding; ///< attention layers with and without a window
    double ms = 0;                  ///< assembling and recomputing, wall time
};

/// Documents assembled into one context, ready for the question: the memory to answer from
/// (Session::memory() = std::move(memory); adopt_memory(n_past)).
struct AssembledContext {
    ModelMemory memory;                       ///< AssembledMemory per layer, rows [0, n_past)
    int64_t n_past = 0;                       ///< tokens in context
    std::vector<int32_t> tokens;              ///< the concatenation, [n_past]
    std::vector<int64_t> starts;              ///< each document's first position, [K]
    std::vector<int32_t> recompute_positions; ///< U, increasing (cacheblend: selected at the
                                              ///< check layer)
    AssemblyStats stats;
};

/// Put `docs` side by side in this order at consecutive positions and run the selector's
/// recompute pass. capacity: rows each layer may hold (n_past plus the question and answer to
/// come; 0: the model's context window). Throws std::invalid_argument (no documents, a
/// document without tokens or whose rows do not cover its tokens in every attention layer, an
/// unknown selector or bad option), ContextOverflow-like std::length_error when the documents
/// exceed the capacity, Cancelled.
AssembledContext assemble_documents(const Model& model,
                                    const std::vector<const CachedDocument*>& docs,
                                    const RecomputeOptions& options, ThreadPool& pool,
                                    int64_t capacity = 0,
                                    const std::atomic<bool>* cancel = nullptr);

/// The selector's recompute pass over `memory` (AssembledMemory in every layer) already holding
/// the documents that start at `starts` ([K], from 0, increasing) of the concatenation
/// `tokens` ([n_past]): every global layer's rows, and in sliding-window layers at least the
/// rows the recomputed tokens attend to (a project's stored states keep only each section's
/// last rows there: enough for none, epic and full). rows_reused counts the rows held before
/// the pass that it did not replace. recompute_positions receives U. Throws
/// std::invalid_argument (bad starts, a memory of another shape, a layer lacking a row a
/// recomputed token needs: the message names the selector and the layer), Cancelled.
AssemblyStats recompute_documents(const Model& model, ModelMemory& memory,
                                  const std::vector<int32_t>& tokens,
                                  const std::vector<int64_t>& starts,
                                  const RecomputeOptions& options, ThreadPool& pool,
                                  std::vector<int32_t>* recompute_positions,
                                  const std::atomic<bool>* cancel = nullptr);

/// Memory for every layer of `model` that keeps every row (AssembledMemory, windows as the
/// layers have them), capacity rows each.
ModelMemory make_assembled_memory(const ModelInfo& info, int64_t capacity);

} // namespace spanscope
