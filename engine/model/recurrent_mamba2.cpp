#include "engine/model/recurrent_mamba2.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::invalid_argument("mamba2: " + what);
}

// softplus with the linear branch above 20 (mamba_ssm ops/triton/softplus.py; ggml's ssm_scan).
inline float softplus(float v) {
    return v <= 20.0f ? std::log1p(std::exp(v)) : v;
}

inline float silu(float v) {
    return v / (1.0f + std::exp(-v));
}

void check_matrix(const WeightMatrix& m, const char* name, int64_t rows, int64_t cols) {
    if (m.data == nullptr)
        fail(std::string(name) + " has no data");
    if (m.rows != rows || m.cols != cols)
        fail(std::string(name) + " is " + std::to_string(m.rows) + "x" + std::to_string(m.cols) +
             " (rows x cols), expected " + std::to_string(rows) + "x" + std::to_string(cols));
}

} // namespace

void Mamba2Shape::validate() const {
    auto positive = [](int64_t v, const char* name) {
        if (v <= 0)
            fail(std::string(name) + " must be positive, got " + std::to_string(v));
    };
    positive(d_model, "d_model");
    positive(d_inner, "d_inner");
    positive(d_state, "d_state");
    positive(n_heads, "n_heads");
    positive(head_dim, "head_dim");
    positive(n_groups, "n_groups");
    positive(d_conv, "d_conv");
    positive(chunk_size, "chunk_size");
    if (d_inner != n_heads * head_dim)
        fail("d_inner (" + std::to_string(d_inner) + ") != n_heads * head_dim (" +
             std::to_string(n_heads) + " * " + std::to_string(head_dim) + ")");
    if (n_heads % n_groups != 0)
        fail("n_heads (" + std::to_string(n_heads) + ") is not divisible by n_groups (" +
             std::to_string(n_groups) + ")");
    if (!(rms_eps >= 0.0f) || !std::isfinite(rms_eps))
        fail("rms_eps must be finite and >= 0");
}

Mamba2State::Mamba2State(const Mamba2Shape& shape)
    : ssm(static_cast<size_t>(shape.n_heads * shape.head_dim * shape.d_state), 0.0f),
      conv(static_cast<size_t>(std::max<int64_t>(0, shape.d_conv - 1) * shape.conv_dim()), 0.0f),
      log_decay(static_cast<size_t>(shape.n_heads), 0.0f) {}

void Mamba2State::reset() {
    std::fill(ssm.begin(), ssm.end(), 0.0f);
    std::fill(conv.begin(), conv.end(), 0.0f);
    std::fill(log_decay.begin(), log_decay.end(), 0.0f);
}

void Mamba2State::check(const Mamba2Shape& shape) const {
    const auto want_ssm = static_cast<size_t>(shape.n_heads * shape.head_dim * shape.d_state);
    const auto want_conv = static_cast<size_t>((shape.d_conv - 1) * shape.conv_dim());
    if (ssm.size() != want_ssm)
        fail("state ssm has " + std::to_string(ssm.size()) +
             " floats, expected H*P*N = " + std::to_string(want_ssm));
    if (conv.size() != want_conv)
        fail("state conv tail has " + std::to_string(conv.size()) +
             " floats, expected (d_conv-1)*conv_dim = " + std::to_string(want_conv));
    if (log_decay.size() != static_cast<size_t>(shape.n_heads))
        fail("state log_decay has " + std::to_string(log_decay.size()) +
             " floats, expected H = " + std::to_string(shape.n_heads));
}

Mamba2Layer::Mamba2Layer(const Mamba2Shape& shape, const Mamba2Weights& weights)
    : shape_(shape), w_(weights) {
    shape_.validate();
    check_matrix(w_.in_proj, "in_proj (ssm_in)", shape_.in_proj_dim(), shape_.d_model);
    check_matrix(w_.out_proj, "out_proj (ssm_out)", shape_.d_model, shape_.d_inner);
    if (w_.conv_weight == nullptr)
        fail("conv1d weight (ssm_conv1d) is missing");
    if (w_.dt_bias == nullptr)
        fail("dt_bias (ssm_dt.bias) is missing");
    if (w_.A == nullptr)
        fail("A (ssm_a) is missing");
    if (w_.D == nullptr)
        fail("D (ssm_d) is missing");
    for (int64_t h = 0; h < shape_.n_heads; ++h)
        if (!std::isfinite(w_.A[h]) || w_.A[h] > 0.0f)
            fail("A[" + std::to_string(h) + "] = " + std::to_string(w_.A[h]) +
                 " must be finite and <= 0 (ssm_a stores -exp(A_log), not A_log)");
}

