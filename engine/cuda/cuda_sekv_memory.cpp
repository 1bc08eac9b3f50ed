#include "engine/cuda/cuda_sekv_memory.h"

#include "engine/sekv/span_sketch.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spanscope::cuda {

DeviceSekvMemory::DeviceSekvMemory(const AttentionShape& shape, int64_t capacity,
                                   const RopeFrequencies& rope, const SekvOptions& options,
                                   const DeviceSekvOptions& device_options,
                                   std::shared_ptr<Context> context)
    : DeviceSekvMemory(shape, capacity, rope, options, device_options, context, nullptr) {}

DeviceSekvMemory::DeviceSekvMemory(const AttentionShape& shape, int64_t capacity,
                                   const RopeFrequencies& rope, const SekvOptions& options,
                                   const DeviceSekvOptions& device_options,
                                   std::shared_ptr<Context> context,
                                   std::unique_ptr<DeviceKvMemory> rows)
    : shape_(shape), capacity_(capacity), rope_(rope), options_(options),
      device_options_(device_options), ctx_(std::move(context)), rows_(std::move(rows)) {
    if (shape.window > 0)
        throw std::invalid_argument("sekv serves global-attention layers; a sliding-window layer "
                                    "keeps its exact ring buffer");
    check_router_options(options.router, shape);
    if (options.router.oracle) // it scores every span's factors at every query; this memory
        // fetches only the expanded spans' factors to the device
        throw std::invalid_argument("the oracle router scores every span's factors at every "
                                    "query, which the GPU memory does not: run it with the cpu "
                                    "backend (--backend cpu)");
    if (options.router.rerank > 0) // the candidates' key factors are read on the host
        throw std::invalid_argument("two-stage routing (rerank) scores the candidates' key "
                                    "factors on the host, which the GPU memory does not: run it "
                                    "with the cpu backend (--backend cpu)");
    if (device_options.cache_bytes < 0)
        throw std::invalid_argument("sekv on the GPU: negative cache size");
    if (!rows_)
        rows_ = std::make_unique<DeviceKvMemory>(shape, capacity, 1, ctx_);
}

DeviceSekvMemory::~DeviceSekvMemory() {
    // Copies queued on the copy stream read host_factors_ and write arena_.
    cudaStreamSynchronize(ctx_->copy_stream());
    cudaStreamSynchronize(ctx_->stream());
    if (chain_ && chain_index_ >= 0 && static_cast<size_t>(chain_index_) < chain_->members.size())
        chain_->members[static_cast<size_t>(chain_index_)] = nullptr;
}

void DeviceSekvMemory::join(std::shared_ptr<SekvPrefetchChain> chain, int index) {
    if (!chain || index < 0)
        throw std::invalid_argument("prefetch chain: no chain or a negative index");
    auto& m = chain->members;
    if (static_cast<size_t>(index) < m.size() && m[static_cast<size_t>(index)] &&
        m[static_cast<size_t>(index)] != this)
        throw std::logic_error("prefetch chain: index " + std::to_string(index) + " is taken");
    if (chain_ && static_cast<size_t>(chain_index_) < chain_->members.size() &&
        chain_->members[static_cast<size_t>(chain_index_)] == this)
        chain_->members[static_cast<size_t>(chain_index_)] = nullptr; // leave the old chain
    if (m.size() <= static_cast<size_t>(index))
        m.resize(static_cast<size_t>(index) + 1, nullptr);
    m[static_cast<size_t>(index)] = this;
    chain->next_index = std::max(chain->next_index, index + 1);
    chain_ = std::move(chain);
    chain_index_ = index;
}

DeviceSekvMemory* DeviceSekvMemory::next_in_chain() const {
    if (!chain_)
        return nullptr;
    for (size_t i = static_cast<size_t>(chain_index_) + 1; i < chain_->members.size(); ++i)
        if (chain_->members[i])
            return chain_->members[i];
    return nullptr;
}

