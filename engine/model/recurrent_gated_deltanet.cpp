#include "engine/model/recurrent_gated_deltanet.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

[[noreturn]] void fail(const std::string& what) {
    throw std::invalid_argument(what);
}

void check_matrix(const char* name, const WeightMatrix& m, int64_t rows, int64_t cols) {
    if (m.data == nullptr) {
        fail(std::string("GatedDeltaNetLayer: weight ") + name + " has no data");
    }
    if (m.rows != rows || m.cols != cols) {
        fail(std::string("GatedDeltaNetLayer: weight ") + name + " is " + std::to_string(m.rows) +
             " rows x " + std::to_string(m.cols) + " cols, expected " + std::to_string(rows) +
             " x " + std::to_string(cols));
    }
}

float silu(float x) {
    return x / (1.0f + std::exp(-x));
}

// torch.nn.functional.softplus with beta 1, threshold 20.
float softplus(float x) {
    return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x ← x / √(Σx² + eps): HF's l2norm (rsqrt of the sum of squares plus eps).
void l2_normalise(float* x, int64_t n, float eps, float scale) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        ss += static_cast<double>(x[i]) * x[i];
    }
    const float inv = static_cast<float>(scale / std::sqrt(ss + eps));
    for (int64_t i = 0; i < n; ++i) {
        x[i] *= inv;
    }
}

int bi(int64_t v) {
    return static_cast<int>(v);
} // BLAS dimensions

// Per-worker buffers for one chunk of one value head.
struct ChunkBuffers {
    std::vector<double> G;  // [L] cumulative log decay
    std::vector<float> gam; // [L] exp(G)
    std::vector<float> D;   // [L][L] exp(G_t − G_i), i ≤ t
    std::vector<float> kk, qk;
    std::vector<float> wv, wk, u, kd, pt;
    void size(int64_t L, int64_t dk, int64_t dv) {
        G.resize(L);
        gam.resize(L);
        D.assign(L * L, 0.0f);
        kk.resize(L * L);
        qk.resize(L * L);
        wv.resize(L * dv);
        wk.resize(L * dk);
        u.resize(L * dv);
        kd.resize(L * dk);
        pt.resize(dk * L);
    }
};

