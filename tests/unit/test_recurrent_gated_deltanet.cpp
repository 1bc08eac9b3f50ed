// Gated DeltaNet layer (engine/recurrent_gated_deltanet.*): chunked prefill against a naive
// step-by-step reference, decode and split prefills against one prefill, exact composition of
// standalone chunk states, the independent numpy fixture, and shape validation.
#include "engine/kernels/quant.h"
#include "engine/linearkv/state_initialiser.h"
#include "engine/model/recurrent_gated_deltanet.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace spanscope;

namespace {

using Vec = std::vector<float>;

// Row-major float matrix viewed as a GGUF weight (F32 unless quantised bytes are given).
WeightMatrix view(const Vec& m, int64_t rows, int64_t cols) {
    WeightMatrix w;
    w.type = TensorType::F32;
    w.rows = rows;
    w.cols = cols;
    w.data = reinterpret_cast<const uint8_t*>(m.data());
    w.row_stride = static_cast<size_t>(cols) * sizeof(float);
    return w;
}

// Every tensor of one layer, owned, in the GGUF layout the header documents.
struct Params {
    GatedDeltaNetShape shape;
    Vec qkv, gate, ba, out, conv_weight, dt_bias, A, norm_weight;

    GatedDeltaNetWeights weights() const {
        const GatedDeltaNetShape& s = shape;
        GatedDeltaNetWeights w;
        w.qkv = view(qkv, s.conv_dim(), s.d_model);
        w.gate = view(gate, s.value_dim(), s.d_model);
        w.ba = view(ba, 2 * s.n_v_heads, s.d_model);
        w.out = view(out, s.d_model, s.value_dim());
        w.conv_weight = conv_weight.data();
        w.dt_bias = dt_bias.data();
        w.A = A.data();
        w.norm_weight = norm_weight.data();
        return w;
    }
};

Vec normal(std::mt19937& rng, size_t n, double sd) {
    std::normal_distribution<float> d(0.0f, static_cast<float>(sd));
    Vec v(n);
    for (float& x : v) {
        x = d(rng);
    }
    return v;
}

Vec uniform(std::mt19937& rng, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (float& x : v) {
        x = d(rng);
    }
    return v;
}

// Random weights with decays α mostly in 0.5–0.99, so the state carries across chunks.
Params random_params(const GatedDeltaNetShape& shape, uint32_t seed) {
    std::mt19937 rng(seed);
    Params p;
    p.shape = shape;
    const size_t dm = static_cast<size_t>(shape.d_model);
    const double sd = 1.0 / std::sqrt(static_cast<double>(dm));
    p.qkv = normal(rng, static_cast<size_t>(shape.conv_dim()) * dm, sd);
    p.gate = normal(rng, static_cast<size_t>(shape.value_dim()) * dm, sd);
    p.ba = normal(rng, static_cast<size_t>(2 * shape.n_v_heads) * dm, sd);
    p.out = normal(rng, dm * static_cast<size_t>(shape.value_dim()),
                   1.0 / std::sqrt(static_cast<double>(shape.value_dim())));
    p.conv_weight = normal(rng, static_cast<size_t>(shape.conv_dim() * shape.d_conv), 0.5);
    p.dt_bias = uniform(rng, static_cast<size_t>(shape.n_v_heads), -3.0f, -1.0f);
    p.A = uniform(rng, static_cast<size_t>(shape.n_v_heads), -0.6f, -0.05f);
    p.norm_weight = uniform(rng, static_cast<size_t>(shape.d_v), 0.5f, 1.5f);
    return p;
}

struct Outcome {
    std::vector<double> y, s, conv, transition;
};

double silu(double x) {
    return x / (1.0 + std::exp(-x));
}

// The naive reference, in double, one token at a time, straight from the paper's matrix form
// (Yang et al. 2025 §3.1): S ← S·(α(I − β k kᵀ)) + β v kᵀ, T ← T·(α(I − β k kᵀ)), o = S q;
// no chunking. Starts from s0 ([n_v][d_v][d_k]) and conv0 ([K−1][conv_dim]).
Outcome reference(const Params& p, const Vec& x, int64_t n, const Vec& s0, const Vec& conv0) {
    const GatedDeltaNetShape& sh = p.shape;
    const int64_t dm = sh.d_model, nk = sh.n_k_heads, nv = sh.n_v_heads, dk = sh.d_k, dv = sh.d_v,
                  K = sh.d_conv, r = nv / nk, kd = sh.key_dim(), vd = sh.value_dim(),
                  cd = sh.conv_dim();
    Outcome o;
    o.s.assign(s0.begin(), s0.end());
    o.conv.assign(conv0.begin(), conv0.end());
    o.transition.assign(static_cast<size_t>(nv * dk * dk), 0.0);
    for (int64_t h = 0; h < nv; ++h) {
        for (int64_t i = 0; i < dk; ++i) {
            o.transition[(h * dk + i) * dk + i] = 1.0;
        }
    }
    const auto project = [&](const Vec& w, int64_t rows, const float* xt) {
        std::vector<double> y(rows, 0.0);
        for (int64_t i = 0; i < rows; ++i) {
            for (int64_t c = 0; c < dm; ++c) {
                y[i] += static_cast<double>(w[i * dm + c]) * xt[c];
            }
        }
        return y;
    };
    std::vector<double> M(dk * dk), tmp;
    for (int64_t t = 0; t < n; ++t) {
        const float* xt = &x[t * dm];
        const auto qkv = project(p.qkv, cd, xt), z = project(p.gate, vd, xt),
                   ba = project(p.ba, 2 * nv, xt);
        std::vector<double> act(cd);
        for (int64_t c = 0; c < cd; ++c) {
            double a = p.conv_weight[c * K + K - 1] * qkv[c];
            for (int64_t j = 0; j + 1 < K; ++j) {
                a += p.conv_weight[c * K + j] * o.conv[j * cd + c];
            }
            act[c] = silu(a);
        }
        for (int64_t j = 0; j + 2 < K; ++j) { // shift the tail, append this token
            std::copy(&o.conv[(j + 1) * cd], &o.conv[(j + 2) * cd], &o.conv[j * cd]);
        }
        if (K > 1) {
            std::copy(qkv.begin(), qkv.end(), &o.conv[(K - 2) * cd]);
        }
        for (int64_t h = 0; h < 2 * nk; ++h) { // q heads then k heads
            double ss = 0.0;
            for (int64_t c = 0; c < dk; ++c) {
                ss += act[h * dk + c] * act[h * dk + c];
            }
            const double scale =
                (h < nk ? 1.0 / std::sqrt(double(dk)) : 1.0) / std::sqrt(ss + double(sh.l2_eps));
            for (int64_t c = 0; c < dk; ++c) {
                act[h * dk + c] *= scale;
            }
        }
        std::vector<double> out(vd);
        for (int64_t h = 0; h < nv; ++h) {
            const int64_t g = h / r, i = h % r;
            const double beta = 1.0 / (1.0 + std::exp(-ba[g * 2 * r + i]));
            const double sp_in = ba[g * 2 * r + r + i] + p.dt_bias[h];
            const double sp = sp_in > 20.0 ? sp_in : std::log1p(std::exp(sp_in));
            const double alpha = std::exp(p.A[h] * sp);
            const double* q = &act[g * dk];
            const double* k = &act[kd + g * dk];
            const double* v = &act[2 * kd + h * dv];
            for (int64_t a = 0; a < dk; ++a) {
                for (int64_t b = 0; b < dk; ++b) {
                    M[a * dk + b] = alpha * ((a == b ? 1.0 : 0.0) - beta * k[a] * k[b]);
                }
            }
            for (auto [mat, rows] :
                 {std::pair{&o.s[h * dv * dk], dv}, std::pair{&o.transition[h * dk * dk], dk}}) {
                tmp.assign(rows * dk, 0.0);
                for (int64_t a = 0; a < rows; ++a) {
                    for (int64_t m = 0; m < dk; ++m) {
                        for (int64_t b = 0; b < dk; ++b) {
                            tmp[a * dk + b] += mat[a * dk + m] * M[m * dk + b];
                        }
                    }
                }
                std::copy(tmp.begin(), tmp.end(), mat);
            }
            double* S = &o.s[h * dv * dk];
            double ss = 0.0;
            for (int64_t a = 0; a < dv; ++a) {
                double acc = 0.0;
                for (int64_t b = 0; b < dk; ++b) {
                    S[a * dk + b] += beta * v[a] * k[b];
                    acc += S[a * dk + b] * q[b];
                }
                out[h * dv + a] = acc;
                ss += acc * acc;
            }
            const double inv = 1.0 / std::sqrt(ss / dv + double(sh.rms_eps));
            for (int64_t a = 0; a < dv; ++a) {
                out[h * dv + a] *= inv * p.norm_weight[a] * silu(z[h * dv + a]);
            }
        }
        for (int64_t i = 0; i < dm; ++i) {
            double acc = 0.0;
            for (int64_t c = 0; c < vd; ++c) {
                acc += static_cast<double>(p.out[i * vd + c]) * out[c];
            }
            o.y.push_back(acc);
        }
    }
    return o;
}

// max |a − b| / max(1, max |b|): an absolute error on the scale of the reference.
template <class A, class B> double scaled_err(const A& a, const B& b) {
    EXPECT_EQ(a.size(), b.size());
    double err = 0.0, scale = 1.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        err = std::max(err, std::abs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::abs(double(b[i])));
    }
    return err / scale;
}

