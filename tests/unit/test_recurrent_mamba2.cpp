// The Mamba-2 mixer (engine/recurrent_mamba2.*): chunked SSD prefill against a naive per-token
// reference written here, prefill/decode/split agreement, exact state composition, the numpy
// float64 fixture (tests/reference/make_mamba2_fixtures.py) and shape validation.
#include "engine/kernels/matmul.h"
#include "engine/kernels/quant.h"
#include "engine/kernels/thread_pool.h"
#include "engine/linearkv/state_initialiser.h"
#include "engine/model/recurrent_mamba2.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spanscope;

namespace {

// Owned weights of one layer; view() gives the engine's non-owning Mamba2Weights.
struct OwnedWeights {
    Mamba2Shape shape;
    std::vector<float> in_proj, out_proj, conv_w, conv_b, dt_bias, A, D, norm;
    TensorType proj_type = TensorType::F32;
    std::vector<uint8_t> in_q, out_q; // quantised copies when proj_type != F32

    static WeightMatrix matrix(TensorType type, const uint8_t* data, int64_t rows, int64_t cols) {
        WeightMatrix m;
        m.type = type;
        m.rows = rows;
        m.cols = cols;
        m.data = data;
        m.row_stride = row_bytes(type, cols);
        return m;
    }
    Mamba2Weights view() const {
        Mamba2Weights w;
        const bool q = proj_type != TensorType::F32;
        w.in_proj =
            matrix(proj_type, q ? in_q.data() : reinterpret_cast<const uint8_t*>(in_proj.data()),
                   shape.in_proj_dim(), shape.d_model);
        w.out_proj =
            matrix(proj_type, q ? out_q.data() : reinterpret_cast<const uint8_t*>(out_proj.data()),
                   shape.d_model, shape.d_inner);
        w.conv_weight = conv_w.data();
        w.conv_bias = conv_b.data();
        w.dt_bias = dt_bias.data();
        w.A = A.data();
        w.D = D.data();
        w.norm_weight = norm.data();
        return w;
    }
    // Quantise both projections to `type` and replace the float copies by their dequantisation,
    // so the reference computes with exactly the weights the engine reads.
    void quantise(TensorType type) {
        auto q = [&](std::vector<float>& f, std::vector<uint8_t>& dst, int64_t rows, int64_t cols) {
            const size_t rb = row_bytes(type, cols);
            dst.assign(rb * rows, 0);
            for (int64_t r = 0; r < rows; ++r) {
                quantize_row(type, f.data() + r * cols, dst.data() + r * rb, cols);
                dequantize_row(type, dst.data() + r * rb, f.data() + r * cols, cols);
            }
        };
        q(in_proj, in_q, shape.in_proj_dim(), shape.d_model);
        q(out_proj, out_q, shape.d_model, shape.d_inner);
        proj_type = type;
    }
};

std::vector<float> randn(std::mt19937& rng, size_t n, double mean, double sd) {
    std::normal_distribution<double> d(mean, sd);
    std::vector<float> v(n);
    for (auto& x : v)
        x = static_cast<float>(d(rng));
    return v;
}

std::vector<float> uniform(std::mt19937& rng, size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v)
        x = static_cast<float>(d(rng));
    return v;
}

// Decays moderate enough that a state entering a 20-token stretch still matters at its end.
OwnedWeights make_weights(const Mamba2Shape& s, uint32_t seed) {
    std::mt19937 rng(seed);
    OwnedWeights w;
    w.shape = s;
    const auto H = static_cast<size_t>(s.n_heads);
    w.in_proj = randn(rng, s.in_proj_dim() * s.d_model, 0, 1.0 / std::sqrt(double(s.d_model)));
    w.out_proj = randn(rng, s.d_model * s.d_inner, 0, 1.0 / std::sqrt(double(s.d_inner)));
    w.conv_w = randn(rng, s.conv_dim() * s.d_conv, 0, 0.5);
    w.conv_b = randn(rng, s.conv_dim(), 0, 0.1);
    w.dt_bias = uniform(rng, H, -3.0, -1.0); // softplus: dt ≈ 0.05 .. 0.3
    w.A = uniform(rng, H, -1.0, -0.2);
    w.D = uniform(rng, H, 0.5, 1.5);
    w.norm = uniform(rng, s.d_inner, 0.5, 1.5);
    return w;
}