// One chunk of L tokens of one value head, from state S (d_v × d_k) to the state after it.
// With γ_t = Π_{i≤t} α_i (in-chunk), the pseudo-values u_t of S_t = γ_t·S_0 + Σ_{i≤t}
// (γ_t/γ_i)·u_i·k_iᵀ satisfy (I + A)·U = diag(β)·V − diag(β·γ)·K·S_0ᵀ, A strictly lower with
// A_ti = β_t·(γ_t/γ_i)·k_tᵀk_i (the UT transform of the WY representation). So
//   U = W_v − W_k·S_0ᵀ,  W_v = (I + A)⁻¹·diag(β)·V,  W_k = (I + A)⁻¹·diag(β·γ)·K
//   o_t = γ_t·S_0·q_t + Σ_{i≤t} (γ_t/γ_i)·(q_tᵀk_i)·u_i
//   S_L = γ_L·S_0 + Σ_i (γ_L/γ_i)·u_i·k_iᵀ  = S_0·T_chunk + S_L|S_0=0
//   T_chunk = γ_L·I − Σ_i (γ_L/γ_i)·w_k,i·k_iᵀ
// Every decay factor used is exp of a difference ≤ 0 (or γ_t ≤ 1), so nothing overflows.
// Q, K, V: rows of ld floats; O: rows of ld_o floats; S: [dv][dk]; T: [dk][dk] or null.
void run_chunk(int64_t L, int64_t dk, int64_t dv, const float* Q, const float* K, const float* V,
               int64_t ld, const float* beta, const float* g, float* O, int64_t ld_o, float* S,
               float* T, ChunkBuffers& b) {
    b.size(L, dk, dv);
    double acc = 0.0;
    for (int64_t t = 0; t < L; ++t) {
        acc += g[t];
        b.G[t] = acc;
        b.gam[t] = static_cast<float>(std::exp(acc));
    }
    for (int64_t t = 0; t < L; ++t) {
        for (int64_t i = 0; i <= t; ++i) {
            b.D[t * L + i] = static_cast<float>(std::exp(b.G[t] - b.G[i]));
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(L), bi(L), bi(dk), 1.0f, K, bi(ld), K,
                bi(ld), 0.0f, b.kk.data(), bi(L));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(L), bi(L), bi(dk), 1.0f, Q, bi(ld), K,
                bi(ld), 0.0f, b.qk.data(), bi(L));

    // Right-hand sides, then forward substitution through (I + A).
    for (int64_t t = 0; t < L; ++t) {
        const float bk = beta[t] * b.gam[t];
        for (int64_t c = 0; c < dv; ++c) {
            b.wv[t * dv + c] = beta[t] * V[t * ld + c];
        }
        for (int64_t c = 0; c < dk; ++c) {
            b.wk[t * dk + c] = bk * K[t * ld + c];
        }
    }
    for (int64_t t = 1; t < L; ++t) {
        float* wv_t = &b.wv[t * dv];
        float* wk_t = &b.wk[t * dk];
        for (int64_t i = 0; i < t; ++i) {
            const float a = beta[t] * b.D[t * L + i] * b.kk[t * L + i];
            const float* wv_i = &b.wv[i * dv];
            const float* wk_i = &b.wk[i * dk];
            for (int64_t c = 0; c < dv; ++c) {
                wv_t[c] -= a * wv_i[c];
            }
            for (int64_t c = 0; c < dk; ++c) {
                wk_t[c] -= a * wk_i[c];
            }
        }
    }

    // U = W_v − W_k·S_0ᵀ.
    std::copy(b.wv.begin(), b.wv.end(), b.u.begin());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(L), bi(dv), bi(dk), -1.0f, b.wk.data(),
                bi(dk), S, bi(dk), 1.0f, b.u.data(), bi(dv));

    // O = diag(γ)·Q·S_0ᵀ + (D ∘ Q·Kᵀ, causal incl. diagonal)·U.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(L), bi(dv), bi(dk), 1.0f, Q, bi(ld), S,
                bi(dk), 0.0f, O, bi(ld_o));
    for (int64_t t = 0; t < L; ++t) {
        for (int64_t c = 0; c < dv; ++c) {
            O[t * ld_o + c] *= b.gam[t];
        }
        for (int64_t i = 0; i < L; ++i) {
            b.qk[t * L + i] = i <= t ? b.qk[t * L + i] * b.D[t * L + i] : 0.0f;
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(L), bi(dv), bi(L), 1.0f, b.qk.data(),
                bi(L), b.u.data(), bi(dv), 1.0f, O, bi(ld_o));

    // K scaled by γ_L/γ_i for the state and transition updates.
    const float* d_last = &b.D[(L - 1) * L];
    for (int64_t i = 0; i < L; ++i) {
        for (int64_t c = 0; c < dk; ++c) {
            b.kd[i * dk + c] = d_last[i] * K[i * ld + c];
        }
    }
    const float gamma_l = b.gam[L - 1];
    if (T != nullptr) {
        // T ← T·T_chunk = γ_L·T − (T·W_kᵀ)·Kd.
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(dk), bi(L), bi(dk), 1.0f, T, bi(dk),
                    b.wk.data(), bi(dk), 0.0f, b.pt.data(), bi(L));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(dk), bi(dk), bi(L), -1.0f,
                    b.pt.data(), bi(L), b.kd.data(), bi(dk), gamma_l, T, bi(dk));
    }
    // S ← γ_L·S + Uᵀ·Kd.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(dv), bi(dk), bi(L), 1.0f, b.u.data(),
                bi(dv), b.kd.data(), bi(dk), gamma_l, S, bi(dk));
}

} // namespace

void GatedDeltaNetShape::validate() const {
    const auto positive = [](const char* name, int64_t v) {
        if (v <= 0) {
            fail(std::string("GatedDeltaNetShape: ") + name + " must be positive, got " +
                 std::to_string(v));
        }
    };
    positive("d_model", d_model);
    positive("n_k_heads", n_k_heads);
    positive("n_v_heads", n_v_heads);
    positive("d_k", d_k);
    positive("d_v", d_v);
    positive("d_conv", d_conv);
    positive("chunk_size", chunk_size);
    if (n_v_heads % n_k_heads != 0) {
        fail("GatedDeltaNetShape: n_v_heads (" + std::to_string(n_v_heads) +
             ") is not a multiple of n_k_heads (" + std::to_string(n_k_heads) + ")");
    }
    if (!(rms_eps >= 0.0f) || !std::isfinite(rms_eps)) {
        fail("GatedDeltaNetShape: rms_eps must be finite and >= 0");
    }
    if (!(l2_eps >= 0.0f) || !std::isfinite(l2_eps)) {
        fail("GatedDeltaNetShape: l2_eps must be finite and >= 0");
    }
}