void DeviceSekvMemory::check_store(const int32_t* pos, int64_t n) const {
    if (n_stored_ + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_stored_ + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    if (n > 0 && !spans_.empty() && pos[0] < spans_.back().end())
        throw std::invalid_argument("positions must increase");
}

void DeviceSekvMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    check_store(pos, n);
    rows_->store(k, v, pos, n);
    n_stored_ += n;
}

void DeviceSekvMemory::store_device(const float* dk, const float* dv, const int32_t* dpos,
                                    const int32_t* pos, int64_t n) {
    check_store(pos, n);
    rows_->store_device(dk, dv, dpos, pos, n);
    n_stored_ += n;
}

int64_t DeviceSekvMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                    std::vector<float>& v, std::vector<int32_t>& pos) const {
    check_rows_outside_spans(spans_, pos_begin, pos_end);
    return rows_->read_rows(pos_begin, pos_end, k, v, pos);
}

RowStore DeviceSekvMemory::download_rows() const {
    std::vector<float> k, v;
    std::vector<int32_t> pos;
    const int64_t n = rows_->read_rows(INT32_MIN, INT32_MAX, k, v, pos);
    RowStore rows(static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim);
    rows.append(k.data(), v.data(), pos.data(), n); // f16 values already: unchanged
    return rows;
}

void DeviceSekvMemory::seal(const SealRequest& request) {
    RowStore rows = download_rows();
    auto spans = seal_spans(rows, request, shape_, rope_, options_);
    hold(std::move(spans), 0, std::move(rows), options_.summaries_only, true);
}

void DeviceSekvMemory::hold_spans(std::vector<SekvSpan> spans, int32_t delta) {
    hold(std::move(spans), delta, download_rows(), false, false);
}

void DeviceSekvMemory::hold(std::vector<SekvSpan> spans, int32_t delta, RowStore rows,
                            bool drop_factors, bool sketched) {
    check_spans(spans, shape_);
    for (auto& s : spans)
        move_span(s, delta, rope_);
    // As SekvMemory (chunk_summary, which drops the factors, has no trained router).
    set_span_sketches(spans, options_.router, shape_.head_dim, sketched);
    drop_span_rows(rows, spans); // they leave the fast tier
    // No copy may read the pinned factors while they move (grow), nor the rows.
    cuda_check(cudaStreamSynchronize(ctx_->copy_stream()), "sekv hold: copies");
    ctx_->sync();

    // Host work first: the factors go to the host tier, packed (the host's SpanFactors are
    // freed). A failure here leaves the memory as it was.
    int64_t add = 0;
    if (!drop_factors)
        for (const auto& s : spans)
            add += packed_factor_floats(s);
    if (host_used_ + add > static_cast<int64_t>(host_factors_.size()))
        host_factors_.grow(static_cast<size_t>(
            std::max(host_used_ + add, 2 * static_cast<int64_t>(host_factors_.size()))));
    std::vector<HostFactors> held(spans.size());
    int64_t at = host_used_, largest = slot_floats_;
    for (size_t i = 0; i < spans.size(); ++i) {
        auto& s = spans[i];
        if (!drop_factors) {
            held[i].offset = at;
            held[i].floats = packed_factor_floats(s);
            held[i].heads = pack_span_factors(s, host_factors_.data() + at);
            at += held[i].floats;
            largest = std::max(largest, held[i].floats);
        }
        s.k.clear();
        s.v.clear();
    }
    std::vector<SekvSpan> all_spans = spans_;
    std::vector<HostFactors> all_factors = factors_;
    for (size_t i = 0; i < spans.size(); ++i) {
        all_spans.push_back(std::move(spans[i]));
        all_factors.push_back(std::move(held[i]));
    }
    // Both lists in position order, together.
    std::vector<size_t> order(all_spans.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return all_spans[a].begin < all_spans[b].begin; });
    std::vector<SekvSpan> sorted_spans;
    std::vector<HostFactors> sorted_factors;
    for (const size_t i : order) {
        sorted_spans.push_back(std::move(all_spans[i]));
        sorted_factors.push_back(std::move(all_factors[i]));
    }

    // Then the device: the remaining rows, the summaries. A CUDA failure past this point
    // leaves a memory to clear().
    rows_->clear();
    if (rows.size() > 0)
        rows_->store(rows.k(), rows.v(), rows.positions().data(), rows.size());
    spans_ = std::move(sorted_spans);
    factors_ = std::move(sorted_factors);
    host_used_ = at;
    slot_floats_ = largest;
    upload_summaries();
    tau_.clear();
}

