// A real Llama-architecture model (SmolLM2-135M-Instruct: 30 layers, 3 KV heads of 64, ChatML,
// no BOS) through a project as a user meets it with spanscope-cli: a document ingested, then the
// project asked from its stored states under `full` and under the default `sekv`. The engine
// counts every document token as reused, and the answer is the same greedy answer as a cold
// `ask --doc` of the same document (tests/README.md, failure modes 5 and 9). Skipped with a
// printed reason when the model or the license text is not installed.
#include "cli_runner.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

using namespace spanscope::test;
using nlohmann::json;

namespace {

json last_json(const CliRun& r) {
    const auto b = r.out.find('{');
    if (b == std::string::npos)
        return json();
    return json::parse(r.out.substr(b), nullptr, false);
}

TEST(LlamaProject, ReopenedProjectAnswersFromItsStoredStatesLikeAColdRun) {
    const auto model = smollm2_model_path();
    if (!model)
        GTEST_SKIP() << "SmolLM2-135M-Instruct is not installed (bash scripts/setup.sh model)";
    std::ifstream in("/usr/share/common-licenses/GPL-3");
    if (!in)
        GTEST_SKIP() << "/usr/share/common-licenses/GPL-3 is missing (package base-files)";
    std::string text(std::istreambuf_iterator<char>(in), {});
    const auto cut = text.find('\n', 5000);
    ASSERT_NE(cut, std::string::npos) << "GPL-3 is shorter than expected";
    text.resize(cut + 1); // the preamble: one chunk, ~1 100 tokens
    const auto dir = temp_dir();
    const std::string doc = dir + "/gpl-preamble.txt", project = dir + "/p.spanscope";
    std::ofstream(doc) << text;

    const CliRun ingest = run_cli(
        dir, {}, {"ingest", "--model", *model, "--project", project, "--threads", "2", doc});
    ASSERT_EQ(ingest.status, 0) << ingest.err;
    const CliRun list = run_cli(
        dir, {}, {"project", "list-docs", "--json", "--project", project, "--model", *model});
    ASSERT_EQ(list.status, 0) << list.err;
    const json docs = json::parse(list.out.substr(list.out.find('[')));
    ASSERT_EQ(docs.size(), 1u) << list.out;
    const int64_t doc_tokens = docs[0]["tokens"];
    ASSERT_GT(doc_tokens, 500);

    const std::string q = "Why does the GPL exist, according to its preamble?";
    for (const std::string policy : {"full", "sekv"}) {
        const CliRun warm_run =
            run_cli(dir, {},
                    {"ask", "--project", project, "--model", *model, "--policy", policy, "--json",
                     "--threads", "2", "--max-tokens", "24", q});
        ASSERT_EQ(warm_run.status, 0) << warm_run.err;
        const json warm = last_json(warm_run);
        ASSERT_TRUE(warm.is_object()) << warm_run.out;
        const auto& s = warm["stats"];
        EXPECT_EQ(s["tokens_reused"], doc_tokens) << policy << ": " << warm;
        EXPECT_EQ(s["tokens_computed"].get<int64_t>(),
                  s["prompt_tokens"].get<int64_t>() - s["tokens_reused"].get<int64_t>())
            << policy << ": " << warm;

        const CliRun cold_run = run_cli(dir, {},
                                        {"ask", "--doc", doc, "--model", *model, "--policy", policy,
                                         "--json", "--threads", "2", "--max-tokens", "24", q});
        ASSERT_EQ(cold_run.status, 0) << cold_run.err;
        const json cold = last_json(cold_run);
        ASSERT_TRUE(cold.is_object()) << cold_run.out;
        EXPECT_EQ(cold["stats"]["tokens_reused"], 0) << policy << ": " << cold;
        EXPECT_EQ(warm["stats"]["prompt_tokens"], cold["stats"]["prompt_tokens"]) << policy;
        EXPECT_EQ(warm["answer"], cold["answer"]) << policy;
        EXPECT_FALSE(warm["answer"].get<std::string>().empty()) << policy;
        std::printf("%s: %lld document tokens reused of %lld in the prompt; answer: %s\n",
                    policy.c_str(), static_cast<long long>(s["tokens_reused"].get<int64_t>()),
                    static_cast<long long>(s["prompt_tokens"].get<int64_t>()),
                    warm["answer"].get<std::string>().c_str());
    }
    std::filesystem::remove_all(dir);
}

} // namespace