Mamba2Shape small_shape(int64_t chunk = 16) {
    Mamba2Shape s;
    s.d_model = 24;
    s.n_heads = 6;
    s.head_dim = 4;
    s.d_inner = 24;
    s.d_state = 8;
    s.n_groups = 2; // 3 heads per group
    s.d_conv = 4;
    s.chunk_size = chunk;
    s.rms_eps = 1e-5f;
    return s;
}

// ---- The naive reference: one token at a time, in double, from the formulas (Dao & Gu 2024
// §3.1 eq. 2, §7.1; mamba_ssm Mamba2 with norm_before_gate=False). Independent of the engine.
struct RefState {
    std::vector<double> ssm, conv, log_decay;
};

RefState ref_state(const Mamba2State& s) {
    return {std::vector<double>(s.ssm.begin(), s.ssm.end()),
            std::vector<double>(s.conv.begin(), s.conv.end()),
            std::vector<double>(s.log_decay.begin(), s.log_decay.end())};
}

double softplus_ref(double v) {
    return v <= 20.0 ? std::log1p(std::exp(v)) : v;
}
double silu_ref(double v) {
    return v / (1.0 + std::exp(-v));
}

std::vector<double> reference(const OwnedWeights& w, const float* u, int64_t T, RefState& st) {
    const Mamba2Shape& s = w.shape;
    const int64_t dm = s.d_model, di = s.d_inner, H = s.n_heads, P = s.head_dim, N = s.d_state;
    const int64_t G = s.n_groups, K = s.d_conv, cd = s.conv_dim(), ip = s.in_proj_dim();
    std::vector<double> out(T * dm);
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> zx(ip, 0.0);
        for (int64_t r = 0; r < ip; ++r)
            for (int64_t c = 0; c < dm; ++c)
                zx[r] += double(w.in_proj[r * dm + c]) * u[t * dm + c];
        // Window = [tail rows..., current], oldest first; then shift the tail.
        std::vector<double> xbc(cd);
        for (int64_t c = 0; c < cd; ++c) {
            double acc = w.conv_b[c];
            for (int64_t k = 0; k < K; ++k) {
                const double in = k < K - 1 ? st.conv[k * cd + c] : zx[di + c];
                acc += double(w.conv_w[c * K + k]) * in;
            }
            xbc[c] = silu_ref(acc);
        }
        if (K > 1) {
            st.conv.erase(st.conv.begin(), st.conv.begin() + cd);
            st.conv.insert(st.conv.end(), zx.begin() + di, zx.begin() + di + cd);
        }
        std::vector<double> y(di);
        for (int64_t h = 0; h < H; ++h) {
            const int64_t g = h / (H / G);
            const double dt = softplus_ref(zx[di + cd + h] + w.dt_bias[h]);
            const double decay = std::exp(dt * w.A[h]);
            st.log_decay[h] += dt * w.A[h];
            for (int64_t p = 0; p < P; ++p) {
                const double x = xbc[h * P + p];
                double acc = 0.0;
                for (int64_t n = 0; n < N; ++n) {
                    double& S = st.ssm[(h * P + p) * N + n];
                    S = decay * S + dt * x * xbc[di + g * N + n];
                    acc += S * xbc[di + G * N + g * N + n];
                }
                y[h * P + p] = (acc + w.D[h] * x) * silu_ref(zx[h * P + p]);
            }
        }
        const int64_t gs = di / G;
        for (int64_t g0 = 0; g0 < di; g0 += gs) {
            double ss = 0.0;
            for (int64_t i = g0; i < g0 + gs; ++i)
                ss += y[i] * y[i];
            const double inv = 1.0 / std::sqrt(ss / gs + s.rms_eps);
            for (int64_t i = g0; i < g0 + gs; ++i)
                y[i] *= inv * w.norm[i];
        }
        for (int64_t r = 0; r < dm; ++r) {
            double acc = 0.0;
            for (int64_t c = 0; c < di; ++c)
                acc += double(w.out_proj[r * di + c]) * y[c];
            out[t * dm + r] = acc;
        }
    }
    return out;
}