// ‖a − b‖_F / ‖b‖_F.
double rel_err(const Vec& a, const Vec& b) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < b.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return std::sqrt(num / den);
}

GatedDeltaNetShape small_shape(int64_t chunk) {
    GatedDeltaNetShape s;
    s.d_model = 24;
    s.n_k_heads = 2;
    s.n_v_heads = 4; // 2·n_k_heads
    s.d_k = 16;
    s.d_v = 12; // ≠ d_k, so a transposed state cannot pass
    s.d_conv = 4;
    s.chunk_size = chunk;
    return s;
}

} // namespace

TEST(GatedDeltaNet, ChunkedPrefillMatchesNaiveReference) {
    ThreadPool pool(2);
    for (const int64_t C : {8, 64}) {
        const Params p = random_params(small_shape(C), 11);
        const GatedDeltaNetLayer layer(p.shape, p.weights());
        for (const int64_t T : {int64_t{1}, int64_t{3}, C - 1, C, 2 * C + 5}) {
            for (const bool fresh : {true, false}) {
                std::mt19937 rng(static_cast<uint32_t>(100 + T));
                const Vec x = normal(rng, static_cast<size_t>(T * p.shape.d_model), 1.0);
                GatedDeltaNetState st = layer.make_state(true);
                if (!fresh) { // a state left by earlier text: random S and conv tail
                    st.s = normal(rng, st.s.size(), 0.5);
                    st.conv = normal(rng, st.conv.size(), 1.0);
                }
                const Outcome ref = reference(p, x, T, st.s, st.conv);
                Vec y(x.size());
                layer.prefill(x.data(), T, y.data(), st, pool);
                const double ey = scaled_err(y, ref.y), es = scaled_err(st.s, ref.s),
                             ec = scaled_err(st.conv, ref.conv),
                             et = scaled_err(st.transition, ref.transition);
                std::printf("C=%lld T=%lld %s: y %.2e  S %.2e  conv %.2e  T %.2e\n",
                            static_cast<long long>(C), static_cast<long long>(T),
                            fresh ? "zero start" : "random start", ey, es, ec, et);
                EXPECT_LT(ey, 1e-5) << "C=" << C << " T=" << T;
                EXPECT_LT(es, 1e-5) << "C=" << C << " T=" << T;
                EXPECT_LT(ec, 1e-6) << "C=" << C << " T=" << T; // fp32 projection vs double
                EXPECT_LT(et, 1e-5) << "C=" << C << " T=" << T;
            }
        }
    }
}

