// State initialisers of recurrent layers for position-independent reuse (LinearKV,
// docs/architecture.md §3.5): documents D1…DK were each prefilled on their own from a zero state;
// the text after them (the question) needs the state a joint run over D1…DK would have left. A
// layer with a fixed-size state cannot concatenate like attention rows can, so it starts from:
//   single-block  the last document's own end state (and conv tail): the LinearKV default;
//                 it forgets D1…DK−1, which a fixed-size state decays anyway
//   exact         the composition S ← S·T_k + S_k over k = 1…K in fp32 (Mamba-2: T_k is the
//                 scalar exp(Σ dt·A) per head; Gated DeltaNet: the d_k×d_k transition matrix,
//                 which must have been tracked), with DK's conv tail; equals the joint run when
//                 each document's first tokens saw the previous document's conv tail
//   zero          a zero state and conv tail (as if the documents were not there)
// A document's end states (RecurrentLayerState) are what the project store keeps of it
// (storage/chunk_state.h, kind 3) and what the initialisers start from.
#pragma once

#include "engine/model/recurrent_gated_deltanet.h"
#include "engine/model/recurrent_mamba2.h"

#include <optional>
#include <string>
#include <vector>

namespace spanscope {

/// One recurrent layer's state at the end of a document prefilled on its own from a zero state
/// (fp32). Exactly one of the two is set, as the layer's kind.
struct RecurrentLayerState {
    int layer = 0;
    /// Mamba-2: ssm [H][P][N], conv tail [d_conv − 1][conv_dim], log_decay [H] (nats).
    std::optional<Mamba2State> mamba2;
    /// Gated DeltaNet: s [n_v][d_v][d_k], conv tail [d_conv − 1][conv_dim], and the transition
    /// [n_v][d_k][d_k] when it was tracked (prefill_document's track_transition).
    std::optional<GatedDeltaNetState> gated_deltanet;
    /// The conv tail, [d_conv − 1][conv_dim]. Throws std::logic_error when no state is set.
    const std::vector<float>& conv() const;
};

enum class StateInitialiser { SingleBlock, Exact, Zero };

/// "single-block", "exact", "zero".
const std::vector<std::string>& state_initialiser_names();
/// The initialiser named `name`; throws std::invalid_argument for another name (listing them).
StateInitialiser parse_state_initialiser(const std::string& name);

/// The state a Mamba-2 layer starts from after `documents` (in context order; each the end state
/// of a document prefilled from a zero state, with its log-decay sum). Throws
/// std::invalid_argument for no documents or a state that does not fit `shape`.
Mamba2State mamba2_initial_state(const Mamba2Shape& shape,
                                 const std::vector<const Mamba2State*>& documents,
                                 StateInitialiser initialiser);

/// The same for a Gated DeltaNet layer. `exact` needs every document's transition matrix
/// (GatedDeltaNetState::tracks_transition()); throws std::invalid_argument without it, for no
/// documents, or for a state that does not fit `shape`. The result tracks no transition.
GatedDeltaNetState
gated_deltanet_initial_state(const GatedDeltaNetShape& shape,
                             const std::vector<const GatedDeltaNetState*>& documents,
                             StateInitialiser initialiser);

} // namespace spanscope
