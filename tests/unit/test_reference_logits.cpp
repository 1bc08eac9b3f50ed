// The real model against llama.cpp on the same GGUF file (tests/reference/fixtures/logits.json,
// made by tests/reference/make_fixtures.py with llama-cpp-python 0.3.36).
//
// Tolerances. llama.cpp itself is not a fixed point: the fixture records that running the same
// prompt with n_batch 1 instead of 512 moves its logits by up to 3.9 (mean 0.32, 2.0 inside the
// top 20) and flips the top-1 token at 7 of 97 positions, all with a top-1 margin below 0.53;
// its mean NLL moves by 0.03. (It keeps K/V in f16 and quantises activations differently per
// batch size; we keep K/V in f32.) So we ask of our engine what llama.cpp asks of itself:
//   * log-probabilities of llama.cpp's top 20: mean |diff| <= 0.5 and max |diff| <= 1.5 nats at
//     every recorded position (llama.cpp's own batch-size spread reaches 4.0 on log-probs);
//   * top-1 identical wherever llama.cpp's top-1 margin is >= 1.0, and >= 90 % overall;
//   * mean NLL of the prompt tokens within 0.05 nats of llama.cpp's;
//   * greedy continuation: teacher-forced on llama.cpp's tokens, the same top-1 at every step
//     whose margin is >= 1.0; free-running, identical up to the first step whose margin
//     is below 1.0.
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/sampler.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;

namespace {

constexpr double kMarginForAgreement = 1.0;
constexpr double kMaxTop20Diff = 1.5;
constexpr double kMeanTop20Diff = 0.5;
constexpr double kNllTolerance = 0.05;
constexpr double kMinArgmaxAgreement = 0.90;

struct PositionStats {
    int32_t argmax = 0;
    double next_logprob = 0;   // log p(next prompt token)
    std::vector<float> at_ids; // our logits at the fixture's top-20 ids
    double logsumexp = 0;      // over the whole vocabulary
};

class ReferenceLogits : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::ifstream in(data_dir() + "/reference/fixtures/logits.json");
        fixture_ = new nlohmann::json(nlohmann::json::parse(in));
        if (const auto path = real_model_path()) {
            // The fixture belongs to one file: a different model would fail confusingly.
            const auto want = (*fixture_)["meta"]["model_size_bytes"].get<uintmax_t>();
            const auto have = std::filesystem::file_size(*path);
            if (have != want)
                throw std::runtime_error("the installed model " + *path + " has " +
                                         std::to_string(have) +
                                         " bytes; the fixture was made "
                                         "from a file of " +
                                         std::to_string(want) + " bytes");
            model_ = Model::load(*path).release();
        }
    }
    static void TearDownTestSuite() {
        delete model_;
        delete fixture_;
        model_ = nullptr;
    }
    void SetUp() override {
        if (!model_)
            GTEST_SKIP() << "the default model is not installed (bash scripts/setup.sh model)";
    }

    // Run the prompt through the model in ubatches and collect per-position statistics.
    static std::vector<PositionStats> run_prompt(const nlohmann::json& p) {
        const auto tokens = p["tokens"].get<std::vector<int32_t>>();
        std::map<int64_t, std::vector<int32_t>> wanted;
        for (const auto& pos : p["positions"])
            wanted[pos["pos"].get<int64_t>()] = pos["top_ids"].get<std::vector<int32_t>>();
        const int64_t n = static_cast<int64_t>(tokens.size());
        const int64_t V = model_->info().n_vocab;
        constexpr int64_t ub = 64;
        ThreadPool pool(2);
        ModelMemory mem = make_memory(model_->info(), n, ub);
        std::vector<PositionStats> out(static_cast<size_t>(n));
        std::vector<float> logits(static_cast<size_t>(ub * V));
        std::vector<int32_t> pos(ub);
        for (int64_t b = 0; b < n; b += ub) {
            const int64_t m = std::min(ub, n - b);
            std::vector<int64_t> rows(static_cast<size_t>(m));
            for (int64_t i = 0; i < m; ++i) {
                rows[i] = i;
                pos[i] = static_cast<int32_t>(b + i);
            }
            model_->forward(tokens.data() + b, pos.data(), m, mem, rows, logits.data(), pool);
            for (int64_t i = 0; i < m; ++i) {
                const float* l = logits.data() + i * V;
                auto& s = out[b + i];
                s.argmax = argmax(l, static_cast<int32_t>(V));
                double mx = l[s.argmax], sum = 0;
                for (int64_t v = 0; v < V; ++v)
                    sum += std::exp(double(l[v]) - mx);
                const double lse = mx + std::log(sum);
                s.logsumexp = lse;
                if (b + i + 1 < n)
                    s.next_logprob = l[tokens[b + i + 1]] - lse;
                if (auto it = wanted.find(b + i); it != wanted.end())
                    for (int32_t id : it->second)
                        s.at_ids.push_back(l[id]);
            }
        }
        return out;
    }

    static inline nlohmann::json* fixture_ = nullptr;
    static inline Model* model_ = nullptr;
};

} // namespace