TEST(GatedDeltaNet, DecodesAndSplitPrefillsEqualOnePrefill) {
    ThreadPool pool(2);
    const Params p = random_params(small_shape(8), 23);
    const GatedDeltaNetLayer layer(p.shape, p.weights());
    const int64_t N = 29, dm = p.shape.d_model;
    std::mt19937 rng(5);
    const Vec x = normal(rng, static_cast<size_t>(N * dm), 1.0);
    GatedDeltaNetState whole = layer.make_state(true);
    Vec y_whole(x.size());
    layer.prefill(x.data(), N, y_whole.data(), whole, pool);

    // 20 tokens by prefill, then 9 decodes.
    GatedDeltaNetState st = layer.make_state(true);
    Vec y(x.size());
    layer.prefill(x.data(), 20, y.data(), st, pool);
    for (int64_t t = 20; t < N; ++t) {
        layer.decode(&x[t * dm], &y[t * dm], st, pool);
    }
    std::printf("prefill+decode: y %.2e  S %.2e  T %.2e\n", scaled_err(y, y_whole),
                scaled_err(st.s, whole.s), scaled_err(st.transition, whole.transition));
    EXPECT_LT(scaled_err(y, y_whole), 1e-5);
    EXPECT_LT(scaled_err(st.s, whole.s), 1e-5);
    EXPECT_LT(scaled_err(st.transition, whole.transition), 1e-5);
    // The tail holds raw projections; matmul's few- and many-token paths round differently.
    EXPECT_LT(scaled_err(st.conv, whole.conv), 1e-6);

    // Consecutive prefills of 2, 3 and 4 pieces (pieces shorter than the conv tail included).
    for (const std::vector<int64_t>& cuts :
         std::vector<std::vector<int64_t>>{{13, 29}, {2, 17, 29}, {5, 6, 19, 29}}) {
        GatedDeltaNetState sp = layer.make_state(true);
        Vec ys(x.size());
        int64_t from = 0;
        for (const int64_t to : cuts) {
            layer.prefill(&x[from * dm], to - from, &ys[from * dm], sp, pool);
            from = to;
        }
        EXPECT_LT(scaled_err(ys, y_whole), 1e-5) << cuts.size() << " pieces";
        EXPECT_LT(scaled_err(sp.s, whole.s), 1e-5) << cuts.size() << " pieces";
        EXPECT_LT(scaled_err(sp.transition, whole.transition), 1e-5) << cuts.size() << " pieces";
        EXPECT_LT(scaled_err(sp.conv, whole.conv), 1e-6) << cuts.size() << " pieces";
    }
}