struct Mamba2Layer::Scratch {
    std::vector<float> zxbcdt; // [T][in_proj_dim] straight from in_proj
    std::vector<float> xbc;    // [T][conv_dim] after conv, bias and SiLU
    std::vector<float> dt;     // [T][H] softplus(dt_raw + dt_bias)
    std::vector<float> a;      // [T][H] dt·A (nats, ≤ 0)
    std::vector<float> y;      // [T][d_inner]
};

void Mamba2Layer::project_and_convolve(const float* u, int64_t n_tokens, Scratch& s,
                                       Mamba2State& state, ThreadPool& pool) const {
    const int64_t T = n_tokens, K = shape_.d_conv, cd = shape_.conv_dim(), H = shape_.n_heads;
    const int64_t ip = shape_.in_proj_dim(), di = shape_.d_inner;
    s.zxbcdt.resize(static_cast<size_t>(T * ip));
    s.xbc.resize(static_cast<size_t>(T * cd));
    s.dt.resize(static_cast<size_t>(T * H));
    s.a.resize(static_cast<size_t>(T * H));
    matmul(w_.in_proj, u, T, s.zxbcdt.data(), pool);

    // Raw conv input at token j (j < 0 reads the tail: row K-1+j of the stored inputs).
    auto input = [&](int64_t j, int64_t c) {
        return j >= 0 ? s.zxbcdt[j * ip + di + c] : state.conv[(K - 1 + j) * cd + c];
    };
    // Causal depthwise conv (torch Conv1d, groups = channels, left padding K-1):
    // out[t][c] = bias[c] + Σ_k w[c][k] · in[t - (K-1) + k].
    pool.parallel_for(T, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            float* o = s.xbc.data() + t * cd;
            for (int64_t c = 0; c < cd; ++c) {
                const float* wc = w_.conv_weight + c * K;
                float acc = w_.conv_bias ? w_.conv_bias[c] : 0.0f;
                for (int64_t k = 0; k < K; ++k)
                    acc += wc[k] * input(t - (K - 1) + k, c);
                o[c] = silu(acc);
            }
            const float* dt_raw = s.zxbcdt.data() + t * ip + di + cd;
            for (int64_t h = 0; h < H; ++h) {
                const float dt = softplus(dt_raw[h] + w_.dt_bias[h]);
                s.dt[t * H + h] = dt;
                s.a[t * H + h] = dt * w_.A[h];
            }
        }
    });

    // The new tail: the last K-1 raw inputs of [old tail; this call's tokens].
    if (K > 1) {
        std::vector<float> tail(static_cast<size_t>((K - 1) * cd));
        for (int64_t r = 0; r < K - 1; ++r)
            for (int64_t c = 0; c < cd; ++c)
                tail[r * cd + c] = input(T - (K - 1) + r, c);
        state.conv.swap(tail);
    }
}

