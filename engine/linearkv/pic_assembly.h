// Position-independent caching (PIC, docs/linearkv.md): documents prefilled on their own (own
// BOS, positions from 0) are put side by side in any order; keys move to their new positions
// (re-rotated per layer with that layer's RoPE frequencies, kv_rows.h), values stay; a selector
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
//
// Hybrid models (recurrent layers: Mamba-2, Gated DeltaNet). A recurrent layer cannot put
// documents side by side; it starts from an initial state built from the documents' own end
// states (each prefilled from a zero state) by a StateInitialiser (state_initialiser.h:
// single-block, exact, zero), standing for the whole context [0, n_past). The recompute set
// then runs through the recurrent layers as through the attention layers: they absorb U's
// tokens in position order, on top of the initial state (docs/linearkv.md: "recurrent layers
// advance S_init over U in position order"; the initial state already holds those tokens'
// documents, so U's tokens enter it a second time: the design's choice, not a joint run).
// `full` starts the recurrent layers from a zero state at position 0 instead, so that it
// equals a cold prefill. CacheBlend is refused: its filter drops most tokens after the check
// layer, and a recurrent layer after it would absorb only the kept ones, a state no run of
// the text produces (the models refuse token filters for this reason).
//
// Conv-tail policy (ConvTailPolicy): which conv tail (the last d_conv − 1 raw conv inputs)
// a recurrent layer's causal conv sees when the recompute pass starts a stretch of U at the
// start of document d (d ≥ 2):
//   same      the tail the state carries (the initial state's, then the previous stretch's
//             end): the default
//   previous  document d−1's own end tail: what a joint run has there (up to the drift of the
//             layers below)
//   zero      a zero tail: what document d's own prefill saw at its BOS
// Whatever the policy, the tail the question sees is the initialiser's (the last document's own
// end tail for single-block and exact, zero for zero), put back after the pass unless U ended
// at the end of the context.
#pragma once

#include "engine/kernels/thread_pool.h"
#include "engine/linearkv/state_initialiser.h"
#include "engine/memory/kv_rows.h"
#include "engine/memory/memory.h"
#include "engine/model/model.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spanscope {

/// A document prefilled on its own: its tokens (from its BOS), every attention layer's rows
/// at document-local positions [0, tokens.size()) and every recurrent layer's end state.
struct CachedDocument {
    std::vector<int32_t> tokens;
    std::vector<LayerRows> rows;             ///< one per attention layer, ascending layer
    std::vector<RecurrentLayerState> states; ///< one per recurrent layer, ascending layer
                                             ///< (none for a model without)
};

/// Prefill `tokens` (a unit: its header, with BOS where the model wants one, first) from position 0
/// with every attention layer's rows kept and every recurrent layer run from a zero state, in
/// ubatches of `ubatch` tokens. track_transition: Gated DeltaNet layers also keep their transition
/// matrix (4·n_v· d_k² bytes per layer; needed by the `exact` initialiser). Throws
/// std::invalid_argument for no tokens or ubatch < 1, std::length_error past the model's context
/// window, Cancelled.
CachedDocument prefill_document(const Model& model, const std::vector<int32_t>& tokens,
                                ThreadPool& pool, int64_t ubatch = 512,
                                const std::atomic<bool>* cancel = nullptr,
                                bool track_transition = false);

/// Conv tails at the seams of the recompute pass (the table at the top of this file).
enum class ConvTailPolicy { Same, Previous, Zero };
/// "same", "previous", "zero".
const std::vector<std::string>& conv_tail_policy_names();
/// The policy named `name`; throws std::invalid_argument for another name (listing them).
ConvTailPolicy parse_conv_tail_policy(const std::string& name);
const std::string& conv_tail_policy_name(ConvTailPolicy policy);
const std::string& state_initialiser_name(StateInitialiser initialiser);

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
    /// Recurrent layers (hybrid models): the initial state built from the documents' states;
    /// ignored by `full` (a zero state) and by models without recurrent layers.
    StateInitialiser state_init = StateInitialiser::SingleBlock;
    /// Recurrent layers: the conv tail at each stretch of U (the table at the top).
    ConvTailPolicy conv_tail = ConvTailPolicy::Same;
};