void DeviceSekvMemory::upload_summaries() {
    const int64_t width = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    const auto n = spans_.size();
    std::vector<float> sk(n * static_cast<size_t>(width)), sv(sk.size()), ls(n);
    for (size_t s = 0; s < n; ++s) {
        std::copy(spans_[s].summary_k.begin(), spans_[s].summary_k.end(),
                  sk.begin() + static_cast<int64_t>(s) * width);
        std::copy(spans_[s].summary_v.begin(), spans_[s].summary_v.end(),
                  sv.begin() + static_cast<int64_t>(s) * width);
        ls[s] = static_cast<float>(std::log(static_cast<double>(spans_[s].size)));
    }
    summary_k_.resize(sk.size());
    summary_v_.resize(sv.size());
    log_size_.resize(ls.size());
    if (n == 0)
        return;
    summary_k_.upload(sk.data(), sk.size());
    summary_v_.upload(sv.data(), sv.size());
    log_size_.upload(ls.data(), ls.size());
}

void DeviceSekvMemory::ensure_cache(int64_t spans_at_once) {
    if (slot_floats_ == 0)
        return;
    if (arena_slot_floats_ == slot_floats_ && cache_.slots() > 0 && cache_.slots() >= spans_at_once)
        return;
    const int64_t slot_bytes = slot_floats_ * static_cast<int64_t>(sizeof(float));
    // No more slots than spans held (a cache larger than the host tier holds nothing more).
    const int64_t budget =
        std::min(device_options_.cache_bytes / slot_bytes, static_cast<int64_t>(spans_.size()));
    const int64_t slots = std::max({spans_at_once, budget, int64_t{1}});
    // A new arena (DeviceBuffer::resize waits for the device before it reallocates).
    cuda_check(cudaStreamSynchronize(ctx_->copy_stream()), "sekv cache: copies");
    ctx_->sync();
    arena_.resize(static_cast<size_t>(slots * slot_floats_));
    arena_slot_floats_ = slot_floats_;
    cache_.reset(static_cast<int>(slots));
    slot_ready_.clear();
    slot_ready_.resize(static_cast<size_t>(slots));
}

int DeviceSekvMemory::span_at(int32_t begin) const {
    const auto it = std::lower_bound(spans_.begin(), spans_.end(), begin,
                                     [](const SekvSpan& s, int32_t b) { return s.begin < b; });
    return it != spans_.end() && it->begin == begin ? static_cast<int>(it - spans_.begin()) : -1;
}

void DeviceSekvMemory::fetch(int s, int slot, bool async) {
    const auto& f = factors_[static_cast<size_t>(s)];
    float* dst = arena_.data() + static_cast<int64_t>(slot) * arena_slot_floats_;
    const float* src = host_factors_.data() + f.offset;
    const size_t bytes = static_cast<size_t>(f.floats) * sizeof(float);
    if (!async) {
        cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_->stream()),
                   "span factors to device");
        return;
    }
    // The slot may have held a span the last attention call's kernels still read.
    compute_done_.wait_in(ctx_->copy_stream());
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx_->copy_stream()),
               "span factors to device (async)");
    slot_ready_[static_cast<size_t>(slot)].record(ctx_->copy_stream());
}