// Chunked SSD (Dao & Gu 2024 §6, Listing 1), with the inter-chunk recurrence done by passing the
// state chunk to chunk (the "state passing" step, sequential over chunks). Per head h and chunk
// [t0, t0+L), with cumulative log-decays s_i = Σ_{k≤i} dt_k·A (within the chunk):
//   diagonal block:   y_i  = Σ_{j≤i} exp(s_i − s_j) · (C_i·B_j) · dt_j · x_j
//   output of state:  y_i += exp(s_i) · (S_in · C_i)
//   chunk state:      S_out = exp(s_{L−1}) · S_in + Σ_j exp(s_{L−1} − s_j) · dt_j · x_j ⊗ B_j
// The exponents are ≤ 0 (the segment-sum mask of the paper's 1-semiseparable matrix), so no
// term overflows. Cumulative sums are kept in double so s_i − s_j does not cancel badly.
void Mamba2Layer::ssd_chunked(int64_t n_tokens, Scratch& s, Mamba2State& state,
                              ThreadPool& pool) const {
    const int64_t T = n_tokens, H = shape_.n_heads, P = shape_.head_dim, N = shape_.d_state;
    const int64_t G = shape_.n_groups, cd = shape_.conv_dim(), di = shape_.d_inner;
    const int64_t L = std::min(shape_.chunk_size, T);
    const int64_t n_chunks = (T + L - 1) / L;
    const int64_t heads_per_group = H / G;
    const float* xbc = s.xbc.data();
    auto x_at = [&](int64_t t, int64_t h) { return xbc + t * cd + h * P; };
    auto b_at = [&](int64_t t, int64_t g) { return xbc + t * cd + di + g * N; };
    auto c_at = [&](int64_t t, int64_t g) { return xbc + t * cd + di + G * N + g * N; };

    // C_i·B_j for every group and chunk (shared by the heads of a group): [G][n_chunks][L][L].
    std::vector<float> cb(static_cast<size_t>(G * n_chunks * L * L), 0.0f);
    pool.parallel_for(G * n_chunks, [&](int64_t b, int64_t e, int) {
        for (int64_t gc = b; gc < e; ++gc) {
            const int64_t g = gc / n_chunks, t0 = (gc % n_chunks) * L;
            const int64_t len = std::min(L, T - t0);
            float* m = cb.data() + gc * L * L;
            for (int64_t i = 0; i < len; ++i) {
                const float* ci = c_at(t0 + i, g);
                for (int64_t j = 0; j <= i; ++j) {
                    const float* bj = b_at(t0 + j, g);
                    float acc = 0.0f;
                    for (int64_t n = 0; n < N; ++n)
                        acc += ci[n] * bj[n];
                    m[i * L + j] = acc;
                }
            }
        }
    });

    s.y.assign(static_cast<size_t>(T * di), 0.0f);
    pool.parallel_for(H, [&](int64_t b, int64_t e, int) {
        std::vector<double> cum(static_cast<size_t>(L));
        for (int64_t h = b; h < e; ++h) {
            const int64_t g = h / heads_per_group;
            float* S = state.ssm.data() + h * P * N; // [P][N], updated chunk by chunk
            double total = 0.0;
            for (int64_t c = 0; c < n_chunks; ++c) {
                const int64_t t0 = c * L, len = std::min(L, T - t0);
                const float* m = cb.data() + (g * n_chunks + c) * L * L;
                double run = 0.0;
                for (int64_t i = 0; i < len; ++i) {
                    run += s.a[(t0 + i) * H + h];
                    cum[i] = run;
                }
                for (int64_t i = 0; i < len; ++i) {
                    const int64_t t = t0 + i;
                    float* yt = s.y.data() + t * di + h * P;
                    // Diagonal block.
                    for (int64_t j = 0; j <= i; ++j) {
                        const float coef = static_cast<float>(std::exp(cum[i] - cum[j])) *
                                           m[i * L + j] * s.dt[(t0 + j) * H + h];
                        const float* xj = x_at(t0 + j, h);
                        for (int64_t p = 0; p < P; ++p)
                            yt[p] += coef * xj[p];
                    }
                    // Contribution of the state entering the chunk.
                    const float decay_in = static_cast<float>(std::exp(cum[i]));
                    const float* ct = c_at(t, g);
                    for (int64_t p = 0; p < P; ++p) {
                        const float* sp = S + p * N;
                        float acc = 0.0f;
                        for (int64_t n = 0; n < N; ++n)
                            acc += sp[n] * ct[n];
                        yt[p] += decay_in * acc;
                    }
                }
                // State at the end of the chunk.
                const double last = cum[len - 1];
                const float decay_all = static_cast<float>(std::exp(last));
                for (int64_t k = 0; k < P * N; ++k)
                    S[k] *= decay_all;
                for (int64_t j = 0; j < len; ++j) {
                    const float wj =
                        static_cast<float>(std::exp(last - cum[j])) * s.dt[(t0 + j) * H + h];
                    const float* xj = x_at(t0 + j, h);
                    const float* bj = b_at(t0 + j, g);
                    for (int64_t p = 0; p < P; ++p) {
                        const float xp = wj * xj[p];
                        float* sp = S + p * N;
                        for (int64_t n = 0; n < N; ++n)
                            sp[n] += xp * bj[n];
                    }
                }
                total += last;
            }
            state.log_decay[h] += static_cast<float>(total);
        }
    });
}