/// EPIC's k for a recompute ratio: ceil(ratio · n_past / (documents − 1)) tokens at the start
/// of each later document, so that about `ratio` of the context is recomputed (0 for a single
/// document). Throws std::invalid_argument for a ratio outside [0, 1] (or NaN).
int epic_tokens_for(double ratio, int64_t n_past, int64_t documents);

/// Throws std::invalid_argument for options `info`'s model cannot run: an unknown selector,
/// ubatch < 1, a negative EPIC k, a CacheBlend ratio outside (0, 1] or a check layer that is
/// not before the model's last layer, CacheBlend on a hybrid model, an initialiser or
/// conv-tail policy outside its enumeration.
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
    /// Recurrent layers: rows_recomputed counts the tokens they absorbed in the pass (summed
    /// over the layers), rows_reused the tokens their initial state stood for (likewise).
    LayerKindCount recurrent;
    double init_ms = 0; ///< building the recurrent layers' initial states, wall time
    double ms = 0;      ///< assembling and recomputing, wall time
};

/// Documents assembled into one context, ready for the question: the memory to answer from
/// (Session::memory() = std::move(memory); adopt_memory(n_past)).
struct AssembledContext {
    ModelMemory memory;          ///< AssembledMemory per attention layer, rows [0, n_past);
                                 ///< RecurrentMemory per recurrent layer, standing for [0, n_past)
    int64_t n_past = 0;          ///< tokens in context
    std::vector<int32_t> tokens; ///< the concatenation, [n_past]
    std::vector<int64_t> starts; ///< each document's first position, [K]
    std::vector<int32_t> recompute_positions; ///< U, increasing (cacheblend: selected at the
                                              ///< check layer)
    AssemblyStats stats;
};

/// Put `docs` side by side in this order at consecutive positions and run the selector's
/// recompute pass. capacity: rows each layer may hold (n_past plus the question and answer to
/// come; 0: the model's context window). Recurrent layers start from options.state_init over
/// the documents' states in this order (the top of this file). Throws std::invalid_argument
/// (no documents, a document without tokens, whose rows do not cover its tokens in every
/// attention layer or that lacks a recurrent layer's state, `exact` on Gated DeltaNet states
/// without their transition, an unknown selector or bad option), ContextOverflow-like
/// std::length_error when the documents exceed the capacity, Cancelled.
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
/// the pass that it did not replace. recompute_positions receives U. Recurrent layers (a
/// hybrid model) must hold their initial state standing for [0, n_past) (or, for `full`,
/// anything: they restart from zero); doc_states ([K], each document's recurrent end states,
/// CachedDocument::states) gives the conv tails of the `previous` policy and the tail put back
/// before the question, and is required for a hybrid model. Throws std::invalid_argument (bad
/// starts, a memory of another shape, a layer lacking a row a recomputed token needs: the
/// message names the selector and the layer, a hybrid model without doc_states), Cancelled.
AssemblyStats recompute_documents(
    const Model& model, ModelMemory& memory, const std::vector<int32_t>& tokens,
    const std::vector<int64_t>& starts, const RecomputeOptions& options, ThreadPool& pool,
    std::vector<int32_t>* recompute_positions, const std::atomic<bool>* cancel = nullptr,
    const std::vector<const std::vector<RecurrentLayerState>*>* doc_states = nullptr);

/// Put every recurrent layer of `memory` in the state `initialiser` builds from doc_states
/// ([K] in context order, each one state per recurrent layer), standing for n_past tokens
/// (RecurrentMemory::reposition). Returns the wall time (ms). Throws std::invalid_argument for
/// a document lacking a layer's state or one of the wrong kind or shape, `exact` on Gated
/// DeltaNet states without their transition (state_initialiser.h).
double
initialise_recurrent_layers(const ModelInfo& info, ModelMemory& memory,
                            const std::vector<const std::vector<RecurrentLayerState>*>& doc_states,
                            StateInitialiser initialiser, int64_t n_past);

/// Memory for every layer of `model`: attention layers keep every row (AssembledMemory,
/// windows as the layers have them, capacity rows each), recurrent layers a zero
/// RecurrentMemory (Gated DeltaNet tracking its transition when track_transition).
ModelMemory make_assembled_memory(const ModelInfo& info, int64_t capacity,
                                  bool track_transition = false);

} // namespace spanscope