void DeviceSekvMemory::prefetch(const std::vector<int32_t>& begins) {
    if (!device_options_.async_fetch || options_.summaries_only || slot_floats_ == 0)
        return;
    std::vector<int32_t> keys;
    std::vector<int> index;
    for (const int32_t b : begins) {
        const int s = span_at(b);
        if (s >= 0 && factors_[static_cast<size_t>(s)].floats > 0) {
            keys.push_back(b);
            index.push_back(s);
        }
    }
    if (keys.empty())
        return;
    if (arena_.size() == 0 || arena_slot_floats_ != slot_floats_)
        ensure_cache(static_cast<int64_t>(keys.size()));
    for (const auto& [i, slot] : cache_.prefetch(keys))
        fetch(index[i], slot, true);
}

void DeviceSekvMemory::attend_device(const float* dq, const int32_t* dqpos, const int32_t* qpos,
                                     int64_t n_q, float* dout, ThreadPool& pool) {
    const int H = shape_.n_head, d = shape_.head_dim;
    last_zoom_.assign(static_cast<size_t>(H), ZoomHead{});
    if (n_q < 1)
        return;
    if (spans_.empty()) {
        rows_->attend_device(dq, dqpos, qpos, n_q, dout, pool);
        return;
    }
    if (qpos[0] < spans_.back().end())
        throw std::logic_error("sekv memory: a query at position " + std::to_string(qpos[0]) +
                               " precedes the end of a span held at two resolutions");
    const auto cs = ctx_->stream();
    const int64_t qn = n_q * H * d;
    // The router reads the queries on the host. The wait also ends the last call's uploads
    // from the pinned staging rewritten below.
    q_host_.grow(static_cast<size_t>(qn));
    cuda_check(cudaMemcpyAsync(q_host_.data(), dq, static_cast<size_t>(qn) * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "queries to the router");
    ctx_->sync();
    const bool all = options_.router.expand_all && !options_.summaries_only;
    if (tau_.empty() && !all && !options_.summaries_only && !options_.router.tau_per_query)
        tau_ = calibrate_router(shape_, options_.router, spans_, q_host_.data(), n_q);
    const auto routing = route_queries(shape_, options_.router, options_.summaries_only, spans_,
                                       tau_, q_host_.data(), n_q, pool);
    last_zoom_ = last_query_zoom(routing, n_q, H);

    const auto n_spans = static_cast<int64_t>(spans_.size());
    const auto nt = static_cast<size_t>(n_q * H);
    expanded_host_.grow(nt * static_cast<size_t>(n_spans));
    std::fill(expanded_host_.data(), expanded_host_.data() + nt * n_spans, uint8_t{0});
    std::vector<char> in_union(static_cast<size_t>(n_spans), 0);
    for (size_t t = 0; t < nt; ++t)
        for (const int s : routing.used[t]) {
            expanded_host_.data()[t * n_spans + s] = 1;
            in_union[static_cast<size_t>(s)] = 1;
        }
    std::vector<int> U;
    std::vector<int32_t> keys;
    for (int s = 0; s < static_cast<int>(n_spans); ++s)
        if (in_union[static_cast<size_t>(s)]) {
            U.push_back(s);
            keys.push_back(spans_[static_cast<size_t>(s)].begin);
        }

    int64_t n_rec = 0;
    if (!U.empty()) {
        ensure_cache(static_cast<int64_t>(U.size()));
        const bool async = device_options_.async_fetch;
        const auto placed = cache_.acquire(keys);
        try {
            for (size_t u = 0; u < U.size(); ++u)
                if (placed[u].fetch)
                    fetch(U[u], placed[u].slot, async);
        } catch (...) {
            cache_.reset(cache_.slots()); // a slot the cache counts as filled may not be
            throw;
        }
        if (async) // hits too: a prefetch may still be on its way
            for (const auto& p : placed)
                slot_ready_[static_cast<size_t>(p.slot)].wait_in(cs);
        const int n_kv = shape_.n_kv_head;
        jobs_host_.grow(U.size() * static_cast<size_t>(n_kv));
        int64_t total = 0;
        for (const int s : U)
            total += spans_[static_cast<size_t>(s)].size;
        rec_span_host_.grow(static_cast<size_t>(total));
        int max_size = 0;
        for (size_t u = 0; u < U.size(); ++u) {
            const auto& sp = spans_[static_cast<size_t>(U[u])];
            const auto& f = factors_[static_cast<size_t>(U[u])];
            const int64_t base = static_cast<int64_t>(placed[u].slot) * arena_slot_floats_;
            for (int g = 0; g < n_kv; ++g) {
                const auto& h = f.heads[static_cast<size_t>(g)];
                auto& J = jobs_host_.data()[u * n_kv + g];
                J = ReconstructJob{base + h.left_k,
                                   base + h.right_k,
                                   base + h.left_v,
                                   base + h.right_v,
                                   n_rec,
                                   static_cast<int32_t>(sp.size),
                                   h.rank_k,
                                   h.rank_v,
                                   g};
            }
            std::fill(rec_span_host_.data() + n_rec, rec_span_host_.data() + n_rec + sp.size,
                      static_cast<int32_t>(U[u]));
            n_rec += sp.size;
            max_size = std::max(max_size, static_cast<int>(sp.size));
        }
        const auto n_jobs = U.size() * static_cast<size_t>(n_kv);
        jobs_.resize(n_jobs);
        rec_span_.resize(static_cast<size_t>(n_rec));
        const int64_t width = static_cast<int64_t>(n_kv) * d;
        rec_k_.resize(static_cast<size_t>(n_rec * width));
        rec_v_.resize(static_cast<size_t>(n_rec * width));
        cuda_check(cudaMemcpyAsync(jobs_.data(), jobs_host_.data(), n_jobs * sizeof(ReconstructJob),
                                   cudaMemcpyHostToDevice, cs),
                   "reconstruct jobs to device");
        cuda_check(cudaMemcpyAsync(rec_span_.data(), rec_span_host_.data(),
                                   static_cast<size_t>(n_rec) * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, cs),
                   "reconstructed rows' spans to device");
        reconstruct_spans(arena_.data(), jobs_.data(), static_cast<int>(n_jobs), max_size, n_kv, d,
                          rec_k_.data(), rec_v_.data(), cs);
    }
    expanded_.resize(nt * static_cast<size_t>(n_spans));
    cuda_check(cudaMemcpyAsync(expanded_.data(), expanded_host_.data(), nt * n_spans,
                               cudaMemcpyHostToDevice, cs),
               "expansions to device");
    MixedKeys K;
    K.k = rows_->device_k();
    K.v = rows_->device_v();
    K.kpos = rows_->device_pos();
    K.n_full = rows_->n_rows();
    K.summary_k = summary_k_.data();
    K.summary_v = summary_v_.data();
    K.log_size = log_size_.data();
    K.n_spans = n_spans;
    K.expanded = expanded_.data();
    K.rec_k = rec_k_.data();
    K.rec_v = rec_v_.data();
    K.rec_span = rec_span_.data();
    K.n_rec = n_rec;
    mixed_attention(shape_, dq, dqpos, n_q, K, dout, cs);
    compute_done_.record(cs);
    // The next SEKV layer will likely want the same spans: its copies start now, while the
    // layers between run.
    if (device_options_.async_fetch && !keys.empty())
        if (auto* next = next_in_chain())
            next->prefetch(keys);
}

void DeviceSekvMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                              ThreadPool& pool) {
    const auto cs = ctx_->stream();
    const int64_t qw = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
    stage_q_.resize(static_cast<size_t>(n_q * qw));
    stage_out_.resize(static_cast<size_t>(n_q * qw));
    stage_pos_.resize(static_cast<size_t>(n_q));
    cuda_check(cudaMemcpyAsync(stage_q_.data(), q, static_cast<size_t>(n_q * qw) * sizeof(float),
                               cudaMemcpyHostToDevice, cs),
               "attend q");
    cuda_check(cudaMemcpyAsync(stage_pos_.data(), qpos, static_cast<size_t>(n_q) * sizeof(int32_t),
                               cudaMemcpyHostToDevice, cs),
               "attend qpos");
    attend_device(stage_q_.data(), stage_pos_.data(), qpos, n_q, stage_out_.data(), pool);
    cuda_check(cudaMemcpyAsync(out, stage_out_.data(),
                               static_cast<size_t>(n_q * qw) * sizeof(float),
                               cudaMemcpyDeviceToHost, cs),
               "attend out");
    ctx_->sync();
}