GatedDeltaNetState::GatedDeltaNetState(const GatedDeltaNetShape& shape, bool track_transition)
    : s(static_cast<size_t>(shape.n_v_heads * shape.d_v * shape.d_k), 0.0f),
      conv(static_cast<size_t>((shape.d_conv - 1) * shape.conv_dim()), 0.0f) {
    if (track_transition) {
        transition.assign(static_cast<size_t>(shape.n_v_heads * shape.d_k * shape.d_k), 0.0f);
        reset(shape);
    }
}

void GatedDeltaNetState::reset(const GatedDeltaNetShape& shape) {
    check(shape);
    std::fill(s.begin(), s.end(), 0.0f);
    std::fill(conv.begin(), conv.end(), 0.0f);
    if (tracks_transition()) {
        std::fill(transition.begin(), transition.end(), 0.0f);
        const int64_t dk = shape.d_k;
        for (int64_t h = 0; h < shape.n_v_heads; ++h) {
            for (int64_t i = 0; i < dk; ++i) {
                transition[(h * dk + i) * dk + i] = 1.0f;
            }
        }
    }
}

void GatedDeltaNetState::check(const GatedDeltaNetShape& shape) const {
    const auto want = [](const char* name, size_t have, int64_t expect) {
        if (have != static_cast<size_t>(expect)) {
            fail(std::string("GatedDeltaNetState: ") + name + " has " + std::to_string(have) +
                 " floats, the shape needs " + std::to_string(expect));
        }
    };
    want("s", s.size(), shape.n_v_heads * shape.d_v * shape.d_k);
    want("conv", conv.size(), (shape.d_conv - 1) * shape.conv_dim());
    if (tracks_transition()) {
        want("transition", transition.size(), shape.n_v_heads * shape.d_k * shape.d_k);
    }
}

struct GatedDeltaNetLayer::Scratch {
    std::vector<float> qkv;  // [T][conv_dim] raw projection (conv input)
    std::vector<float> z;    // [T][value_dim]
    std::vector<float> ba;   // [T][2·n_v], grouped per k head
    std::vector<float> act;  // [T][conv_dim] SiLU(conv); q, k l2-normalised, q scaled
    std::vector<float> beta; // [T][n_v]
    std::vector<float> g;    // [T][n_v] log decay, ≤ 0
    std::vector<float> o;    // [T][value_dim] delta-rule output, then gated-normed
};

GatedDeltaNetLayer::GatedDeltaNetLayer(const GatedDeltaNetShape& shape,
                                       const GatedDeltaNetWeights& weights)
    : shape_(shape), w_(weights) {
    shape_.validate();
    const int64_t dm = shape_.d_model;
    const bool split = w_.qkv.data != nullptr || w_.gate.data != nullptr;
    const bool fused = w_.qkvz.data != nullptr;
    if (split && fused) {
        fail("GatedDeltaNetLayer: give either qkv + gate or the legacy fused qkvz, not both");
    }
    if (!split && !fused) {
        fail("GatedDeltaNetLayer: no input projection (qkv + gate, or qkvz)");
    }
    if (split) {
        check_matrix("qkv", w_.qkv, shape_.conv_dim(), dm);
        check_matrix("gate", w_.gate, shape_.value_dim(), dm);
    } else {
        check_matrix("qkvz", w_.qkvz, shape_.qkvz_dim(), dm);
    }
    check_matrix("ba", w_.ba, 2 * shape_.n_v_heads, dm);
    check_matrix("out", w_.out, dm, shape_.value_dim());
    if (w_.conv_weight == nullptr || w_.dt_bias == nullptr || w_.A == nullptr ||
        w_.norm_weight == nullptr) {
        fail("GatedDeltaNetLayer: conv_weight, dt_bias, A and norm_weight must not be null");
    }
    for (int64_t h = 0; h < shape_.n_v_heads; ++h) {
        if (!std::isfinite(w_.A[h]) || w_.A[h] > 0.0f) {
            fail("GatedDeltaNetLayer: A[" + std::to_string(h) +
                 "] must be finite and <= 0 (A = -exp(A_log)), got " + std::to_string(w_.A[h]));
        }
    }
}