TEST(GatedDeltaNet, ComposedChunkStatesEqualTheJointState) {
    ThreadPool pool(2);
    const Params p = random_params(small_shape(8), 37);
    const GatedDeltaNetLayer layer(p.shape, p.weights());
    const int64_t dm = p.shape.d_model;
    const std::vector<int64_t> lengths{11, 17, 9}; // not multiples of the chunk size
    const int64_t N = 37;
    std::mt19937 rng(9);
    const Vec x = normal(rng, static_cast<size_t>(N * dm), 1.0);

    GatedDeltaNetState joint = layer.make_state(true);
    Vec y(x.size());
    layer.prefill(x.data(), N, y.data(), joint, pool);

    // Each chunk standalone: zero S, but the conv tail the joint run had there, so the per-token
    // q, k, v, β, g are identical.
    GatedDeltaNetState acc = layer.make_state(true);
    Vec s_raw(joint.s.size(), 0.0f), carried_conv(joint.conv.size(), 0.0f), last_chunk_s;
    int64_t from = 0;
    for (const int64_t len : lengths) {
        GatedDeltaNetState chunk = layer.make_state(true);
        chunk.conv = carried_conv;
        Vec yc(static_cast<size_t>(len * dm));
        layer.prefill(&x[from * dm], len, yc.data(), chunk, pool);
        carried_conv = chunk.conv;
        gated_deltanet_compose(p.shape, s_raw.data(), chunk.transition.data(), chunk.s.data());
        gated_deltanet_compose(p.shape, acc, chunk);
        last_chunk_s = chunk.s;
        from += len;
    }
    const double e_raw = rel_err(s_raw, joint.s), e_acc = rel_err(acc.s, joint.s),
                 e_t = rel_err(acc.transition, joint.transition),
                 e_single = rel_err(last_chunk_s, joint.s);
    std::printf("composition: S %.2e (state-level %.2e), T %.2e; single-block %.2e\n", e_raw, e_acc,
                e_t, e_single);
    EXPECT_LT(e_raw, 1e-5);
    EXPECT_LT(e_acc, 1e-5);
    EXPECT_LT(e_t, 1e-5);
    EXPECT_LT(scaled_err(acc.conv, joint.conv), 1e-6);
    EXPECT_GT(e_single, 1e-2) << "the last chunk's own state must miss the earlier chunks";

    // Decoding on from the composed state continues the joint run.
    Vec y1(static_cast<size_t>(dm)), y2(static_cast<size_t>(dm));
    const Vec next = normal(rng, static_cast<size_t>(dm), 1.0);
    layer.decode(next.data(), y1.data(), joint, pool);
    layer.decode(next.data(), y2.data(), acc, pool);
    EXPECT_LT(scaled_err(y2, y1), 1e-5);
}

