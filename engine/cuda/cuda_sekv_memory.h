// SEKV on the GPU (docs/sekv.md; the device counterpart of memory_sekv.h), with its tiers
// where the design puts them:
// - fast tier, device memory: the rows held at full resolution (anchors, short spans, the tail)
//   as f16, and one summary row per span (fp32) with log|S|;
// - host tier, pinned host memory (cudaHostAlloc): each span's low-rank factors, packed
//   (span_factor_pack.h);
// - a bounded device cache of the factors of recently expanded spans (span_factor_cache.h).
// Per attention call the router runs on the host (sekv_routing.h: the same decisions as the CPU
// memory for the same queries, from a copy of the queries); the factors of expanded spans not
// in the cache are copied with cudaMemcpyAsync on the context's copy stream, each followed by an
// event the compute stream waits for; their rows are reconstructed on the device and attention
// reads full rows, summaries and reconstructed rows in one softmax. The spans one SEKV layer
// expands are prefetched into the next SEKV layer's cache (the same spans, that layer's
// factors) while the layers between run.
#pragma once

#include "engine/cuda/cuda_buffer.h"
#include "engine/cuda/cuda_context.h"
#include "engine/cuda/cuda_kv_memory.h"
#include "engine/cuda/cuda_layer_memory.h"
#include "engine/cuda/cuda_mixed_attention.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/span_factor_cache.h"
#include "engine/sekv/span_factor_pack.h"

#include <memory>
#include <vector>

namespace spanscope::cuda {

struct DeviceSekvOptions {
    /// Device bytes for the cache of span factors; at least one attention call's expanded spans
    /// are always held (the cache grows to them when it must).
    int64_t cache_bytes = int64_t{64} << 20;
    /// false: the factors are copied on the compute stream itself (synchronous with the
    /// computation; no prefetch), the reference for the asynchronous path.
    bool async_fetch = true;
};

class DeviceSekvMemory;

/// The SEKV layers of one model memory in layer order, so that each can prefetch for the next.
/// Clones of the layers join one new chain (DeviceSekvMemory::clone).
struct SekvPrefetchChain {
    std::vector<DeviceSekvMemory*> members;        ///< by chain index; nullptr once gone
    int next_index = 0;                            ///< one past the highest index ever joined
    std::weak_ptr<SekvPrefetchChain> clone_target; ///< the chain the latest clones join
};

class DeviceSekvMemory final : public DeviceLayerMemory {
public:
    /// As SekvMemory's constructor (the same checks), with the fast tier on the device of
    /// `context`. Throws std::invalid_argument as SekvMemory and for the oracle router and
    /// two-stage routing (their scores read spans' key factors on the host, which the device
    /// memory does not keep there),
    /// CudaError when the device has no room.
    DeviceSekvMemory(const AttentionShape& shape, int64_t capacity, const RopeFrequencies& rope,
                     const SekvOptions& options, const DeviceSekvOptions& device_options,
                     std::shared_ptr<Context> context);
    ~DeviceSekvMemory() override;
    DeviceSekvMemory(const DeviceSekvMemory&) = delete;
    DeviceSekvMemory& operator=(const DeviceSekvMemory&) = delete;

    std::string_view policy() const override {
        return options_.summaries_only ? "chunk_summary" : "sekv";
    }
    const AttentionShape& shape() const override { return shape_; }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override;
    /// As SekvMemory::read_rows (std::logic_error for a range with a span in it).
    int64_t read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                      std::vector<float>& v, std::vector<int32_t>& pos) const override;
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override;
    /// Device bytes: fast_tier_bytes the f16 rows and positions plus the summary rows (fp32)
    /// with begin, size and log|S|; host_tier_bytes the packed factors (pinned); full_kv_bytes
    /// what DeviceKvMemory `full` holds for the same tokens (f16); cache_bytes the factor
    /// cache; the cache's counters (fetches, hits, prefetches, evictions).
    MemoryStats stats() const override;
    int64_t n_tokens() const override { return n_stored_; }
    /// A copy with its own device rows, summaries and pinned factors and an empty cache. The
    /// layers of a chain cloned in layer order (ModelMemory::clone) form a new chain; a clone
    /// whose index does not come after the last one's starts another.
    std::unique_ptr<LayerMemory> clone() const override;
    void clear() override;
    bool seals() const override { return true; }
    bool needs_segmentation() const override { return true; }
    /// As SekvMemory::seal: the rows come back from the device once to be factored on the host.
    void seal(const SealRequest& request) override;
    const std::vector<ZoomHead>* last_zoom() const override { return &last_zoom_; }
    /// As SekvMemory::hold_spans.
    void hold_spans(std::vector<SekvSpan> spans, int32_t delta);