void GatedDeltaNetLayer::project_and_convolve(const float* x, int64_t n, Scratch& s,
                                              GatedDeltaNetState& state, ThreadPool& pool) const {
    const GatedDeltaNetShape& sh = shape_;
    const int64_t cd = sh.conv_dim(), vd = sh.value_dim(), kd = sh.key_dim();
    const int64_t nv = sh.n_v_heads, r = sh.n_v_heads / sh.n_k_heads, K = sh.d_conv;
    s.qkv.resize(n * cd);
    s.z.resize(n * vd);
    s.ba.resize(n * 2 * nv);
    if (w_.qkvz.data != nullptr) {
        // Legacy ssm_in: per k head g, [q_g | k_g | v of its r heads | z of its r heads].
        std::vector<float> fused(static_cast<size_t>(n * sh.qkvz_dim()));
        matmul(w_.qkvz, x, n, fused.data(), pool);
        const int64_t dk = sh.d_k, gv = r * sh.d_v, group = 2 * dk + 2 * gv;
        for (int64_t t = 0; t < n; ++t) {
            const float* src = &fused[t * sh.qkvz_dim()];
            float* dst = &s.qkv[t * cd];
            for (int64_t gk = 0; gk < sh.n_k_heads; ++gk) {
                const float* p = src + gk * group;
                std::copy(p, p + dk, dst + gk * dk);
                std::copy(p + dk, p + 2 * dk, dst + kd + gk * dk);
                std::copy(p + 2 * dk, p + 2 * dk + gv, dst + 2 * kd + gk * gv);
                std::copy(p + 2 * dk + gv, p + group, &s.z[t * vd + gk * gv]);
            }
        }
    } else {
        matmul(w_.qkv, x, n, s.qkv.data(), pool);
        matmul(w_.gate, x, n, s.z.data(), pool);
    }
    matmul(w_.ba, x, n, s.ba.data(), pool);

    // Causal depthwise conv over the tail and these tokens, SiLU, then per-head l2 norms
    // (q also by 1/√d_k, as the kernel's `scale`), β and g. Tokens are independent here.
    s.act.resize(n * cd);
    s.beta.resize(n * nv);
    s.g.resize(n * nv);
    const float* tail = state.conv.data();
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(sh.d_k));
    pool.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            float* a = &s.act[t * cd];
            std::fill(a, a + cd, 0.0f);
            for (int64_t j = 0; j < K; ++j) {
                const int64_t u = t - (K - 1) + j; // input position; < 0 reads the tail
                const float* in = u >= 0 ? &s.qkv[u * cd] : tail + (K - 1 + u) * cd;
                for (int64_t c = 0; c < cd; ++c) {
                    a[c] += w_.conv_weight[c * K + j] * in[c];
                }
            }
            for (int64_t c = 0; c < cd; ++c) {
                a[c] = silu(a[c]);
            }
            for (int64_t h = 0; h < sh.n_k_heads; ++h) {
                l2_normalise(a + h * sh.d_k, sh.d_k, sh.l2_eps, q_scale);
                l2_normalise(a + kd + h * sh.d_k, sh.d_k, sh.l2_eps, 1.0f);
            }
            const float* ba = &s.ba[t * 2 * nv];
            for (int64_t h = 0; h < nv; ++h) {
                const int64_t gk = h / r, i = h % r;
                const float b = ba[gk * 2 * r + i];
                const float av = ba[gk * 2 * r + r + i];
                s.beta[t * nv + h] = 1.0f / (1.0f + std::exp(-b));
                s.g[t * nv + h] = w_.A[h] * softplus(av + w_.dt_bias[h]);
            }
        }
    });

    // New tail: the last K − 1 raw inputs, reaching into the old tail when n < K − 1.
    if (K > 1) {
        std::vector<float> next(state.conv.size());
        for (int64_t row = 0; row < K - 1; ++row) {
            const int64_t u = n - (K - 1) + row;
            const float* src = u >= 0 ? &s.qkv[u * cd] : tail + (K - 1 + u) * cd;
            std::copy(src, src + cd, &next[row * cd]);
        }
        state.conv.swap(next);
    }
}