// max |a − b| / max |b| (b the reference); 0 when both are zero.
template <class A, class B> double rel_err(const A& a, const B& b) {
    EXPECT_EQ(a.size(), b.size());
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        num = std::max(num, std::abs(double(a[i]) - double(b[i])));
        den = std::max(den, std::abs(double(b[i])));
    }
    return den == 0.0 ? num : num / den;
}

constexpr double kTol = 1e-5; // engine fp32 vs reference, relative to the largest magnitude

void randomise_state(Mamba2State& st, uint32_t seed) {
    std::mt19937 rng(seed);
    st.ssm = randn(rng, st.ssm.size(), 0, 0.5);
    st.conv = randn(rng, st.conv.size(), 0, 1.0);
    st.log_decay = uniform(rng, st.log_decay.size(), -2.0, 0.0); // an earlier stretch's sum
}

} // namespace

// 1. Chunked SSD prefill equals the naive recurrence for lengths below, at and across the chunk
// size and below d_conv, from a zero state and from a random one; G = 2 groups of 3 heads.
TEST(RecurrentMamba2, ChunkedPrefillMatchesNaiveReference) {
    const Mamba2Shape shape = small_shape(16);
    const OwnedWeights w = make_weights(shape, 1);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(7);
    double worst = 0.0;
    for (int64_t T : {1, 3, 15, 16, 37}) {
        for (bool random_start : {false, true}) {
            SCOPED_TRACE("T=" + std::to_string(T) +
                         " random_start=" + std::to_string(random_start));
            const std::vector<float> u = randn(rng, T * shape.d_model, 0, 1);
            Mamba2State st = layer.make_state();
            if (random_start)
                randomise_state(st, 100 + uint32_t(T));
            RefState ref = ref_state(st);
            std::vector<float> out(T * shape.d_model);
            layer.prefill(u.data(), T, out.data(), st, pool);
            const std::vector<double> want = reference(w, u.data(), T, ref);
            const double e_out = rel_err(out, want), e_ssm = rel_err(st.ssm, ref.ssm);
            EXPECT_LT(e_out, kTol);
            EXPECT_LT(e_ssm, kTol);
            EXPECT_LT(rel_err(st.conv, ref.conv), 1e-6);
            EXPECT_LT(rel_err(st.log_decay, ref.log_decay), 1e-5);
            worst = std::max({worst, e_out, e_ssm});
        }
    }
    std::printf("[ max rel error chunked prefill vs naive: %.3g ]\n", worst);
}