TEST_F(ReferenceLogits, PromptsAgreeWithLlamaCpp) {
    for (const auto& p : (*fixture_)["prompts"]) {
        const std::string name = p["name"];
        const auto ours = run_prompt(p);
        const int64_t n = p["n_tokens"].get<int64_t>();
        ASSERT_EQ(static_cast<int64_t>(ours.size()), n);

        // Log-probabilities of llama.cpp's top 20 at the recorded positions (log-probs, not raw
        // logits: a shift of all logits by a constant is not a difference).
        double worst_max = 0, worst_mean = 0;
        for (const auto& pos : p["positions"]) {
            const int64_t at = pos["pos"];
            const auto ref = pos["top_logits"].get<std::vector<double>>();
            const double ref_lse = pos["logsumexp"].get<double>();
            const auto& got = ours[at].at_ids;
            ASSERT_EQ(got.size(), ref.size());
            double mx = 0, mean = 0;
            for (size_t i = 0; i < ref.size(); ++i) {
                const double d = std::abs((got[i] - ours[at].logsumexp) - (ref[i] - ref_lse));
                mx = std::max(mx, d);
                mean += d / ref.size();
            }
            EXPECT_LE(mx, kMaxTop20Diff) << name << " position " << at;
            EXPECT_LE(mean, kMeanTop20Diff) << name << " position " << at;
            worst_max = std::max(worst_max, mx);
            worst_mean = std::max(worst_mean, mean);
        }

        // Top-1 at every position.
        const auto ref_argmax = p["all_positions"]["argmax"].get<std::vector<int32_t>>();
        const auto margin = p["all_positions"]["top1_minus_top2"].get<std::vector<double>>();
        int agree = 0, confident = 0;
        for (int64_t i = 0; i < n; ++i) {
            agree += ours[i].argmax == ref_argmax[i];
            if (margin[i] >= kMarginForAgreement) {
                ++confident;
                EXPECT_EQ(ours[i].argmax, ref_argmax[i])
                    << name << " position " << i << " (llama.cpp margin " << margin[i] << ")";
            }
        }
        EXPECT_GE(agree, kMinArgmaxAgreement * n) << name;

        // Mean negative log-likelihood of the prompt's own tokens.
        double nll = 0;
        for (int64_t i = 0; i + 1 < n; ++i)
            nll -= ours[i].next_logprob;
        nll /= (n - 1);
        const double ref_nll = p["all_positions"]["mean_nll"].get<double>();
        EXPECT_NEAR(nll, ref_nll, kNllTolerance) << name;

        std::printf("%s: %lld tokens, top-20 log-prob |diff| worst max %.3f worst mean %.3f, top-1 "
                    "agreement "
                    "%d/%lld (%d confident positions), NLL %.4f vs llama.cpp %.4f\n",
                    name.c_str(), static_cast<long long>(n), worst_max, worst_mean, agree,
                    static_cast<long long>(n), confident, nll, ref_nll);
    }
}

TEST_F(ReferenceLogits, GreedyContinuationsAgreeWhereTheMarginIsLarge) {
    for (const auto& p : (*fixture_)["prompts"]) {
        const std::string name = p["name"];
        const auto tokens = p["tokens"].get<std::vector<int32_t>>();
        const auto ref_ids = p["greedy"]["ids"].get<std::vector<int32_t>>();
        std::vector<double> margins;
        for (const auto& st : p["greedy"]["steps"])
            margins.push_back(st["margin"].get<double>());
        const int32_t V = model_->info().n_vocab;
        SessionOptions o;
        o.threads = 2;

        // Teacher-forced on llama.cpp's continuation.
        Session forced(*model_, o);
        auto logits = forced.prefill(tokens);
        int confident = 0, confident_same = 0;
        for (size_t i = 0; i < ref_ids.size(); ++i) {
            if (margins[i] >= kMarginForAgreement) {
                ++confident;
                confident_same += argmax(logits.data(), V) == ref_ids[i];
                EXPECT_EQ(argmax(logits.data(), V), ref_ids[i])
                    << name << " step " << i << " (margin " << margins[i] << ")";
            }
            if (i + 1 < ref_ids.size())
                logits = forced.decode(ref_ids[i]);
        }

        // Free-running greedy: identical up to the first uncertain step.
        Session free_run(*model_, o);
        logits = free_run.prefill(tokens);
        size_t same = 0;
        for (size_t i = 0; i < ref_ids.size(); ++i) {
            const int32_t next = argmax(logits.data(), V);
            if (margins[i] < kMarginForAgreement)
                break;
            EXPECT_EQ(next, ref_ids[i]) << name << " step " << i;
            if (next != ref_ids[i])
                break;
            ++same;
            logits = free_run.decode(next);
        }
        // The free-running comparison stops at the first step where llama.cpp itself hesitates
        // (its first greedy step already has a margin of 0.01-0.15 on these prompts); the
        // teacher-forced loop above checks all 32 steps.
        std::printf("%s: teacher-forced top-1 identical at %d of %d confident steps (of %zu); "
                    "free-running greedy identical for the first %zu tokens (stopped at the "
                    "first step with margin < %.1f)\n",
                    name.c_str(), confident_same, confident, ref_ids.size(), same,
                    kMarginForAgreement);
    }
}
