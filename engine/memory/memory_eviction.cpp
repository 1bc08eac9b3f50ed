#include "engine/memory/memory_eviction.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spanscope {

std::string_view eviction_rule_name(EvictionRule rule) {
    switch (rule) {
    case EvictionRule::Streaming:
        return "streaming";
    case EvictionRule::HeavyHitters:
        return "h2o";
    case EvictionRule::SnapKV:
        return "snapkv";
    }
    return "?";
}

bool eviction_rule_from_name(std::string_view name, EvictionRule& rule) {
    for (const auto r : {EvictionRule::Streaming, EvictionRule::HeavyHitters, EvictionRule::SnapKV})
        if (eviction_rule_name(r) == name) {
            rule = r;
            return true;
        }
    return false;
}

int64_t eviction_rows_to_keep(const EvictionOptions& o, int64_t n) {
    if (o.budget <= 0 || o.budget >= 1)
        return n;
    const int64_t keep =
        static_cast<int64_t>(std::floor(o.budget * static_cast<double>(n))) - o.reserve_rows;
    if (keep <= o.sinks)
        return n; // too short for the budget: held whole (and reported over it)
    return std::min(keep, n);
}

std::vector<float> max_pool(const float* x, int64_t n, int w) {
    std::vector<float> y(static_cast<size_t>(n));
    const int64_t r = w / 2;
    for (int64_t j = 0; j < n; ++j) {
        float m = x[j];
        for (int64_t i = std::max<int64_t>(0, j - r); i <= std::min(n - 1, j + r); ++i)
            m = std::max(m, x[i]);
        y[static_cast<size_t>(j)] = m;
    }
    return y;
}

std::vector<int64_t> select_rows(EvictionRule rule, const EvictionOptions& o, int64_t n,
                                 int64_t keep, const float* score) {
    if (keep < 1)
        throw std::invalid_argument("eviction: at least one row must be kept");
    std::vector<int64_t> out;
    if (keep >= n) {
        out.resize(static_cast<size_t>(n));
        std::iota(out.begin(), out.end(), int64_t{0});
        return out;
    }
    const int64_t sinks = std::min(o.sinks, keep);
    const int64_t rest = keep - sinks;
    int64_t recent = rest;
    if (rule == EvictionRule::HeavyHitters)
        recent = std::max<int64_t>(
            std::min(o.recent_rows, rest),
            static_cast<int64_t>(std::llround(o.recent_share * static_cast<double>(rest))));
    else if (rule == EvictionRule::SnapKV)
        recent = std::min(std::max(o.observation_window, o.recent_rows), rest);
    const int64_t heavy = rest - recent;
    if (heavy > 0 && !score)
        throw std::invalid_argument("eviction: the rule needs a score per row");
    for (int64_t i = 0; i < sinks; ++i)
        out.push_back(i);
    // Heavy hitters: the best-scored rows between the sinks and the recent window.
    std::vector<int64_t> middle;
    for (int64_t i = sinks; i < n - recent; ++i)
        middle.push_back(i);
    if (heavy > 0) {
        std::stable_sort(middle.begin(), middle.end(),
                         [&](int64_t a, int64_t b) { return score[a] > score[b]; });
        middle.resize(static_cast<size_t>(std::min<int64_t>(heavy, std::ssize(middle))));
        out.insert(out.end(), middle.begin(), middle.end());
    }
    for (int64_t i = n - recent; i < n; ++i)
        out.push_back(i);
    std::sort(out.begin(), out.end());
    return out;
}

EvictionMemory::EvictionMemory(const AttentionShape& shape, int64_t capacity, EvictionRule rule,
                               const EvictionOptions& options)
    : shape_(shape), capacity_(capacity), rule_(rule), options_(options),
      rows_(static_cast<int64_t>(shape.n_kv_head) * shape.head_dim) {
    if (shape.window > 0)
        throw std::invalid_argument(std::string(eviction_rule_name(rule)) +
                                    " serves global-attention layers; a sliding-window layer "
                                    "keeps its exact ring buffer");
    if (options.reserve_rows < 0 || options.sinks < 0 || options.recent_rows < 0 ||
        options.observation_window < 1 || options.pool_kernel < 1 || options.pool_kernel % 2 == 0 ||
        !(options.recent_share >= 0 && options.recent_share <= 1))
        throw std::invalid_argument("eviction: options out of range (reserve, sinks and recent "
                                    "rows >= 0, observation window >= 1, odd pooling kernel, "
                                    "recent share in [0, 1])");
}