MemoryStats DeviceSekvMemory::stats() const {
    const int64_t width = static_cast<int64_t>(shape_.n_kv_head) * shape_.head_dim;
    const auto rows = rows_->stats();
    const auto n_spans = static_cast<int64_t>(spans_.size());
    MemoryStats s;
    s.rows_resident = rows.rows_resident + n_spans;
    // Per span: summary key and value (fp32) and log|S| on the device, begin and size.
    s.fast_tier_bytes = rows.fast_tier_bytes + n_spans * (2 * width * 4 + 4 + 4 + 8);
    for (const auto& sp : spans_) // a trained router's key sketches (fp32, read by the router)
        s.fast_tier_bytes += static_cast<int64_t>(sp.sketch.size() * sizeof(float));
    s.host_tier_bytes = host_used_ * static_cast<int64_t>(sizeof(float));
    s.full_kv_bytes = n_stored_ * (2 * width * 2 + 4);
    s.spans = n_spans;
    s.cache_bytes = static_cast<int64_t>(arena_.bytes());
    const auto& c = cache_.counters();
    s.factor_fetches = c.misses;
    s.factor_hits = c.hits;
    s.factor_prefetches = c.prefetches;
    s.factor_evictions = c.evictions;
    return s;
}

std::unique_ptr<LayerMemory> DeviceSekvMemory::clone() const {
    std::unique_ptr<DeviceKvMemory> rows(static_cast<DeviceKvMemory*>(rows_->clone().release()));
    std::unique_ptr<DeviceSekvMemory> c(new DeviceSekvMemory(
        shape_, capacity_, rope_, options_, device_options_, ctx_, std::move(rows)));
    c->n_stored_ = n_stored_;
    c->spans_ = spans_;
    c->factors_ = factors_;
    c->host_factors_.grow(static_cast<size_t>(host_used_));
    std::copy(host_factors_.data(), host_factors_.data() + host_used_, c->host_factors_.data());
    c->host_used_ = host_used_;
    c->slot_floats_ = slot_floats_;
    c->upload_summaries();
    c->tau_ = tau_;
    c->last_zoom_ = last_zoom_;
    if (chain_) {
        // ModelMemory::clone clones the layers in layer order: a clone joins the chain the
        // clones before it started when its index comes after theirs, else starts a new one
        // (a second clone of the same memory, or layers cloned out of order).
        auto target = chain_->clone_target.lock();
        if (!target || chain_index_ < target->next_index) {
            target = std::make_shared<SekvPrefetchChain>();
            chain_->clone_target = target;
        }
        c->join(target, chain_index_);
    }
    return c;
}

void DeviceSekvMemory::clear() {
    cudaStreamSynchronize(ctx_->copy_stream());
    ctx_->sync();
    rows_->clear();
    n_stored_ = 0;
    spans_.clear();
    factors_.clear();
    host_used_ = 0;
    cache_.clear();
    tau_.clear();
    last_zoom_.clear();
}

} // namespace spanscope::cuda