void GatedDeltaNetLayer::delta_chunked(int64_t n, Scratch& s, GatedDeltaNetState& state,
                                       ThreadPool& pool) const {
    const GatedDeltaNetShape& sh = shape_;
    const int64_t cd = sh.conv_dim(), vd = sh.value_dim(), kd = sh.key_dim();
    const int64_t nv = sh.n_v_heads, r = nv / sh.n_k_heads, dk = sh.d_k, dv = sh.d_v;
    const int64_t C = sh.chunk_size;
    s.o.assign(n * vd, 0.0f);
    const bool track = state.tracks_transition();
    pool.parallel_for(nv, [&](int64_t h0, int64_t h1, int) {
        ChunkBuffers buf;
        std::vector<float> beta(C), g(C);
        for (int64_t h = h0; h < h1; ++h) {
            const int64_t hk = h / r;
            float* S = &state.s[h * dv * dk];
            float* T = track ? &state.transition[h * dk * dk] : nullptr;
            for (int64_t t0 = 0; t0 < n; t0 += C) {
                const int64_t L = std::min(C, n - t0);
                for (int64_t t = 0; t < L; ++t) {
                    beta[t] = s.beta[(t0 + t) * nv + h];
                    g[t] = s.g[(t0 + t) * nv + h];
                }
                const float* row = &s.act[t0 * cd];
                run_chunk(L, dk, dv, row + hk * dk, row + kd + hk * dk, row + 2 * kd + h * dv, cd,
                          beta.data(), g.data(), &s.o[t0 * vd + h * dv], vd, S, T, buf);
            }
        }
    });
}

void GatedDeltaNetLayer::delta_step(Scratch& s, GatedDeltaNetState& state, ThreadPool& pool) const {
    const GatedDeltaNetShape& sh = shape_;
    const int64_t kd = sh.key_dim(), nv = sh.n_v_heads, r = nv / sh.n_k_heads;
    const int64_t dk = sh.d_k, dv = sh.d_v;
    s.o.assign(sh.value_dim(), 0.0f);
    const bool track = state.tracks_transition();
    pool.parallel_for(nv, [&](int64_t h0, int64_t h1, int) {
        std::vector<float> tk(dk);
        for (int64_t h = h0; h < h1; ++h) {
            const int64_t hk = h / r;
            const float* q = &s.act[hk * dk];
            const float* k = &s.act[kd + hk * dk];
            const float* v = &s.act[2 * kd + h * dv];
            const float alpha = std::exp(s.g[h]), beta = s.beta[h];
            float* S = &state.s[h * dv * dk];
            float* o = &s.o[h * dv];
            // S ← α·S;  S ← S + β·(v − S·k)·kᵀ;  o = S·q  (= α·S·(I − β·k·kᵀ) + β·v·kᵀ).
            for (int64_t row = 0; row < dv; ++row) {
                float* sr = S + row * dk;
                float kv = 0.0f;
                for (int64_t c = 0; c < dk; ++c) {
                    sr[c] *= alpha;
                    kv += sr[c] * k[c];
                }
                const float u = beta * (v[row] - kv);
                float acc = 0.0f;
                for (int64_t c = 0; c < dk; ++c) {
                    sr[c] += u * k[c];
                    acc += sr[c] * q[c];
                }
                o[row] = acc;
            }
            if (track) {
                // T ← α·T·(I − β·k·kᵀ).
                float* T = &state.transition[h * dk * dk];
                for (int64_t i = 0; i < dk; ++i) {
                    float* tr = T + i * dk;
                    float dot = 0.0f;
                    for (int64_t c = 0; c < dk; ++c) {
                        tr[c] *= alpha;
                        dot += tr[c] * k[c];
                    }
                    tk[i] = beta * dot;
                }
                for (int64_t i = 0; i < dk; ++i) {
                    for (int64_t c = 0; c < dk; ++c) {
                        T[i * dk + c] -= tk[i] * k[c];
                    }
                }
            }
        }
    });
}

