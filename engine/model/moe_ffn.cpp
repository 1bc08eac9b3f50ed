#include "engine/model/moe_ffn.h"

#include "engine/kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace spanscope {

void moe_ffn(const MoeWeights& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
    const int64_t E = w.n_embd, F = w.n_ff_expert;
    if (w.n_used < 1 || w.n_used > w.n_expert || w.router.rows != w.n_expert ||
        w.router.cols != E || static_cast<int64_t>(w.gate.size()) != w.n_expert ||
        static_cast<int64_t>(w.up.size()) != w.n_expert ||
        static_cast<int64_t>(w.down.size()) != w.n_expert)
        throw std::invalid_argument("moe_ffn: the router and experts do not fit");
    std::fill(y, y + n * E, 0.0f);
    std::vector<float> probs(static_cast<size_t>(n * w.n_expert));
    matmul(w.router, x, n, probs.data(), pool);
    // Tokens routed to each expert, with their weights.
    std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<size_t>(w.n_expert));
    std::vector<int64_t> order(static_cast<size_t>(w.n_expert));
    for (int64_t t = 0; t < n; ++t) {
        float* p = probs.data() + t * w.n_expert;
        const float mx = *std::max_element(p, p + w.n_expert);
        double sum = 0.0;
        for (int64_t e = 0; e < w.n_expert; ++e)
            sum += p[e] = std::exp(p[e] - mx);
        for (int64_t e = 0; e < w.n_expert; ++e)
            p[e] = static_cast<float>(p[e] / sum);
        std::iota(order.begin(), order.end(), int64_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        float wsum = 0.0f;
        for (int64_t j = 0; j < w.n_used; ++j)
            wsum += p[order[static_cast<size_t>(j)]];
        wsum = std::max(wsum, 6.103515625e-5f);
        for (int64_t j = 0; j < w.n_used; ++j) {
            const int64_t e = order[static_cast<size_t>(j)];
            routed[static_cast<size_t>(e)].emplace_back(t, p[e] / wsum);
        }
    }
    std::vector<float> xs, g, u, d;
    for (int64_t e = 0; e < w.n_expert; ++e) {
        const auto& r = routed[static_cast<size_t>(e)];
        if (r.empty())
            continue;
        const auto m = static_cast<int64_t>(r.size());
        xs.resize(static_cast<size_t>(m * E));
        g.resize(static_cast<size_t>(m * F));
        u.resize(g.size());
        d.resize(xs.size());
        for (int64_t i = 0; i < m; ++i)
            std::copy(x + r[i].first * E, x + (r[i].first + 1) * E, xs.begin() + i * E);
        matmul(w.gate[static_cast<size_t>(e)], xs.data(), m, g.data(), pool);
        matmul(w.up[static_cast<size_t>(e)], xs.data(), m, u.data(), pool);
        swiglu(g.data(), u.data(), m * F);
        matmul(w.down[static_cast<size_t>(e)], g.data(), m, d.data(), pool);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t c = 0; c < E; ++c)
                y[r[i].first * E + c] += r[i].second * d[i * E + c];
    }
    if (w.n_ff_shared == 0)
        return;
    const int64_t S = w.n_ff_shared;
    g.resize(static_cast<size_t>(n * S));
    u.resize(g.size());
    d.resize(static_cast<size_t>(n * E));
    matmul(w.shared_gate, x, n, g.data(), pool);
    matmul(w.shared_up, x, n, u.data(), pool);
    swiglu(g.data(), u.data(), n * S);
    matmul(w.shared_down, g.data(), n, d.data(), pool);
    for (int64_t t = 0; t < n; ++t) {
        float gate = 1.0f;
        if (w.shared_router) {
            double acc = 0.0;
            for (int64_t c = 0; c < E; ++c)
                acc += double(w.shared_router[c]) * x[t * E + c];
            gate = 1.0f / (1.0f + std::exp(-static_cast<float>(acc)));
        }
        for (int64_t c = 0; c < E; ++c)
            y[t * E + c] += gate * d[t * E + c];
    }
}

} // namespace spanscope