TEST(GatedDeltaNet, MatchesNumpyFixture) {
    std::ifstream f(std::string(SPANSCOPE_TEST_DATA) + "/reference/fixtures/gated_deltanet.json");
    ASSERT_TRUE(f.good()) << "run tests/reference/make_gated_deltanet_fixtures.py";
    const nlohmann::json j = nlohmann::json::parse(f);
    const auto& js = j.at("shape");
    const auto& jw = j.at("weights");
    const auto& je = j.at("expected");
    Params p;
    p.shape.d_model = js.at("d_model");
    p.shape.n_k_heads = js.at("n_k_heads");
    p.shape.n_v_heads = js.at("n_v_heads");
    p.shape.d_k = js.at("d_k");
    p.shape.d_v = js.at("d_v");
    p.shape.d_conv = js.at("d_conv");
    p.shape.rms_eps = js.at("rms_eps");
    p.shape.l2_eps = js.at("l2_eps");
    const int64_t T = js.at("n_tokens"), dm = p.shape.d_model;
    p.qkv = jw.at("qkv").get<Vec>();
    p.gate = jw.at("gate").get<Vec>();
    p.ba = jw.at("ba").get<Vec>();
    p.out = jw.at("out").get<Vec>();
    p.conv_weight = jw.at("conv_weight").get<Vec>();
    p.dt_bias = jw.at("dt_bias").get<Vec>();
    p.A = jw.at("A").get<Vec>();
    p.norm_weight = jw.at("norm_weight").get<Vec>();
    const Vec x = j.at("x").get<Vec>();
    const auto y_ref = je.at("y").get<std::vector<double>>();
    const auto s_ref = je.at("s").get<std::vector<double>>();
    const auto conv_ref = je.at("conv").get<std::vector<double>>();
    const auto t_ref = je.at("transition").get<std::vector<double>>();
    ASSERT_EQ(x.size(), static_cast<size_t>(T * dm));

    ThreadPool pool(2);
    // Tolerance: fp32 against float64, errors scaled by max(1, max |reference|); measured
    // errors are below 1e-6 (printed below), so 1e-5 leaves room for other BLAS builds.
    constexpr double tol = 1e-5;
    for (const int64_t C : {64, 8, 5}) {
        p.shape.chunk_size = C;
        const GatedDeltaNetLayer layer(p.shape, p.weights());
        GatedDeltaNetState st = layer.make_state(true);
        Vec y(x.size());
        layer.prefill(x.data(), T, y.data(), st, pool);
        const double ey = scaled_err(y, y_ref), es = scaled_err(st.s, s_ref),
                     ec = scaled_err(st.conv, conv_ref), et = scaled_err(st.transition, t_ref);
        std::printf("numpy fixture, C=%lld: y %.2e  S %.2e  conv %.2e  T %.2e\n",
                    static_cast<long long>(C), ey, es, ec, et);
        EXPECT_LT(ey, tol) << "C=" << C;
        EXPECT_LT(es, tol) << "C=" << C;
        EXPECT_LT(ec, 1e-6) << "C=" << C;
        EXPECT_LT(et, tol) << "C=" << C;

        // 30 tokens by prefill, the last 7 by decode.
        GatedDeltaNetState sd = layer.make_state(true);
        Vec yd(x.size());
        layer.prefill(x.data(), 30, yd.data(), sd, pool);
        for (int64_t t = 30; t < T; ++t) {
            layer.decode(&x[t * dm], &yd[t * dm], sd, pool);
        }
        EXPECT_LT(scaled_err(yd, y_ref), tol) << "C=" << C;
        EXPECT_LT(scaled_err(sd.s, s_ref), tol) << "C=" << C;
        EXPECT_LT(scaled_err(sd.transition, t_ref), tol) << "C=" << C;
    }
}