void GatedDeltaNetLayer::finish(int64_t n, Scratch& s, float* out, ThreadPool& pool) const {
    const GatedDeltaNetShape& sh = shape_;
    const int64_t vd = sh.value_dim(), dv = sh.d_v;
    // Qwen3NextRMSNormGated: RMSNorm(o)·weight·SiLU(z), per value head.
    pool.parallel_for(n, [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t h = 0; h < sh.n_v_heads; ++h) {
                float* o = &s.o[t * vd + h * dv];
                const float* z = &s.z[t * vd + h * dv];
                double ss = 0.0;
                for (int64_t c = 0; c < dv; ++c) {
                    ss += static_cast<double>(o[c]) * o[c];
                }
                const float inv = static_cast<float>(1.0 / std::sqrt(ss / dv + sh.rms_eps));
                for (int64_t c = 0; c < dv; ++c) {
                    o[c] = o[c] * inv * w_.norm_weight[c] * silu(z[c]);
                }
            }
        }
    });
    matmul(w_.out, s.o.data(), n, out, pool);
}

void GatedDeltaNetLayer::prefill(const float* x, int64_t n_tokens, float* out,
                                 GatedDeltaNetState& state, ThreadPool& pool) const {
    state.check(shape_);
    if (n_tokens < 0) {
        fail("GatedDeltaNetLayer::prefill: n_tokens must be >= 0, got " + std::to_string(n_tokens));
    }
    if (n_tokens == 0) {
        return;
    }
    if (x == nullptr || out == nullptr) {
        fail("GatedDeltaNetLayer::prefill: x and out must not be null");
    }
    Scratch s;
    project_and_convolve(x, n_tokens, s, state, pool);
    delta_chunked(n_tokens, s, state, pool);
    finish(n_tokens, s, out, pool);
}

void GatedDeltaNetLayer::decode(const float* x, float* out, GatedDeltaNetState& state,
                                ThreadPool& pool) const {
    state.check(shape_);
    if (x == nullptr || out == nullptr) {
        fail("GatedDeltaNetLayer::decode: x and out must not be null");
    }
    Scratch s;
    project_and_convolve(x, 1, s, state, pool);
    delta_step(s, state, pool);
    finish(1, s, out, pool);
}

void gated_deltanet_compose(const GatedDeltaNetShape& shape, float* s, const float* transition_c,
                            const float* s_c) {
    if (s == nullptr || transition_c == nullptr || s_c == nullptr)
        throw std::invalid_argument("Gated DeltaNet compose: null pointer");
    const int64_t dk = shape.d_k, dv = shape.d_v;
    std::vector<float> prod(static_cast<size_t>(dv * dk));
    for (int64_t h = 0; h < shape.n_v_heads; ++h) {
        float* sh = s + h * dv * dk;
        // prod = S·T_c, then S = prod + S_c.
        std::copy(s_c + h * dv * dk, s_c + (h + 1) * dv * dk, prod.begin());
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(dv), bi(dk), bi(dk), 1.0f, sh,
                    bi(dk), transition_c + h * dk * dk, bi(dk), 1.0f, prod.data(), bi(dk));
        std::copy(prod.begin(), prod.end(), sh);
    }
}

void gated_deltanet_compose(const GatedDeltaNetShape& shape, GatedDeltaNetState& acc,
                            const GatedDeltaNetState& chunk) {
    acc.check(shape);
    chunk.check(shape);
    if (!chunk.tracks_transition()) {
        fail("gated_deltanet_compose: the chunk state does not track its transition");
    }
    gated_deltanet_compose(shape, acc.s.data(), chunk.transition.data(), chunk.s.data());
    if (acc.tracks_transition()) {
        // T_acc ← T_acc·T_c: the same product with d_v = d_k and no additive part.
        GatedDeltaNetShape square = shape;
        square.d_v = shape.d_k;
        const std::vector<float> zero(acc.transition.size(), 0.0f);
        gated_deltanet_compose(square, acc.transition.data(), chunk.transition.data(), zero.data());
    }
    acc.conv = chunk.conv;
}

} // namespace spanscope
