// Surprisal on a real document (the GPL-3 text of Debian's base-files) with the real model:
// the integer prefill products and the fused output product (qgemm.h, surprisal.h) against the
// engine's float numerics (PrefillProducts::Float: weights dequantised, float activations,
// OpenBLAS sgemm, the vocabulary in slices), computed in the same process.
//
// The float numerics are not a fixed point themselves: on this text, the float path run with
// OpenBLAS's SkylakeX kernels and with its Prescott kernels differs by 3.8e-4 nats per token on
// average and 1.3e-2 at worst (Haswell: 3.6e-4 and 6.3e-3; measured with
// OPENBLAS_CORETYPE, docs/benchmarks.md "Numbers"). So the bound is on the mean, 1e-3 nats, and the
// worst token may differ by as much as the float kernels differ among themselves, 4 times over.
#include "engine/kernels/matmul.h"
#include "engine/model/model.h"
#include "engine/model/surprisal.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace spanscope;
using namespace spanscope::test;

namespace {

constexpr const char* kDocument = "/usr/share/common-licenses/GPL-3";
constexpr int64_t kTokens = 1024;
constexpr int64_t kUbatch = 512;

/// Sets the prefill products for a scope and restores the integer ones, also on a failure.
struct ProductsGuard {
    explicit ProductsGuard(PrefillProducts p) { set_prefill_products(p); }
    ~ProductsGuard() { set_prefill_products(PrefillProducts::Integer); }
    ProductsGuard(const ProductsGuard&) = delete;
    ProductsGuard& operator=(const ProductsGuard&) = delete;
};

std::vector<float> surprisals(const Model& m, const std::vector<int32_t>& tokens,
                              PrefillProducts products) {
    const ProductsGuard guard(products);
    ThreadPool pool(2);
    const int64_t n = static_cast<int64_t>(tokens.size()) - 1;
    ModelMemory mem = make_memory(m.info(), n, kUbatch);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; b += kUbatch) {
        const int64_t nb = std::min(kUbatch, n - b);
        std::vector<int32_t> pos(static_cast<size_t>(nb));
        for (int64_t i = 0; i < nb; ++i)
            pos[static_cast<size_t>(i)] = static_cast<int32_t>(b + i);
        SurprisalRequest req{tokens.data() + b + 1, out.data() + b};
        m.forward(tokens.data() + b, pos.data(), nb, mem, {}, nullptr, pool, &req);
    }
    return out;
}

} // namespace

TEST(SurprisalReal, IntegerProductsMatchTheFloatNumericsOnARealDocument) {
    const auto path = real_model_path();
    if (!path)
        GTEST_SKIP() << "the default model is not installed (scripts/setup.sh model)";
    std::ifstream in(kDocument);
    if (!in)
        GTEST_SKIP() << kDocument << " is missing (Debian package base-files)";
    std::stringstream text;
    text << in.rdbuf();
    auto m = Model::load(*path);
    auto tokens = m->tokenizer().encode(text.str());
    ASSERT_GT(static_cast<int64_t>(tokens.size()), kTokens);
    tokens.resize(static_cast<size_t>(kTokens));
    tokens.insert(tokens.begin(), m->tokenizer().bos());

    const auto fast = surprisals(*m, tokens, PrefillProducts::Integer);
    const auto ref = surprisals(*m, tokens, PrefillProducts::Float);
    double sum = 0.0, worst = 0.0, mean_ref = 0.0;
    for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_TRUE(std::isfinite(fast[i])) << i;
        const double diff = std::fabs(static_cast<double>(fast[i]) - ref[i]);
        sum += diff;
        worst = std::max(worst, diff);
        mean_ref += ref[i];
    }
    const double mean = sum / static_cast<double>(ref.size());
    std::printf(
        "surprisal over %zu tokens: mean %.3f nats; |integer - float| mean %.2e, max %.2e\n",
        ref.size(), mean_ref / static_cast<double>(ref.size()), mean, worst);
    EXPECT_LE(mean, 1e-3);
    EXPECT_LE(worst, 4 * 1.3e-2);
}