// 2. Prefill then decodes == one prefill of everything == decodes only.
TEST(RecurrentMamba2, PrefillThenDecodeMatchesPrefillAll) {
    const Mamba2Shape shape = small_shape(8);
    const OwnedWeights w = make_weights(shape, 2);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(8);
    const int64_t T1 = 21, T2 = 6, T = T1 + T2, dm = shape.d_model;
    const std::vector<float> u = randn(rng, T * dm, 0, 1);

    Mamba2State all = layer.make_state();
    std::vector<float> out_all(T * dm);
    layer.prefill(u.data(), T, out_all.data(), all, pool);

    Mamba2State mixed = layer.make_state();
    std::vector<float> out_mixed(T * dm);
    layer.prefill(u.data(), T1, out_mixed.data(), mixed, pool);
    for (int64_t t = T1; t < T; ++t)
        layer.decode(u.data() + t * dm, out_mixed.data() + t * dm, mixed, pool);

    Mamba2State steps = layer.make_state();
    std::vector<float> out_steps(T * dm);
    for (int64_t t = 0; t < T; ++t)
        layer.decode(u.data() + t * dm, out_steps.data() + t * dm, steps, pool);

    const double e1 = rel_err(out_mixed, out_all), e2 = rel_err(out_steps, out_all);
    EXPECT_LT(e1, kTol);
    EXPECT_LT(e2, kTol);
    EXPECT_LT(rel_err(mixed.ssm, all.ssm), kTol);
    EXPECT_LT(rel_err(steps.ssm, all.ssm), kTol);
    EXPECT_LT(rel_err(mixed.conv, all.conv), 1e-6);
    EXPECT_LT(rel_err(steps.conv, all.conv), 1e-6);
    EXPECT_LT(rel_err(steps.log_decay, all.log_decay), 1e-5);
    std::printf("[ max rel error decode vs prefill: %.3g ]\n", std::max(e1, e2));
}

// 3. Prefilling a sequence in pieces (carrying the state) equals one prefill.
TEST(RecurrentMamba2, SplitPrefillMatchesOnePrefill) {
    const Mamba2Shape shape = small_shape(16);
    const OwnedWeights w = make_weights(shape, 3);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(9);
    const int64_t dm = shape.d_model;
    const std::vector<std::vector<int64_t>> splits = {{20, 30}, {2, 17, 31}, {5, 1, 16, 28}};
    for (const auto& pieces : splits) {
        int64_t T = 0;
        for (int64_t n : pieces)
            T += n;
        const std::vector<float> u = randn(rng, T * dm, 0, 1);
        Mamba2State one = layer.make_state(), split = layer.make_state();
        std::vector<float> out_one(T * dm), out_split(T * dm);
        layer.prefill(u.data(), T, out_one.data(), one, pool);
        int64_t t0 = 0;
        for (int64_t n : pieces) {
            layer.prefill(u.data() + t0 * dm, n, out_split.data() + t0 * dm, split, pool);
            t0 += n;
        }
        EXPECT_LT(rel_err(out_split, out_one), kTol);
        EXPECT_LT(rel_err(split.ssm, one.ssm), kTol);
        EXPECT_LT(rel_err(split.conv, one.conv), 1e-6);
        EXPECT_LT(rel_err(split.log_decay, one.log_decay), 1e-5);
    }
}

// 4. Exact composition: pieces run standalone from a zero SSM state (with the right conv tail,
// so every token's x, B, C, dt are those of the joint run) compose to the joint run's state;
// the last piece's state alone (single-block reuse) does not.
TEST(RecurrentMamba2, ComposedChunkStatesEqualJointRun) {
    const Mamba2Shape shape = small_shape(16);
    const OwnedWeights w = make_weights(shape, 4);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(10);
    const int64_t dm = shape.d_model;
    const std::vector<int64_t> pieces = {13, 20, 2, 17};
    const int64_t T = 52;
    const std::vector<float> u = randn(rng, T * dm, 0, 1);
    std::vector<float> out(T * dm);

    Mamba2State joint = layer.make_state();
    layer.prefill(u.data(), T, out.data(), joint, pool);

    Mamba2State acc = layer.make_state();           // state-level composition
    std::vector<float> raw(joint.ssm.size(), 0.0f); // the raw-array form
    std::vector<float> tail(joint.conv.size(), 0.0f);
    Mamba2State last;
    int64_t t0 = 0;
    for (int64_t n : pieces) {
        Mamba2State piece = layer.make_state();
        piece.conv = tail; // zero ssm and log_decay, the conv tail the joint run had here
        layer.prefill(u.data() + t0 * dm, n, out.data() + t0 * dm, piece, pool);
        tail = piece.conv;
        for (float a : piece.log_decay)
            EXPECT_LE(a, 0.0f);
        mamba2_compose(shape, raw.data(), piece.ssm.data(), piece.log_decay.data());
        mamba2_compose(shape, acc, piece);
        last = piece;
        t0 += n;
    }
    const double e_comp = rel_err(acc.ssm, joint.ssm);
    EXPECT_LT(e_comp, 1e-5);
    EXPECT_LT(rel_err(raw, joint.ssm), 1e-5);
    EXPECT_LT(rel_err(acc.log_decay, joint.log_decay), 1e-5);
    EXPECT_LT(rel_err(acc.conv, joint.conv), 1e-6); // matmul paths differ by token count
    const double e_single = rel_err(last.ssm, joint.ssm);
    EXPECT_GT(e_single, 1e-2) << "single-block reuse should not be exact here";
    std::printf("[ composed vs joint: %.3g; single-block vs joint: %.3g ]\n", e_comp, e_single);

    // Bad input to the composition.
    std::vector<float> positive(shape.n_heads, 0.5f);
    EXPECT_THROW(mamba2_compose(shape, raw.data(), raw.data(), positive.data()),
                 std::invalid_argument);
}

