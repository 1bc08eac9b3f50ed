// The memory of a recurrent layer (Mamba-2 or Gated DeltaNet): one fixed-size state that every
// token of the context has passed through, in position order. It is the recurrent counterpart of
// an attention layer's LayerMemory (llama.cpp keeps the two apart in the same way:
// llama-memory-recurrent.h beside llama-kv-cache.h, joined by llama-memory-hybrid.h).
#pragma once

#include "engine/memory/memory.h"
#include "engine/model/recurrent_gated_deltanet.h"
#include "engine/model/recurrent_mamba2.h"

#include <cstdint>
#include <memory>
#include <string_view>
#include <variant>

namespace spanscope {

enum class RecurrentKind { Mamba2, GatedDeltaNet };

/// One recurrent layer's state (fp32) and the number of tokens it has absorbed. Copyable: a copy
/// is independent (the states are plain vectors).
class RecurrentMemory {
public:
    /// A zero state (a fresh document) for a Mamba-2 layer of `shape`.
    /// Throws std::invalid_argument if shape.validate() does.
    explicit RecurrentMemory(const Mamba2Shape& shape);
    /// A zero state for a Gated DeltaNet layer of `shape`; with track_transition the state also
    /// keeps the transition matrix of every token it absorbs ([n_v][d_k][d_k], starting as the
    /// identity: what `exact` composition needs, state_initialiser.h).
    /// Throws std::invalid_argument if shape.validate() does.
    explicit RecurrentMemory(const GatedDeltaNetShape& shape, bool track_transition = false);

    /// "recurrent" (the policy name reported beside the attention policies).
    static constexpr std::string_view policy() { return "recurrent"; }
    RecurrentKind kind() const { return kind_; }
    /// The layer's state; throw std::logic_error when the memory holds the other kind.
    Mamba2State& mamba2();
    const Mamba2State& mamba2() const;
    GatedDeltaNetState& gated_deltanet();
    const GatedDeltaNetState& gated_deltanet() const;

    /// Tokens run through the state since it was last cleared.
    int64_t n_tokens() const { return n_tokens_; }
    /// Record that n ≥ 0 more tokens went through the state (the model calls this after running
    /// the layer). Throws std::invalid_argument for n < 0.
    void advance(int64_t n);
    /// Say that the state now stands for the first n ≥ 0 positions of the context, so that the
    /// next token absorbed must be at position n. Position-independent assembly needs it: a
    /// state initialised from documents prefilled on their own stands for all of them, and a
    /// recompute pass absorbs its stretches at their own positions (pic_assembly.h). Throws
    /// std::invalid_argument for n < 0.
    void reposition(int64_t n);
    /// Bytes of the state (4 per float: ssm or delta-rule state, conv tail, log-decay or
    /// transition when tracked).
    int64_t bytes() const;
    /// rows_resident 0, fast_tier_bytes = bytes(), full_kv_bytes = bytes() (the state is the
    /// whole memory whatever the context length).
    MemoryStats stats() const;
    std::unique_ptr<RecurrentMemory> clone() const;
    /// Zero state and conv tail (a tracked transition back to the identity), n_tokens 0 (a fresh
    /// document).
    void clear();

private:
    RecurrentKind kind_;
    Mamba2Shape mamba2_shape_;
    GatedDeltaNetShape gdn_shape_;
    std::variant<Mamba2State, GatedDeltaNetState> state_;
    int64_t n_tokens_ = 0;
};

} // namespace spanscope