TEST(GatedDeltaNet, LegacyFusedQkvzGivesTheSameLayer) {
    ThreadPool pool(2);
    const Params p = random_params(small_shape(8), 41);
    const GatedDeltaNetShape& s = p.shape;
    // HF's in_proj_qkvz order, as old GGUF files keep it in ssm_in: per k head g,
    // [q_g | k_g | v of heads g·r.. | z of those heads].
    const int64_t dm = s.d_model, dk = s.d_k, kd = s.key_dim(), r = s.n_v_heads / s.n_k_heads,
                  gv = r * s.d_v;
    Vec fused;
    const auto rows = [&](const Vec& m, int64_t first, int64_t count) {
        fused.insert(fused.end(), m.begin() + first * dm, m.begin() + (first + count) * dm);
    };
    for (int64_t g = 0; g < s.n_k_heads; ++g) {
        rows(p.qkv, g * dk, dk);
        rows(p.qkv, kd + g * dk, dk);
        rows(p.qkv, 2 * kd + g * gv, gv);
        rows(p.gate, g * gv, gv);
    }
    GatedDeltaNetWeights w = p.weights();
    w.qkv = WeightMatrix{};
    w.gate = WeightMatrix{};
    w.qkvz = view(fused, s.qkvz_dim(), dm);
    const GatedDeltaNetLayer split(s, p.weights()), legacy(s, w);
    std::mt19937 rng(3);
    const int64_t T = 19;
    const Vec x = normal(rng, static_cast<size_t>(T * dm), 1.0);
    GatedDeltaNetState a = split.make_state(), b = legacy.make_state();
    Vec ya(x.size()), yb(x.size());
    split.prefill(x.data(), T, ya.data(), a, pool);
    legacy.prefill(x.data(), T, yb.data(), b, pool);
    EXPECT_LT(scaled_err(yb, ya), 1e-6);
    EXPECT_LT(scaled_err(b.s, a.s), 1e-6);
}

