// The memory (cache policy) behind each attention layer. The model asks its layer's memory to
// store this ubatch's keys/values and to attend over what it holds; it never learns which
// policy answers (docs/architecture.md, Memory; llama.cpp's llama_memory_i is the model for this
// split).
#pragma once

#include "engine/kernels/attention.h"
#include "engine/kernels/thread_pool.h"
#include "engine/memory/attention_mass.h"
#include "engine/sekv/segmentation.h"
#include "engine/sekv/zoom_trace.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spanscope {

/// What a layer's memory holds, per tier, in bytes and rows.
struct MemoryStats {
    int64_t rows_resident = 0;   ///< key/value rows attention reads (per kv head group)
    int64_t fast_tier_bytes = 0; ///< K/V rows and positions the attention reads
    int64_t host_tier_bytes = 0; ///< slower-tier data (none for the exact policies)
    int64_t full_kv_bytes = 0;   ///< what `full` would hold for the same tokens
    int64_t spans = 0;           ///< spans held at two resolutions (SEKV)
    /// SEKV on the GPU (cuda/cuda_sekv_memory.h): device bytes of the cache of span factors
    /// (not in fast_tier_bytes), and since the memory was made or cleared, the expanded spans
    /// whose factors were copied when attention needed them, found on the device (cached or
    /// prefetched), copied ahead by the previous SEKV layer's prefetch, and dropped from the
    /// cache to make room.
    int64_t cache_bytes = 0;
    int64_t factor_fetches = 0, factor_hits = 0, factor_prefetches = 0, factor_evictions = 0;

    /// Field by field: the memory of two layers (or sets of layers) together.
    MemoryStats& operator+=(const MemoryStats& o) {
        rows_resident += o.rows_resident;
        fast_tier_bytes += o.fast_tier_bytes;
        host_tier_bytes += o.host_tier_bytes;
        full_kv_bytes += o.full_kv_bytes;
        spans += o.spans;
        cache_bytes += o.cache_bytes;
        factor_fetches += o.factor_fetches;
        factor_hits += o.factor_hits;
        factor_prefetches += o.factor_prefetches;
        factor_evictions += o.factor_evictions;
        return *this;
    }
};

/// A complete stretch of context (a document's tokens) that a policy may now hold at lower
/// resolution. segmentation: positions relative to pos_begin, covering [pos_begin,
/// pos_begin + n); token_surprisal: [n], each token's own surprisal (nats, sekv_spans.h).
struct SealRequest {
    const Segmentation* segmentation = nullptr;
    const float* token_surprisal = nullptr;
    int32_t pos_begin = 0;
    int64_t n = 0;
};

class LayerMemory {
public:
    virtual ~LayerMemory() = default;
    LayerMemory() = default;
    /// A copy (clone()) never reports to the original's mass sink.
    LayerMemory(const LayerMemory& /*other*/) {}
    LayerMemory& operator=(const LayerMemory& /*other*/) { return *this; }
    /// Policy name as in docs/architecture.md, Memory ("full", "sliding", ...).
    virtual std::string_view policy() const = 0;
    virtual const AttentionShape& shape() const = 0;
    /// Store keys (RoPE-rotated at pos) and values of n tokens.
    /// k, v: [n][n_kv_head][head_dim]; pos: [n] absolute positions, increasing.
    /// The exact policies keep every value at f16 precision (rounded to nearest even, as
    /// llama.cpp's default F16 KV cache does), so that a state saved as f16 restores exactly.
    /// Throws std::length_error when the memory cannot hold them (e.g. past the context size).
    virtual void store(const float* k, const float* v, const int32_t* pos, int64_t n) = 0;
    /// Copy out the resident rows whose positions lie in [pos_begin, pos_end), in position
    /// order: k, v: [rows][n_kv_head][head_dim] (keys as stored, rotated at their positions),
    /// pos: [rows]. Returns the number of rows. Policies whose rows cannot be exported throw
    /// std::logic_error (the default).
    virtual int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                              std::vector<float>& v, std::vector<int32_t>& pos) const;
    /// Attention of n_q queries over everything stored, causal by position.
    /// q: [n_q][n_head][head_dim] rotated at qpos; out: [n_q][n_head][head_dim].
    virtual void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                        ThreadPool& pool) = 0;
    virtual MemoryStats stats() const = 0;
    /// True for policies that hold sealed context at lower resolution (they then want the
    /// surprisal of the context computed during its prefill, and seal() afterwards).
    virtual bool seals() const { return false; }
    /// True for sealing policies that need the sealed context's segmentation and surprisal
    /// (SEKV and chunk_summary); the eviction baselines do not.
    virtual bool needs_segmentation() const { return false; }
    /// The context of `request` is complete; the exact policies keep it as it is (the default).
    virtual void seal(const SealRequest& /*request*/) {}
    /// The routing of the last query attended (one entry per query head), or nullptr for a
    /// policy that does not route.
    virtual const std::vector<ZoomHead>* last_zoom() const { return nullptr; }
    /// True for policies whose attend() adds the attention mass of the sink's query to it
    /// (set_mass_sink): full, the eviction baselines, sekv and chunk_summary (a summary row and
    /// an expanded span add theirs to the span's positions), LinearKV's assembled memory.
    virtual bool reports_mass() const { return false; }
    /// From now on attend() adds the attention probabilities of the query at
    /// sink->query_pos(), summed over its query heads, to `sink` (nullptr: stop). The sink must
    /// outlive its use; clones do not inherit it. Throws std::logic_error for a non-null sink
    /// when !reports_mass().
    virtual void set_mass_sink(AttentionMass* sink);
    /// Number of tokens stored so far (including any no longer resident).
    virtual int64_t n_tokens() const = 0;
    /// An independent copy (to branch a conversation from a prefilled document).
    virtual std::unique_ptr<LayerMemory> clone() const = 0;
    virtual void clear() = 0;