void EvictionMemory::store(const float* k, const float* v, const int32_t* pos, int64_t n) {
    if (n_stored_ + n > capacity_)
        throw std::length_error("context full: " + std::to_string(n_stored_ + n) +
                                " tokens exceed the context size of " + std::to_string(capacity_));
    rows_.append(k, v, pos, n);
    mass_.resize(static_cast<size_t>(rows_.size()), 0.0f);
    n_stored_ += n;
}

int64_t EvictionMemory::read_rows(int32_t pos_begin, int32_t pos_end, std::vector<float>& k,
                                  std::vector<float>& v, std::vector<int32_t>& pos) const {
    return rows_.read(pos_begin, pos_end, k, v, pos);
}

void EvictionMemory::attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                            ThreadPool& pool) {
    const int64_t rows = rows_.size();
    if (rule_ != EvictionRule::HeavyHitters) {
        // Only h2o ranks by accumulated attention (one prefill serves every rule when an h2o
        // memory records it, as the evaluation does).
        attention_with_mass(shape_, q, qpos, n_q, rows_.k(), rows_.v(), rows_.positions().data(),
                            rows, out, pool, mass_sink());
    } else {
        std::vector<float> mass(static_cast<size_t>(shape_.n_kv_head * rows), 0.0f);
        attention(shape_, q, qpos, n_q, rows_.k(), rows_.v(), rows_.positions().data(), rows, out,
                  pool, /*keys_sorted=*/true, mass.data());
        for (int g = 0; g < shape_.n_kv_head; ++g)
            for (int64_t j = 0; j < rows; ++j)
                mass_[static_cast<size_t>(j)] += mass[static_cast<size_t>(g * rows + j)];
        // The sink's query: one query's `mass` is its own; in a ubatch `mass` sums them all,
        // so that query is attended once more alone.
        AttentionMass* sink = mass_sink();
        if (sink && n_q == 1 && sink->wants(qpos[0])) {
            const auto& pos = rows_.positions();
            for (int g = 0; g < shape_.n_kv_head; ++g)
                for (int64_t j = 0; j < rows; ++j)
                    sink->add(pos[static_cast<size_t>(j)], mass[static_cast<size_t>(g * rows + j)]);
        } else if (sink)
            for (int64_t i = 0; i < n_q; ++i)
                if (sink->wants(qpos[i])) {
                    const int64_t row = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
                    std::vector<float> discard(static_cast<size_t>(row));
                    attention_with_mass(shape_, q + i * row, qpos + i, 1, rows_.k(), rows_.v(),
                                        rows_.positions().data(), rows, discard.data(), pool, sink);
                }
    }
    // Keep the last observation_window queries (SnapKV's votes are taken at seal()).
    const int64_t q_row = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
    const int64_t w = options_.observation_window;
    const int64_t take = std::min(n_q, w);
    obs_q_.insert(obs_q_.end(), q + (n_q - take) * q_row, q + n_q * q_row);
    obs_pos_.insert(obs_pos_.end(), qpos + (n_q - take), qpos + n_q);
    const int64_t extra = std::ssize(obs_pos_) - w;
    if (extra > 0) {
        obs_q_.erase(obs_q_.begin(), obs_q_.begin() + extra * q_row);
        obs_pos_.erase(obs_pos_.begin(), obs_pos_.begin() + extra);
    }
}