TEST(GatedDeltaNet, QuantisedWeightsGoThroughMatmul) {
    // Q8_0 projections (rows of 32): the layer must equal the reference on the dequantised
    // weights, up to the activation quantisation matmul does on its few-token path (decode).
    GatedDeltaNetShape shape = small_shape(8);
    shape.d_model = 32;
    shape.d_v = 8; // n_v·d_v = 32 columns for ssm_out
    Params p = random_params(shape, 43);
    std::vector<std::vector<uint8_t>> store;
    store.reserve(4);
    const auto quantise = [&](Vec& m, int64_t rows, int64_t cols) {
        const size_t rb = row_bytes(TensorType::Q8_0, cols);
        std::vector<uint8_t> q(rb * rows);
        for (int64_t i = 0; i < rows; ++i) {
            quantize_row(TensorType::Q8_0, &m[i * cols], &q[i * rb], cols);
            dequantize_row(TensorType::Q8_0, &q[i * rb], &m[i * cols], cols); // for the reference
        }
        store.push_back(std::move(q));
        return WeightMatrix{TensorType::Q8_0, cols, rows, store.back().data(), rb};
    };
    GatedDeltaNetWeights w = p.weights();
    w.qkv = quantise(p.qkv, shape.conv_dim(), shape.d_model);
    w.gate = quantise(p.gate, shape.value_dim(), shape.d_model);
    w.ba = quantise(p.ba, 2 * shape.n_v_heads, shape.d_model);
    w.out = quantise(p.out, shape.d_model, shape.value_dim());
    const GatedDeltaNetLayer layer(shape, w);
    ThreadPool pool(2);
    std::mt19937 rng(4);
    const int64_t T = 21, dm = shape.d_model;
    const Vec x = normal(rng, static_cast<size_t>((T + 1) * dm), 1.0);
    GatedDeltaNetState st = layer.make_state();
    const Outcome ref = reference(p, x, T + 1, st.s, st.conv);
    Vec y(x.size());
    layer.prefill(x.data(), T, y.data(), st, pool);
    layer.decode(&x[T * dm], &y[T * dm], st, pool);
    const std::vector<double> ref_prefill(ref.y.begin(), ref.y.begin() + T * dm),
        ref_decode(ref.y.begin() + T * dm, ref.y.end());
    const double ep = scaled_err(Vec(y.begin(), y.begin() + T * dm), ref_prefill),
                 ed = scaled_err(Vec(y.begin() + T * dm, y.end()), ref_decode),
                 es = scaled_err(st.s, ref.s);
    std::printf("Q8_0 weights: prefill y %.2e, decode y %.2e, S %.2e\n", ep, ed, es);
    EXPECT_LT(ep, 3e-2);
    EXPECT_LT(ed, 3e-2);
    EXPECT_LT(es, 3e-2);
}

namespace {
void expect_invalid(const std::function<void()>& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "no exception; expected one mentioning \"" << needle << "\"";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
            << "message \"" << e.what() << "\" does not mention \"" << needle << "\"";
    }
}
} // namespace

TEST(GatedDeltaNet, BadShapesThrowNamingTheProblem) {
    const Params p = random_params(small_shape(8), 47);
    const auto with_shape = [&](const std::function<void(GatedDeltaNetShape&)>& edit,
                                const std::string& needle) {
        GatedDeltaNetShape s = p.shape;
        edit(s);
        expect_invalid([&] { GatedDeltaNetLayer(s, p.weights()); }, needle);
    };
    with_shape([](auto& s) { s.n_v_heads = 3; }, "not a multiple of n_k_heads");
    with_shape([](auto& s) { s.d_k = 0; }, "d_k must be positive");
    with_shape([](auto& s) { s.chunk_size = 0; }, "chunk_size must be positive");
    with_shape([](auto& s) { s.d_conv = 0; }, "d_conv must be positive");
    with_shape([](auto& s) { s.rms_eps = -1.0f; }, "rms_eps");
    with_shape([](auto& s) { s.d_model = 25; }, "weight qkv is 112 rows x 24 cols");

    const auto with_weights = [&](const std::function<void(GatedDeltaNetWeights&)>& edit,
                                  const std::string& needle) {
        GatedDeltaNetWeights w = p.weights();
        edit(w);
        expect_invalid([&] { GatedDeltaNetLayer(p.shape, w); }, needle);
    };
    with_weights([](auto& w) { w.out.rows -= 1; }, "weight out is");
    with_weights([](auto& w) { w.ba = WeightMatrix{}; }, "weight ba has no data");
    with_weights([&](auto& w) { w.qkvz = view(p.qkv, p.shape.qkvz_dim(), 24); }, "not both");
    with_weights([](auto& w) { w.qkv = w.gate = WeightMatrix{}; }, "no input projection");
    with_weights([](auto& w) { w.conv_weight = nullptr; }, "conv_weight");
    Vec bad_a = p.A;
    bad_a[2] = 0.5f;
    with_weights([&](auto& w) { w.A = bad_a.data(); }, "A[2]");

    const GatedDeltaNetLayer layer(p.shape, p.weights());
    ThreadPool pool(1);
    Vec x(static_cast<size_t>(p.shape.d_model)), y(x.size());
    GatedDeltaNetState wrong = layer.make_state();
    wrong.s.pop_back();
    expect_invalid([&] { layer.prefill(x.data(), 1, y.data(), wrong, pool); }, "s has");
    GatedDeltaNetState st = layer.make_state();
    expect_invalid([&] { layer.prefill(x.data(), -1, y.data(), st, pool); }, "n_tokens");
    expect_invalid([&] { layer.decode(nullptr, y.data(), st, pool); }, "must not be null");
    GatedDeltaNetState acc = layer.make_state(true);
    expect_invalid([&] { gated_deltanet_compose(p.shape, acc, st); }, "does not track");
}

