#include "engine/sekv/sekv_spans.h"

#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {
// Keep the first `rank` components of f.
void truncate(SpanFactors& f, int rank) {
    if (rank >= f.rank)
        return;
    std::vector<uint16_t> left(static_cast<size_t>(f.rows * rank));
    for (int64_t i = 0; i < f.rows; ++i)
        for (int r = 0; r < rank; ++r)
            left[i * rank + r] = f.left[i * f.rank + r];
    f.left = std::move(left);
    f.right.resize(static_cast<size_t>(rank) * row_bytes(f.right_type, f.dim));
    f.rank = rank;
}
} // namespace

int gated_rank(const std::vector<double>& sigma2, const SpanRankOptions& o, const float* summary_k,
               int64_t dim) {
    const int cap = std::min<int>(o.max_rank, static_cast<int>(sigma2.size()));
    if (o.predictor)
        return std::clamp(o.predictor->rank(sigma2, summary_k, dim), 1, std::max(1, cap));
    if (o.energy >= 1.0)
        return std::max(1, cap);
    double total = 0;
    for (const double s : sigma2)
        total += s;
    double kept = 0;
    for (int r = 0; r < cap; ++r) {
        kept += sigma2[static_cast<size_t>(r)];
        if (kept >= o.energy * total)
            return r + 1;
    }
    return std::max(1, cap);
}

std::vector<float> gate_summary_key(const float* summary_k, int64_t dim, int32_t begin,
                                    const RopeFrequencies& rope) {
    std::vector<float> key(summary_k, summary_k + dim);
    if (rope.base > 0 && begin != 0) {
        if (dim % 2 != 0)
            throw std::invalid_argument("gate_summary_key: an odd head dimension cannot be "
                                        "rotated");
        rope_shift_neox(key.data(), 1, 1, static_cast<int>(dim), -begin, rope);
    }
    return key;
}

SekvSpan build_span(const float* k, const float* v, const float* token_surprisal, int64_t n,
                    int n_kv_head, int head_dim, int32_t begin, const SpanRankOptions& o) {
    if (n < 1 || n_kv_head < 1 || head_dim < 1)
        throw std::invalid_argument("build_span: empty span or shape");
    if (o.max_rank < 1 || !(o.energy > 0.0) || o.energy > 1.0)
        throw std::invalid_argument("build_span: rank options out of range (max_rank >= 1, "
                                    "0 < energy <= 1)");
    SekvSpan s;
    s.begin = begin;
    s.size = n;
    const auto d = static_cast<int64_t>(head_dim);
    const auto w = span_weights(token_surprisal, n);
    s.summary_k.resize(static_cast<size_t>(n_kv_head * d));
    s.summary_v.resize(static_cast<size_t>(n_kv_head * d));
    std::vector<float> hk(static_cast<size_t>(n * d)), hv(static_cast<size_t>(n * d));
    for (int g = 0; g < n_kv_head; ++g) {
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < d; ++j) {
                hk[i * d + j] = k[(i * n_kv_head + g) * d + j];
                hv[i * d + j] = v[(i * n_kv_head + g) * d + j];
            }
        summary_row(hk.data(), n, d, w.data(), s.summary_k.data() + g * d);
        summary_row(hv.data(), n, d, w.data(), s.summary_v.data() + g * d);
        // Rounded to f16 like the rows they summarise, so that the project stores them exactly
        // in f16 (storage/sekv_state.h) and a restored span is the one built here.
        for (auto* x : {s.summary_k.data() + g * d, s.summary_v.data() + g * d}) {
            const auto h = to_f16(x, d, "span summary");
            dequantize_row(TensorType::F16, h.data(), x, d);
        }
        auto fk = low_rank_factors(hk.data(), n, d, o.max_rank, o.right_type);
        auto fv = low_rank_factors(hv.data(), n, d, o.max_rank, o.right_type);
        std::vector<float> gate_key;
        if (o.predictor)
            gate_key = gate_summary_key(s.summary_k.data() + g * d, d, begin, o.rope);
        truncate(fk, gated_rank(fk.sigma2, o, gate_key.data(), d));
        truncate(fv, gated_rank(fv.sigma2, o, gate_key.data(), d));
        s.k.push_back(std::move(fk));
        s.v.push_back(std::move(fv));
    }
    return s;
}

void move_span(SekvSpan& s, int32_t delta, const RopeFrequencies& rope) {
    if (delta == 0)
        return;
    const auto n_kv = s.k.size();
    if (n_kv == 0)
        throw std::invalid_argument("move_span: a span without factors (chunk_summary) cannot be "
                                    "moved: its summary key's rotation would be left behind");
    const size_t d = s.summary_k.size() / n_kv;
    for (size_t g = 0; g < n_kv; ++g)
        move_key_span(s.k[g], s.summary_k.data() + g * d, delta, rope);
    s.begin += delta;
    s.sketch.clear();
}

int64_t span_fast_bytes(const SekvSpan& s) {
    return static_cast<int64_t>((s.summary_k.size() + s.summary_v.size() + s.sketch.size()) *
                                    sizeof(float) +
                                sizeof(int32_t) + sizeof(int64_t));
}

int64_t span_host_bytes(const SekvSpan& s) {
    int64_t b = 0;
    for (const auto* fs : {&s.k, &s.v})
        for (const auto& f : *fs)
            b += static_cast<int64_t>(f.left.size() * sizeof(uint16_t) + f.right.size());
    return b;
}

std::vector<float> token_surprisals(const float* row_surprisal, int64_t n) {
    std::vector<float> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
    if (n > 0)
        out[0] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 1; i < n; ++i)
        out[i] = row_surprisal[i - 1];
    return out;
}

Segmentation segment_within_budget(const float* token_surprisal, int64_t n,
                                   const SegmentationOptions& options, double budget,
                                   int64_t reserve_rows, double* alpha_used, bool* met,
                                   double span_rows) {
    if (!std::isfinite(span_rows) || span_rows < 1.0)
        throw std::invalid_argument("segment_within_budget: a span costs at least its summary "
                                    "row, not " +
                                    std::to_string(span_rows) + " rows");
    SegmentationOptions o = options;
    auto fits = [&](const Segmentation& s) {
        const auto rows = static_cast<double>(s.full_resolution.size()) +
                          span_rows * static_cast<double>(s.spans.size()) +
                          static_cast<double>(reserve_rows);
        return rows <= budget * static_cast<double>(n);
    };
    Segmentation s = segment(token_surprisal, n, o);
    if (budget >= 1.0) {
        // A budget that covers the whole context: every token stays at full resolution, so
        // the policy is an exact no-op (tests/README.md, failure mode 12). The anchors are kept for
        // display.
        s.spans.clear();
        s.full_resolution.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            s.full_resolution[static_cast<size_t>(i)] = i;
    }
    bool ok = budget <= 0.0 || budget >= 1.0 || fits(s);
    for (int step = 0; !ok && step < 32; ++step) {
        o.alpha += 0.25;
        s = segment(token_surprisal, n, o);
        ok = fits(s);
    }
    if (!ok) {
        // A context too short for the budget (the tail's reserve alone may exceed it) is not
        // crushed into a few long spans: it stays at full resolution, exact, and reports that it
        // did not meet the budget.
        s.spans.clear();
        s.full_resolution.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
            s.full_resolution[static_cast<size_t>(i)] = i;
    }
    if (alpha_used)
        *alpha_used = o.alpha;
    if (met)
        *met = ok;
    return s;
}

} // namespace spanscope