void Mamba2Layer::finish(int64_t n_tokens, Scratch& s, float* out, ThreadPool& pool) const {
    const int64_t T = n_tokens, P = shape_.head_dim, di = shape_.d_inner;
    const int64_t cd = shape_.conv_dim(), ip = shape_.in_proj_dim();
    const int64_t gs = di / shape_.n_groups;
    pool.parallel_for(T, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            float* yt = s.y.data() + t * di;
            const float* xt = s.xbc.data() + t * cd;
            const float* zt = s.zxbcdt.data() + t * ip;
            // Skip connection D·x, then the gate SiLU(z) before the norm (norm_before_gate =
            // False in Mamba2; llama.cpp's ggml_swiglu_split(z, y)).
            for (int64_t i = 0; i < di; ++i)
                yt[i] = (yt[i] + w_.D[i / P] * xt[i]) * silu(zt[i]);
            if (w_.norm_weight == nullptr)
                continue;
            // RMSNorm over groups of d_inner / G channels (RMSNormGated, group_size).
            for (int64_t g0 = 0; g0 < di; g0 += gs) {
                double ss = 0.0;
                for (int64_t i = g0; i < g0 + gs; ++i)
                    ss += static_cast<double>(yt[i]) * yt[i];
                const float inv =
                    static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(gs) +
                                                       static_cast<double>(shape_.rms_eps)));
                for (int64_t i = g0; i < g0 + gs; ++i)
                    yt[i] = yt[i] * inv * w_.norm_weight[i];
            }
        }
    });
    matmul(w_.out_proj, s.y.data(), T, out, pool);
}

void Mamba2Layer::prefill(const float* u, int64_t n_tokens, float* out, Mamba2State& state,
                          ThreadPool& pool) const {
    state.check(shape_);
    if (n_tokens < 0)
        fail("prefill: n_tokens must be >= 0, got " + std::to_string(n_tokens));
    if (n_tokens == 0)
        return;
    if (u == nullptr || out == nullptr)
        fail("prefill: null input or output pointer");
    Scratch s;
    project_and_convolve(u, n_tokens, s, state, pool);
    ssd_chunked(n_tokens, s, state, pool);
    finish(n_tokens, s, out, pool);
}

void Mamba2Layer::decode(const float* u, float* out, Mamba2State& state, ThreadPool& pool) const {
    state.check(shape_);
    if (u == nullptr || out == nullptr)
        fail("decode: null input or output pointer");
    Scratch s;
    project_and_convolve(u, 1, s, state, pool);
    const int64_t H = shape_.n_heads, P = shape_.head_dim, N = shape_.d_state;
    const int64_t G = shape_.n_groups, di = shape_.d_inner;
    const int64_t heads_per_group = H / G;
    s.y.assign(static_cast<size_t>(di), 0.0f);
    // h ← exp(dt·A)·h + dt·x ⊗ B ; y = h·C (ggml_ssm_scan, Mamba-2 branch).
    pool.parallel_for(H, [&](int64_t b, int64_t e, int) {
        for (int64_t h = b; h < e; ++h) {
            const int64_t g = h / heads_per_group;
            const float dt = s.dt[h];
            const float dA = std::exp(s.a[h]);
            const float* x = s.xbc.data() + h * P;
            const float* B = s.xbc.data() + di + g * N;
            const float* C = s.xbc.data() + di + G * N + g * N;
            float* S = state.ssm.data() + h * P * N;
            for (int64_t p = 0; p < P; ++p) {
                const float xdt = x[p] * dt;
                float* sp = S + p * N;
                float acc = 0.0f;
                for (int64_t n = 0; n < N; ++n) {
                    sp[n] = sp[n] * dA + B[n] * xdt;
                    acc += sp[n] * C[n];
                }
                s.y[h * P + p] = acc;
            }
            state.log_decay[h] += s.a[h];
        }
    });
    finish(1, s, out, pool);
}

void mamba2_compose(const Mamba2Shape& shape, float* ssm, const float* ssm_c,
                    const float* log_decay_c) {
    if (ssm == nullptr || ssm_c == nullptr || log_decay_c == nullptr)
        fail("compose: null pointer");
    const int64_t per_head = shape.head_dim * shape.d_state;
    for (int64_t h = 0; h < shape.n_heads; ++h) {
        if (!(log_decay_c[h] <= 0.0f))
            fail("compose: log_decay[" + std::to_string(h) +
                 "] = " + std::to_string(log_decay_c[h]) + " must be <= 0");
        const float f = std::exp(log_decay_c[h]);
        float* s = ssm + h * per_head;
        const float* sc = ssm_c + h * per_head;
        for (int64_t k = 0; k < per_head; ++k)
            s[k] = f * s[k] + sc[k];
    }
}

void mamba2_compose(const Mamba2Shape& shape, Mamba2State& acc, const Mamba2State& chunk) {
    acc.check(shape);
    chunk.check(shape);
    mamba2_compose(shape, acc.ssm.data(), chunk.ssm.data(), chunk.log_decay.data());
    for (int64_t h = 0; h < shape.n_heads; ++h)
        acc.log_decay[h] += chunk.log_decay[h];
    acc.conv = chunk.conv;
}

} // namespace spanscope