void EvictionMemory::seal(const SealRequest& r) {
    if (r.n < 1)
        throw std::invalid_argument("seal: an empty context");
    const int32_t p_end = r.pos_begin + static_cast<int32_t>(r.n);
    const int64_t b = rows_.lower_bound(r.pos_begin);
    const int64_t e = rows_.lower_bound(p_end);
    if (e - b != r.n)
        throw std::logic_error("seal: rows of positions " + std::to_string(r.pos_begin) + ".." +
                               std::to_string(p_end - 1) + " were evicted before");
    const int64_t keep = eviction_rows_to_keep(options_, r.n);
    if (keep >= r.n)
        return;
    std::vector<float> score;
    if (rule_ == EvictionRule::HeavyHitters) {
        score.assign(mass_.begin() + b, mass_.begin() + e);
    } else if (rule_ == EvictionRule::SnapKV) {
        // Votes: the attention of the context's last queries (those at its end) over its rows.
        const int64_t q_row = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
        std::vector<float> q;
        std::vector<int32_t> qpos;
        for (size_t i = 0; i < obs_pos_.size(); ++i)
            if (obs_pos_[i] >= r.pos_begin && obs_pos_[i] < p_end) {
                q.insert(q.end(), obs_q_.begin() + static_cast<int64_t>(i) * q_row,
                         obs_q_.begin() + static_cast<int64_t>(i + 1) * q_row);
                qpos.push_back(obs_pos_[i]);
            }
        const int64_t rows = rows_.size();
        std::vector<float> votes(static_cast<size_t>(shape_.n_kv_head * rows), 0.0f);
        if (!qpos.empty()) {
            std::vector<float> out(q.size());
            ThreadPool single(1);
            attention(shape_, q.data(), qpos.data(), std::ssize(qpos), rows_.k(), rows_.v(),
                      rows_.positions().data(), rows, out.data(), single, /*keys_sorted=*/true,
                      votes.data());
        }
        // Pooled over the rows before the observation window only (SnapKV's reference slices
        // the window off first), so that its own strong local attention does not spill onto
        // its neighbours; the window is kept anyway.
        const int64_t prefix = std::max<int64_t>(0, r.n - static_cast<int64_t>(qpos.size()));
        std::vector<float> summed(static_cast<size_t>(r.n), 0.0f);
        for (int g = 0; g < shape_.n_kv_head; ++g)
            for (int64_t j = 0; j < r.n; ++j)
                summed[static_cast<size_t>(j)] += votes[static_cast<size_t>(g * rows + b + j)];
        score = max_pool(summed.data(), prefix, options_.pool_kernel);
        score.resize(static_cast<size_t>(r.n), 0.0f);
    }
    const auto kept =
        select_rows(rule_, options_, r.n, keep, score.empty() ? nullptr : score.data());
    std::vector<char> keep_row(static_cast<size_t>(rows_.size()), 1);
    std::fill(keep_row.begin() + b, keep_row.begin() + e, 0);
    for (const int64_t i : kept)
        keep_row[static_cast<size_t>(b + i)] = 1;
    rows_.compact(keep_row);
    size_t w = 0;
    for (size_t i = 0; i < keep_row.size(); ++i)
        if (keep_row[i])
            mass_[w++] = mass_[i];
    mass_.resize(w);
}

MemoryStats EvictionMemory::stats() const {
    MemoryStats s;
    s.rows_resident = rows_.size();
    s.fast_tier_bytes = rows_.bytes();
    s.full_kv_bytes = n_stored_ * rows_.row_bytes();
    return s;
}

std::unique_ptr<LayerMemory> EvictionMemory::clone() const {
    return std::make_unique<EvictionMemory>(*this);
}

std::unique_ptr<EvictionMemory> EvictionMemory::with_rule(EvictionRule rule,
                                                          const EvictionOptions& options) const {
    // Only an h2o memory accumulates attention: another would rank every row alike.
    if (rule == EvictionRule::HeavyHitters && rule_ != EvictionRule::HeavyHitters && n_stored_ > 0)
        throw std::logic_error("h2o needs the accumulated attention that only an h2o memory "
                               "records; this memory is " +
                               std::string(eviction_rule_name(rule_)));
    auto m = std::make_unique<EvictionMemory>(shape_, capacity_, rule, options);
    m->n_stored_ = n_stored_;
    m->rows_ = rows_;
    m->mass_ = mass_;
    m->obs_q_ = obs_q_;
    m->obs_pos_ = obs_pos_;
    if (options.observation_window < std::ssize(m->obs_pos_)) {
        const int64_t extra = std::ssize(m->obs_pos_) - options.observation_window;
        const int64_t q_row = static_cast<int64_t>(shape_.n_head) * shape_.head_dim;
        m->obs_q_.erase(m->obs_q_.begin(), m->obs_q_.begin() + extra * q_row);
        m->obs_pos_.erase(m->obs_pos_.begin(), m->obs_pos_.begin() + extra);
    }
    return m;
}

void EvictionMemory::clear() {
    n_stored_ = 0;
    rows_.clear();
    mass_.clear();
    obs_q_.clear();
    obs_pos_.clear();
}

} // namespace spanscope