// 5. The independent numpy float64 reference (tests/reference/make_mamba2_fixtures.py), run as
// prefill with chunks of 8 (37 = 4·8 + 5) and 64, and as decodes; then 6 more tokens.
TEST(RecurrentMamba2, MatchesNumpyFixture) {
    std::ifstream f(std::string(SPANSCOPE_TEST_DATA) + "/reference/fixtures/mamba2.json");
    ASSERT_TRUE(f) << "missing tests/reference/fixtures/mamba2.json";
    const nlohmann::json j = nlohmann::json::parse(f);
    const auto& js = j.at("shape");
    Mamba2Shape shape;
    shape.d_model = js.at("d_model");
    shape.d_inner = js.at("d_inner");
    shape.d_state = js.at("d_state");
    shape.n_heads = js.at("n_heads");
    shape.head_dim = js.at("head_dim");
    shape.n_groups = js.at("n_groups");
    shape.d_conv = js.at("d_conv");
    shape.rms_eps = js.at("rms_eps").get<float>();
    OwnedWeights w;
    w.shape = shape;
    const auto& jw = j.at("weights");
    w.in_proj = jw.at("in_proj").get<std::vector<float>>();
    w.out_proj = jw.at("out_proj").get<std::vector<float>>();
    w.conv_w = jw.at("conv_weight").get<std::vector<float>>();
    w.conv_b = jw.at("conv_bias").get<std::vector<float>>();
    w.dt_bias = jw.at("dt_bias").get<std::vector<float>>();
    w.A = jw.at("A").get<std::vector<float>>();
    w.D = jw.at("D").get<std::vector<float>>();
    w.norm = jw.at("norm_weight").get<std::vector<float>>();
    ThreadPool pool(2);

    // Tolerance: fp32 engine vs float64 numpy, relative to the largest magnitude.
    constexpr double kFixtureTol = 1e-5;
    double worst = 0.0;
    for (int mode = 0; mode < 3; ++mode) { // 0: chunk 8, 1: chunk 64, 2: decode only
        SCOPED_TRACE("mode " + std::to_string(mode));
        shape.chunk_size = mode == 0 ? 8 : 64;
        const Mamba2Layer layer(shape, w.view());
        Mamba2State st = layer.make_state();
        for (const char* part : {"first", "second"}) {
            SCOPED_TRACE(part);
            const auto& jp = j.at(part);
            const int64_t T = jp.at("n_tokens");
            const auto u = jp.at("u").get<std::vector<float>>();
            ASSERT_EQ(u.size(), size_t(T * shape.d_model));
            std::vector<float> out(T * shape.d_model);
            if (mode < 2)
                layer.prefill(u.data(), T, out.data(), st, pool);
            else
                for (int64_t t = 0; t < T; ++t)
                    layer.decode(u.data() + t * shape.d_model, out.data() + t * shape.d_model, st,
                                 pool);
            const double e_y = rel_err(out, jp.at("y").get<std::vector<double>>());
            const double e_s = rel_err(st.ssm, jp.at("ssm").get<std::vector<double>>());
            EXPECT_LT(e_y, kFixtureTol);
            EXPECT_LT(e_s, kFixtureTol);
            EXPECT_LT(rel_err(st.conv, jp.at("conv").get<std::vector<double>>()), 1e-6);
            EXPECT_LT(rel_err(st.log_decay, jp.at("log_decay").get<std::vector<double>>()), 1e-5);
            worst = std::max({worst, e_y, e_s});
        }
    }
    std::printf("[ max rel error vs numpy fixture: %.3g ]\n", worst);
}