    void store_device(const float* dk, const float* dv, const int32_t* dpos, const int32_t* pos,
                      int64_t n) override;
    void attend_device(const float* dq, const int32_t* dqpos, const int32_t* qpos, int64_t n_q,
                       float* dout, ThreadPool& pool) override;

    /// Start copying the factors of the spans beginning at `begins` (those this memory holds
    /// and does not cache, as many as the cache holds) into the cache, on the copy stream.
    /// Returns once the copies are queued; the first prefetch into an empty cache allocates it
    /// (and waits for the device). Nothing with synchronous fetches. Throws CudaError.
    void prefetch(const std::vector<int32_t>& begins);
    /// Put this memory at `index` of `chain`, leaving the chain it was in. Throws
    /// std::invalid_argument for no chain or a negative index, std::logic_error when another
    /// memory holds the index.
    void join(std::shared_ptr<SekvPrefetchChain> chain, int index);
    /// τ per query head; empty until calibrated, and stays empty with router.tau_per_query
    /// (τ is then calibrated at each query and not kept).
    const std::vector<double>& tau() const { return tau_; }
    const std::vector<SekvSpan>& spans() const { return spans_; }

private:
    /// The constructor with the rows (nullptr: new empty ones).
    DeviceSekvMemory(const AttentionShape& shape, int64_t capacity, const RopeFrequencies& rope,
                     const SekvOptions& options, const DeviceSekvOptions& device_options,
                     std::shared_ptr<Context> context, std::unique_ptr<DeviceKvMemory> rows);
    /// Where a held span's packed factors are in host_factors_.
    struct HostFactors {
        int64_t offset = 0, floats = 0;
        std::vector<PackedHeadFactors> heads;
    };
    /// Hold `spans` moved by delta (rows: the rows held at full resolution, from the device);
    /// drop_factors: keep no host tier (chunk_summary's seal).
    void hold(std::vector<SekvSpan> spans, int32_t delta, RowStore rows, bool drop_factors,
              bool sketched);
    RowStore download_rows() const;
    /// Throws std::length_error past the capacity, std::invalid_argument for positions not
    /// after the last span (store and store_device).
    void check_store(const int32_t* pos, int64_t n) const;
    void upload_summaries();
    void ensure_cache(int64_t spans_at_once);
    int span_at(int32_t begin) const;
    /// Copy span s's factors into cache slot `slot`, on the copy stream (async) or the compute
    /// stream.
    void fetch(int s, int slot, bool async);
    DeviceSekvMemory* next_in_chain() const;

    AttentionShape shape_;
    int64_t capacity_;
    RopeFrequencies rope_;
    SekvOptions options_;
    DeviceSekvOptions device_options_;
    std::shared_ptr<Context> ctx_;
    std::unique_ptr<DeviceKvMemory> rows_; ///< the rows at full resolution, on the device
    int64_t n_stored_ = 0;
    std::vector<SekvSpan> spans_; ///< ascending; summaries kept, factors moved to host_factors_
    std::vector<HostFactors> factors_; ///< [spans_]
    PinnedBuffer<float> host_factors_;
    int64_t host_used_ = 0; ///< floats of host_factors_ in use
    DeviceBuffer<float> summary_k_, summary_v_, log_size_;
    // The cache of span factors: arena_slot_floats_ floats per slot in arena_.
    SpanFactorCache cache_;
    int64_t slot_floats_ = 0;       ///< the largest packed span held
    int64_t arena_slot_floats_ = 0; ///< the slot size arena_ was laid out with
    DeviceBuffer<float> arena_;
    std::vector<Event> slot_ready_; ///< per slot: its copy landed
    Event compute_done_;            ///< the last attention call's kernels
    std::vector<double> tau_;
    std::vector<ZoomHead> last_zoom_;
    std::shared_ptr<SekvPrefetchChain> chain_;
    int chain_index_ = -1;
    // Per attention call.
    PinnedBuffer<float> q_host_;
    PinnedBuffer<uint8_t> expanded_host_;
    PinnedBuffer<ReconstructJob> jobs_host_;
    PinnedBuffer<int32_t> rec_span_host_;
    DeviceBuffer<uint8_t> expanded_;
    DeviceBuffer<ReconstructJob> jobs_;
    DeviceBuffer<int32_t> rec_span_;
    DeviceBuffer<float> rec_k_, rec_v_;
    mutable DeviceBuffer<float> stage_q_, stage_out_;
    mutable DeviceBuffer<int32_t> stage_pos_;
};

} // namespace spanscope::cuda
