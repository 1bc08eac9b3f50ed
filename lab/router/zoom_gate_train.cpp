#include "lab/router/zoom_gate_train.h"

#include <algorithm>

namespace spanscope {

GateRun run_gate(const RankGateMlp& gate, const SpanFactors& f, const float* summary_k) {
    GateRun r;
    r.x = rank_gate_input(gate, f.sigma2, summary_k);
    r.m = rank_gate_forward(gate, r.x.data(), &r.hidden);
    r.n_avail = std::min(f.rank, gate.n_rank);
    r.rank_hard = rank_gate_rank(r.m, r.n_avail); // in [1, max(1, n_avail)]
    return r;
}

// Backward of the gate MLP: dm [n_rank] -> gradients of w1, b1, w2, b2 (accumulated).
void gate_backward(const RankGateMlp& gate, const GateRun& r, const std::vector<double>& dm,
                   RankGateMlp& g) {
    const int R = gate.n_rank, Hd = gate.n_hidden, I = gate.n_in();
    std::vector<double> dh(static_cast<size_t>(Hd), 0.0);
    for (int o = 0; o < R; ++o) {
        const double m = r.m[static_cast<size_t>(o)];
        const double dpre = dm[static_cast<size_t>(o)] * m * (1.0 - m);
        if (dpre == 0.0)
            continue;
        g.b2[static_cast<size_t>(o)] += static_cast<float>(dpre);
        for (int j = 0; j < Hd; ++j) {
            g.w2[static_cast<size_t>(o * Hd + j)] +=
                static_cast<float>(dpre * r.hidden[static_cast<size_t>(j)]);
            dh[static_cast<size_t>(j)] += dpre * gate.w2[static_cast<size_t>(o * Hd + j)];
        }
    }
    for (int j = 0; j < Hd; ++j) {
        const double h = r.hidden[static_cast<size_t>(j)];
        const double dpre = dh[static_cast<size_t>(j)] * (1.0 - h * h);
        if (dpre == 0.0)
            continue;
        g.b1[static_cast<size_t>(j)] += static_cast<float>(dpre);
        float* row = g.w1.data() + static_cast<size_t>(j) * I;
        for (int i = 0; i < I; ++i)
            row[i] += static_cast<float>(dpre * r.x[static_cast<size_t>(i)]);
    }
}

} // namespace spanscope