// State initialisers (state_initialiser.h) for Gated DeltaNet: `exact` composes the documents'
// states with their transition matrices into the joint run's state; it needs the transitions.
TEST(GatedDeltaNet, StateInitialisersAfterDocuments) {
    ThreadPool pool(2);
    const Params p = random_params(small_shape(8), 41);
    const GatedDeltaNetLayer layer(p.shape, p.weights());
    const int64_t dm = p.shape.d_model;
    const std::vector<int64_t> docs{7, 12, 10};
    const int64_t N = 29;
    std::mt19937 rng(12);
    const Vec x = normal(rng, static_cast<size_t>(N * dm), 1.0);
    GatedDeltaNetState joint = layer.make_state();
    Vec y(x.size());
    layer.prefill(x.data(), N, y.data(), joint, pool);
    std::vector<GatedDeltaNetState> states;
    Vec tail(joint.conv.size(), 0.0f);
    int64_t from = 0;
    for (const int64_t len : docs) {
        GatedDeltaNetState d = layer.make_state(true);
        d.conv = tail;
        Vec yd(static_cast<size_t>(len * dm));
        layer.prefill(&x[from * dm], len, yd.data(), d, pool);
        tail = d.conv;
        states.push_back(d);
        from += len;
    }
    std::vector<const GatedDeltaNetState*> ptrs;
    for (const auto& s : states)
        ptrs.push_back(&s);
    auto exact = gated_deltanet_initial_state(p.shape, ptrs, StateInitialiser::Exact);
    EXPECT_LT(rel_err(exact.s, joint.s), 1e-5);
    EXPECT_FALSE(exact.tracks_transition());
    const auto single = gated_deltanet_initial_state(p.shape, ptrs, StateInitialiser::SingleBlock);
    EXPECT_EQ(single.s, states.back().s);
    EXPECT_GT(rel_err(single.s, joint.s), 1e-2);
    const auto zero = gated_deltanet_initial_state(p.shape, ptrs, StateInitialiser::Zero);
    EXPECT_EQ(zero.s, Vec(zero.s.size(), 0.0f));
    Vec y1(static_cast<size_t>(dm)), y2(static_cast<size_t>(dm));
    const Vec next = normal(rng, static_cast<size_t>(dm), 1.0);
    layer.decode(next.data(), y1.data(), joint, pool);
    layer.decode(next.data(), y2.data(), exact, pool);
    EXPECT_LT(scaled_err(y2, y1), 1e-5);
    // Without the transition matrices exact composition is impossible, and says so.
    GatedDeltaNetState untracked = layer.make_state();
    try {
        gated_deltanet_initial_state(p.shape, {&untracked}, StateInitialiser::Exact);
        ADD_FAILURE() << "exact without transitions";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("transition"), std::string::npos) << e.what();
    }
}
