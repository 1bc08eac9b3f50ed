#include "engine/memory/attention_mass.h"

#include <algorithm>

namespace spanscope {

void AttentionMass::reset(int64_t n_positions, int32_t query_pos) {
    query_pos_ = query_pos;
    point_.assign(static_cast<size_t>(std::max<int64_t>(0, n_positions)), 0.0);
    spread_.assign(point_.size() + 1, 0.0);
    total_ = 0;
}

void AttentionMass::add(int32_t pos, double mass) {
    if (pos < 0 || static_cast<size_t>(pos) >= point_.size())
        return;
    point_[static_cast<size_t>(pos)] += mass;
    total_ += mass;
}

void AttentionMass::add_range(int32_t begin, int32_t end, double mass) {
    const int64_t n = static_cast<int64_t>(point_.size());
    const int64_t b = std::clamp<int64_t>(begin, 0, n), e = std::clamp<int64_t>(end, 0, n);
    if (end <= begin || e <= b)
        return;
    // The part of the range inside [0, n) keeps its share of the mass.
    const double density = mass / static_cast<double>(end - begin);
    spread_[static_cast<size_t>(b)] += density;
    spread_[static_cast<size_t>(e)] -= density;
    total_ += density * static_cast<double>(e - b);
}

std::vector<double>
AttentionMass::over_ranges(const std::vector<std::pair<int32_t, int32_t>>& ranges) const {
    // prefix[p] = the mass of positions [0, p).
    std::vector<double> prefix(point_.size() + 1, 0.0);
    double density = 0;
    for (size_t p = 0; p < point_.size(); ++p) {
        density += spread_[p];
        prefix[p + 1] = prefix[p] + point_[p] + density;
    }
    const int64_t n = static_cast<int64_t>(point_.size());
    std::vector<double> out;
    out.reserve(ranges.size());
    for (const auto& [begin, end] : ranges) {
        const auto b = static_cast<size_t>(std::clamp<int64_t>(begin, 0, n));
        const auto e = static_cast<size_t>(std::clamp<int64_t>(end, 0, n));
        out.push_back(e > b ? prefix[e] - prefix[b] : 0.0);
    }
    return out;
}

void attention_with_mass(const AttentionShape& shape, const float* q, const int32_t* qpos,
                         int64_t n_q, const float* k, const float* v, const int32_t* kpos,
                         int64_t n_kv, float* out, ThreadPool& pool, AttentionMass* mass) {
    int64_t at = -1;
    if (mass)
        for (int64_t i = 0; i < n_q; ++i)
            if (mass->wants(qpos[i]))
                at = i;
    if (at < 0) {
        attention(shape, q, qpos, n_q, k, v, kpos, n_kv, out, pool, /*keys_sorted=*/true);
        return;
    }
    std::vector<float> key_mass(static_cast<size_t>(shape.n_kv_head * n_kv), 0.0f);
    if (n_q == 1) {
        attention(shape, q, qpos, n_q, k, v, kpos, n_kv, out, pool, /*keys_sorted=*/true,
                  key_mass.data());
    } else {
        attention(shape, q, qpos, n_q, k, v, kpos, n_kv, out, pool, /*keys_sorted=*/true);
        const int64_t row = static_cast<int64_t>(shape.n_head) * shape.head_dim;
        std::vector<float> discard(static_cast<size_t>(row));
        attention(shape, q + at * row, qpos + at, 1, k, v, kpos, n_kv, discard.data(), pool,
                  /*keys_sorted=*/true, key_mass.data());
    }
    for (int g = 0; g < shape.n_kv_head; ++g)
        for (int64_t j = 0; j < n_kv; ++j)
            mass->add(kpos[j], key_mass[static_cast<size_t>(g * n_kv + j)]);
}

} // namespace spanscope