protected:
    /// The sink attend() reports to, or nullptr.
    AttentionMass* mass_sink() const { return mass_sink_; }

private:
    AttentionMass* mass_sink_ = nullptr;
};

/// x[i] <- fp32(f16(x[i])) (round to nearest even), n elements.
void round_through_f16(float* x, int64_t n);

class RecurrentMemory;

/// Every layer's memory, indexed by layer: an attention layer's LayerMemory (any policy) or a
/// recurrent layer's RecurrentMemory (memory_recurrent.h), as llama.cpp's hybrid memory holds
/// a KV cache and a recurrent state side by side (llama-memory-hybrid.h).
class ModelMemory {
public:
    ModelMemory();
    /// Attention layers only (every pointer non-null).
    explicit ModelMemory(std::vector<std::unique_ptr<LayerMemory>> layers);
    /// attention[il] or recurrent[il] is set for every il, never both; the two vectors have the
    /// same size. Throws std::invalid_argument otherwise.
    ModelMemory(std::vector<std::unique_ptr<LayerMemory>> attention,
                std::vector<std::unique_ptr<RecurrentMemory>> recurrent);
    ModelMemory(ModelMemory&&) noexcept;
    ModelMemory& operator=(ModelMemory&&) noexcept;
    ~ModelMemory();
    ModelMemory clone() const;
    /// True when layer il is served by a RecurrentMemory. Throws std::out_of_range for a layer
    /// that does not exist.
    bool is_recurrent(int il) const;
    /// True when some layer is recurrent (a hybrid model's memory).
    bool has_recurrent() const;
    /// Layer il's attention memory. Throws std::out_of_range for a layer that does not exist,
    /// std::logic_error for a recurrent layer (it has no K/V rows).
    LayerMemory& layer(int il);
    const LayerMemory& layer(int il) const;
    /// Layer il's recurrent memory. Throws std::out_of_range for a layer that does not exist,
    /// std::logic_error for an attention layer.
    RecurrentMemory& recurrent(int il);
    const RecurrentMemory& recurrent(int il) const;
    int n_layers() const { return static_cast<int>(attention_.size()); }
    /// Tokens held, as layer 0 counts them (every layer holds the same tokens).
    int64_t n_tokens() const;
    /// Statistics summed over every layer, attention and recurrent.
    MemoryStats total() const;
    /// The statistics summed over the layers whose policy is `policy` ("recurrent" for the
    /// recurrent layers).
    MemoryStats total(std::string_view policy) const;
    /// Indices of the attention layers whose policy seals context (seals()).
    std::vector<int> sealing_layers() const;
    /// True when a layer needs_segmentation().
    bool needs_segmentation() const;
    /// Put `memory` in place of attention layer il's (to serve a prefilled context under another
    /// policy). Throws std::out_of_range for a layer that does not exist, std::logic_error for a
    /// recurrent layer.
    void replace(int il, std::unique_ptr<LayerMemory> memory);
    void clear();

private:
    // Per layer exactly one of the two is set.
    std::vector<std::unique_ptr<LayerMemory>> attention_;
    std::vector<std::unique_ptr<RecurrentMemory>> recurrent_;
};

} // namespace spanscope