// Quantised projections go through matmul(): with Q8_0 in_proj/out_proj the chunked prefill
// (T >= 8: the matrix-product path) still equals the reference computed with the dequantised
// weights. With float products (PrefillProducts::Float) to the engine's fp32 tolerance; with the
// integer products (qgemm.h, the default) to the rounding of their int16 activations: half a step
// is 2^-16 of a block's largest magnitude; through two chained projections of fan-in 32 the bound
// is 32 times that, 16 · 2^-15 (the measured error is 6.8e-5).
TEST(RecurrentMamba2, QuantisedProjectionsMatchReference) {
    Mamba2Shape shape = small_shape(16);
    shape.d_model = 32; // Q8_0 rows are whole 32-element blocks
    shape.n_heads = 8;
    shape.d_inner = 32;
    OwnedWeights w = make_weights(shape, 5);
    w.quantise(TensorType::Q8_0);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(11);
    const int64_t T = 40;
    const std::vector<float> u = randn(rng, T * shape.d_model, 0, 1);
    struct Restore {
        ~Restore() { set_prefill_products(PrefillProducts::Integer); }
    } restore;
    for (const auto products : {PrefillProducts::Float, PrefillProducts::Integer}) {
        set_prefill_products(products);
        const double tol = products == PrefillProducts::Float ? kTol : 16.0 * std::ldexp(1.0, -15);
        Mamba2State st = layer.make_state();
        RefState ref = ref_state(st);
        std::vector<float> out(T * shape.d_model);
        layer.prefill(u.data(), T, out.data(), st, pool);
        const std::vector<double> want = reference(w, u.data(), T, ref);
        EXPECT_LT(rel_err(out, want), tol) << static_cast<int>(products);
        EXPECT_LT(rel_err(st.ssm, ref.ssm), tol) << static_cast<int>(products);
    }
}

