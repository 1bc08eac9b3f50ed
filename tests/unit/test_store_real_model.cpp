// The project store with the real model (skipped with a printed reason when it is not
// installed): a document ingested into a project and restored in a fresh session gives the
// cold prefill's next-token logits exactly and the same greedy answer, with every document
// token reused (tests/README.md, failure modes 5 and 9). SPANSCOPE_STORE_TEST_TOKENS sets the
// document length (default 1200 tokens; docs/project-store.md records a 16 000-token run).
#include "answering/state_cache.h"
#include "engine/text/chunking.h"
#include "engine/text/prompt.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
} // namespace

TEST(StoreRealModel, WarmAnswerEqualsColdAnswer) {
    const auto path = real_model_path();
    if (!path)
        GTEST_SKIP() << "the default model is not installed (bash scripts/setup.sh model)";
    const char* env = std::getenv("SPANSCOPE_STORE_TEST_TOKENS");
    const int64_t want_tokens = env ? std::atoll(env) : 1200;
    auto model = Model::load(*path);

    // Chapters of the vim user manual (Debian's vim-runtime) until the length is reached.
    std::string text;
    for (int ch = 1; ch <= 45; ++ch) {
        char name[64];
        std::snprintf(name, sizeof name, "/usr/share/vim/vim90/doc/usr_%02d.txt", ch);
        std::ifstream in(name);
        if (!in)
            continue;
        text += std::string(std::istreambuf_iterator<char>(in), {});
        if (static_cast<int64_t>(model->tokenizer().encode(text).size()) >= want_tokens)
            break;
    }
    if (text.empty())
        GTEST_SKIP() << "the vim user manual is not installed (package vim-runtime)";
    // Cut to about the wanted length at a line end.
    while (static_cast<int64_t>(model->tokenizer().encode(text).size()) > want_tokens * 11 / 10) {
        const auto cut = text.rfind('\n', text.size() * 9 / 10);
        text.resize(cut + 1);
    }

    const auto dir = temp_dir();
    auto project = Project::open(dir + "/p.spanscope", true);
    const auto id = project->add_document("/vim-manual.txt", text_document(text));
    ChunkingOptions co;
    co.target_tokens = 1024;
    co.max_unit_tokens = model->info().n_ctx_train - 1024;
    StateCache cache(*project, *model, co);
    SessionOptions so;
    so.threads = 2;
    Session scratch(*model, so);
    const auto t_ingest = Clock::now();
    const auto r = cache.ingest(id, scratch);
    const double ingest_ms = ms_since(t_ingest);
    ASSERT_EQ(r.units, 1);
    const auto unit = cache.units(id)[0];
    const auto question = question_tokens(model->tokenizer(), ChatFormat::Completion,
                                          "Which command quits Vim without saving?");

    // Each side: the document, then the question's first token alone (its logits are the
    // next-token logits right after the document's last token has been attended to), then the
    // rest of the question and the answer.
    const std::vector<int32_t> rest(question.begin() + 1, question.end());
    const auto t_cold = Clock::now();
    Session cold(*model, so);
    prefill_unit(cold, unit, 0, 0, {}, nullptr, {}, false);
    const auto lc = cold.decode(question.front());
    const double cold_prefill = ms_since(t_cold);
    // The turn style stops only at an end-of-generation token or after 24 tokens, so the
    // comparison covers 24 greedy tokens, not just an answer's first line.
    const auto cold_ans = cold.answer_after_context(rest, ChatFormat::Gemma, 24, {});
    const double cold_ttft = cold_prefill + cold_ans.stats.ttft_ms;

    const auto t_warm = Clock::now();
    Session warm(*model, so);
    const auto restored = cache.restore_unit(cache.load_unit(id, 0), warm, 0);
    warm.adopt_memory(unit.n_tokens());
    EXPECT_EQ(warm.tokens_processed(), 0);
    const auto lw = warm.decode(question.front());
    const double warm_restore = ms_since(t_warm);
    const auto warm_ans = warm.answer_after_context(rest, ChatFormat::Gemma, 24, {});
    const double warm_ttft = warm_restore + warm_ans.stats.ttft_ms;

    EXPECT_EQ(restored, unit.n_tokens()) << "every document token reused";
    EXPECT_EQ(warm_ans.stats.tokens_computed, static_cast<int64_t>(rest.size()))
        << "only the question computed";
    EXPECT_EQ(cold_ans.tokens, warm_ans.tokens)
        << "cold: " << cold_ans.text << "\nwarm: " << warm_ans.text;
    float diff = 0;
    for (size_t i = 0; i < lc.size(); ++i)
        diff = std::max(diff, std::abs(lc[i] - lw[i]));
    EXPECT_EQ(diff, 0.0f) << "restored K/V are the f16 values the cold prefill holds";
    std::printf("document %lld tokens in %lld chunks; ingest %.0f ms (%lld bytes stored, %lld per "
                "token); TTFT cold %.0f ms, warm %.0f ms (%.2f %%); max |logit diff| %.3g; "
                "%zu greedy tokens: %s\n",
                static_cast<long long>(unit.n_tokens()), static_cast<long long>(r.chunks),
                ingest_ms, static_cast<long long>(r.bytes_stored),
                static_cast<long long>(r.bytes_stored / r.tokens), cold_ttft, warm_ttft,
                100.0 * warm_ttft / cold_ttft, diff, warm_ans.tokens.size(), warm_ans.text.c_str());
    project.reset();
    fs::remove_all(dir);
}