// 6. Inconsistent shapes and states are rejected with a message naming the problem.
TEST(RecurrentMamba2, BadShapesThrow) {
    const Mamba2Shape good = small_shape();
    const OwnedWeights w = make_weights(good, 6);
    auto expect_throw = [&](const Mamba2Shape& s, const Mamba2Weights& wv, const char* needle) {
        try {
            Mamba2Layer layer(s, wv);
            ADD_FAILURE() << "no exception; expected one mentioning '" << needle << "'";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    EXPECT_NO_THROW(Mamba2Layer(good, w.view()));

    Mamba2Shape s = good;
    s.n_groups = 4; // 6 heads, 4 groups
    expect_throw(s, w.view(), "not divisible by n_groups");
    s = good;
    s.d_inner = 20;
    expect_throw(s, w.view(), "d_inner (20) != n_heads * head_dim");
    s = good;
    s.d_state = 0;
    expect_throw(s, w.view(), "d_state must be positive");
    s = good;
    s.chunk_size = 0;
    expect_throw(s, w.view(), "chunk_size must be positive");

    Mamba2Weights bad = w.view();
    bad.in_proj.rows -= 1;
    expect_throw(good, bad, "in_proj (ssm_in) is 85x24 (rows x cols), expected 86x24");
    bad = w.view();
    bad.out_proj.cols = 16;
    expect_throw(good, bad, "out_proj (ssm_out)");
    bad = w.view();
    bad.A = nullptr;
    expect_throw(good, bad, "A (ssm_a) is missing");
    std::vector<float> a_log(w.A.size(), 0.3f); // A_log stored where A belongs
    bad = w.view();
    bad.A = a_log.data();
    expect_throw(good, bad, "must be finite and <= 0");

    const Mamba2Layer layer(good, w.view());
    ThreadPool pool(1);
    std::vector<float> u(good.d_model, 0.1f), out(good.d_model);
    Mamba2State st = layer.make_state();
    st.conv.pop_back();
    try {
        layer.prefill(u.data(), 1, out.data(), st, pool);
        ADD_FAILURE() << "no exception for a short conv tail";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("conv tail"), std::string::npos) << e.what();
    }
    st = layer.make_state();
    st.ssm.resize(3);
    EXPECT_THROW(layer.decode(u.data(), out.data(), st, pool), std::invalid_argument);
    st = layer.make_state();
    EXPECT_THROW(layer.prefill(u.data(), -1, out.data(), st, pool), std::invalid_argument);
    EXPECT_NO_THROW(layer.prefill(nullptr, 0, nullptr, st, pool)); // nothing to do
}

// State initialisers (state_initialiser.h): after documents run on their own, `exact` gives the
// joint run's state (documents with the conv tail the joint run had), `single-block` the last
// document's own state and `zero` nothing; the question decoded after each.
TEST(RecurrentMamba2, StateInitialisersAfterDocuments) {
    const Mamba2Shape shape = small_shape(16);
    const OwnedWeights w = make_weights(shape, 5);
    const Mamba2Layer layer(shape, w.view());
    ThreadPool pool(2);
    std::mt19937 rng(11);
    const int64_t dm = shape.d_model;
    const std::vector<int64_t> docs = {9, 14, 6};
    const int64_t T = 29;
    const std::vector<float> u = randn(rng, T * dm, 0, 1), q = randn(rng, dm, 0, 1);
    std::vector<float> out(T * dm), y_joint(dm), y(dm);
    Mamba2State joint = layer.make_state();
    layer.prefill(u.data(), T, out.data(), joint, pool);
    std::vector<Mamba2State> states;
    std::vector<float> tail(joint.conv.size(), 0.0f);
    int64_t t0 = 0;
    for (const int64_t n : docs) {
        Mamba2State d = layer.make_state();
        d.conv = tail;
        layer.prefill(u.data() + t0 * dm, n, out.data() + t0 * dm, d, pool);
        tail = d.conv;
        states.push_back(d);
        t0 += n;
    }
    std::vector<const Mamba2State*> ptrs;
    for (const auto& s : states)
        ptrs.push_back(&s);
    auto exact = mamba2_initial_state(shape, ptrs, parse_state_initialiser("exact"));
    EXPECT_LT(rel_err(exact.ssm, joint.ssm), 1e-5);
    EXPECT_LT(rel_err(exact.conv, joint.conv), 1e-6); // matmul paths differ by token count
    const auto single = mamba2_initial_state(shape, ptrs, StateInitialiser::SingleBlock);
    EXPECT_EQ(single.ssm, states.back().ssm);
    EXPECT_EQ(single.conv, states.back().conv);
    EXPECT_GT(rel_err(single.ssm, joint.ssm), 1e-2);
    const auto zero = mamba2_initial_state(shape, ptrs, StateInitialiser::Zero);
    EXPECT_EQ(zero.ssm, std::vector<float>(zero.ssm.size(), 0.0f));
    EXPECT_EQ(zero.conv, std::vector<float>(zero.conv.size(), 0.0f));
    layer.decode(q.data(), y_joint.data(), joint, pool);
    layer.decode(q.data(), y.data(), exact, pool);
    EXPECT_LT(rel_err(y, y_joint), 1e-5);
    EXPECT_THROW(mamba2_initial_state(shape, {}, StateInitialiser::Exact), std::invalid_argument);
    EXPECT_THROW(parse_state_initialiser("average"), std::invalid_argument);
}
