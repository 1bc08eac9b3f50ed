// `spanscope-lab eval`, the harness the cache policies are judged by: the small configuration
// of tests/fixtures/ci-eval.json on the real model (full keeps its recorded score; every policy at
// a budget covering the context answers exactly as full; every compressed answer kept its
// budget), and the same contract on a tiny model, which runs everywhere.
#include "cli_runner.h"
#include "engine/model/model.h"
#include "engine/sekv/router_params.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sys/wait.h>

using namespace spanscope;

namespace {
struct EvalRun {
    int status = -1;
    nlohmann::json out;
    std::string err;
};

EvalRun run_eval(const std::vector<std::string>& args, const std::string& command = "eval") {
    const std::string dir = test::temp_dir();
    std::vector<std::string> all{command};
    all.insert(all.end(), args.begin(), args.end());
    const auto run = test::run_cli(dir, {}, all);
    EvalRun r;
    r.status = run.status;
    r.out = nlohmann::json::parse(run.out, nullptr, false);
    r.err = run.err;
    std::filesystem::remove_all(dir);
    return r;
}

// Every policy at budget 1.0 gave full's answer with full's next-token distributions; every
// compressed answer at a smaller budget kept it and held less than full.
void expect_contract(const nlohmann::json& results) {
    std::map<std::string, std::string> full_answer;
    std::map<std::string, nlohmann::json> full_memory, full_tokens;
    auto sample = [](const nlohmann::json& j) {
        return std::to_string(j["target_length"].get<int64_t>()) + "#" +
               std::to_string(j["index"].get<int64_t>());
    };
    for (const auto& j : results)
        if (j["policy"] == "full") {
            full_answer[sample(j)] = j["answer"];
            full_memory[sample(j)] = j["memory"];
            full_tokens[sample(j)] = j["answer_tokens"];
            // full is measured like the others, on the layers they serve.
            EXPECT_GT(j["memory"]["full_kv_bytes"].get<int64_t>(), 0) << j.dump();
            EXPECT_EQ(j["memory"]["fast_tier_bytes"], j["memory"]["full_kv_bytes"]) << j.dump();
            EXPECT_EQ(j["fast_tier_fraction"].get<double>(), 1.0) << j.dump();
            EXPECT_EQ(j["cache_fraction"].get<double>(), 1.0) << "full is its own measure";
            EXPECT_TRUE(j["within_budget"].get<bool>()) << j.dump();
        }
    int compressed = 0, noop = 0, same_length = 0;
    for (const auto& j : results) {
        if (j["policy"] == "full")
            continue;
        const double budget = j["budget"];
        EXPECT_TRUE(j["within_budget"].get<bool>()) << j.dump();
        if (budget >= 1.0) {
            ++noop;
            EXPECT_EQ(j["answer"], full_answer.at(sample(j))) << j.dump();
            EXPECT_EQ(j["fidelity"]["greedy_agreement"].get<double>(), 1.0) << j.dump();
            EXPECT_EQ(j["fidelity"]["top1_agreement"].get<double>(), 1.0) << j.dump();
            EXPECT_EQ(j["fidelity"]["kl"].get<double>(), 0.0) << "bit-identical logits";
            EXPECT_EQ(j["fast_tier_fraction"].get<double>(), 1.0) << j.dump();
            EXPECT_EQ(j["memory"]["fast_tier_bytes"], full_memory.at(sample(j))["fast_tier_bytes"])
                << j.dump();
        } else {
            ++compressed;
            EXPECT_LE(j["fast_tier_fraction"].get<double>(), budget) << j.dump();
            EXPECT_GT(j["memory"]["full_kv_bytes"].get<int64_t>(), 0) << j.dump();
            // The denominator is what full held for the same tokens.
            const auto& fm = full_memory.at(sample(j));
            if (j["answer_tokens"] == full_tokens.at(sample(j))) {
                ++same_length;
                EXPECT_EQ(j["memory"]["full_kv_bytes"], fm["full_kv_bytes"]) << j.dump();
            }
        }
    }
    EXPECT_GT(noop, 0);
    EXPECT_GT(compressed, 0);
    EXPECT_GT(same_length, 0);
}
// A fresh directory holding tiny.gguf, a tiny Gemma 3 with a 2048-token context.
std::string tiny_model_dir() {
    const std::string dir = test::temp_dir();
    test::TinyGemma3Config cfg;
    cfg.n_ctx = 2048;
    test::write_tiny_gemma3(dir + "/tiny.gguf", cfg);
    return dir;
}
} // namespace

TEST(EvalCli, EveryPolicyOnATinyModelKeepsItsBudgetAndAFullBudgetIsExact) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    const auto r = run_eval({"niah", "--model", dir + "/tiny.gguf", "--lengths", "600", "--samples",
                             "2", "--max-tokens", "4", "--threads", "2", "--policy",
                             "full,sekv,chunk_summary,snapkv,h2o,streaming", "--budget", "1.0,0.5",
                             "--json", "--quiet", "--out", dir + "/r.jsonl"});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_TRUE(r.out.is_object()) << r.err;
    ASSERT_EQ(r.out["results"].size(), 2u * 11u);
    expect_contract(r.out["results"]);
    ASSERT_EQ(r.out["summaries"].size(), 11u);
    for (const auto& s : r.out["summaries"])
        EXPECT_EQ(s["samples"], 2);
    // Resumed: nothing is computed again, the same results come back from the file.
    const auto again =
        run_eval({"niah", "--model", dir + "/tiny.gguf", "--lengths", "600", "--samples", "2",
                  "--max-tokens", "4", "--threads", "2", "--policy",
                  "full,sekv,chunk_summary,snapkv,h2o,streaming", "--budget", "1.0,0.5", "--json",
                  "--quiet", "--out", dir + "/r.jsonl"});
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(again.out["summaries"], r.out["summaries"]);
    const std::string file = test::read_file(dir + "/r.jsonl");
    EXPECT_EQ(std::count(file.begin(), file.end(), '\n'), 1 + 22)
        << "one run's line and 22 results: the resumed run wrote nothing";
    std::filesystem::remove_all(dir);
}

// A context too short for the budget is kept whole: every such answer is recorded over budget
// and the run fails, unless --allow-over-budget says the caller knows.
TEST(EvalCli, AnswersOverTheirBudgetAreCountedAndFailTheRun) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    std::vector<std::string> args{
        "niah",      "--model",  dir + "/tiny.gguf", "--lengths", "256",
        "--samples", "1",        "--max-tokens",     "2",         "--threads",
        "2",         "--policy", "full,streaming",   "--budget",  "0.05",
        "--json",    "--quiet"};
    const auto r = run_eval(args);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("held more than their budget"), std::string::npos) << r.err;
    ASSERT_TRUE(r.out.is_object()) << r.err;
    bool seen = false;
    for (const auto& s : r.out["summaries"])
        if (s["policy"] == "streaming") {
            seen = true;
            EXPECT_EQ(s["samples_over_budget"], 1) << s.dump();
        }
    EXPECT_TRUE(seen);
    for (const auto& j : r.out["results"])
        if (j["policy"] == "streaming") {
            EXPECT_FALSE(j["within_budget"].get<bool>()) << j.dump();
            EXPECT_GT(j["fast_tier_fraction"].get<double>(), 0.05) << j.dump();
        }
    args.push_back("--allow-over-budget");
    EXPECT_EQ(run_eval(args).status, 0);
    std::filesystem::remove_all(dir);
}

// A run that fails before its first result leaves --out as it was (no run line is appended),
// and eval qa without a question set says how to give one.
TEST(EvalCli, AFailedRunLeavesTheResultFileAsItWas) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    const std::string out = dir + "/r.jsonl";
    const auto r = run_eval({"qa", "--model", dir + "/tiny.gguf", "--lengths", "256", "--samples",
                             "1", "--policy", "full", "--out", out});
    EXPECT_EQ(r.status, 2) << "a missing argument";
    EXPECT_NE(r.err.find("--qa-set FILE"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
    std::ofstream(out) << "{\"command\":\"an earlier run\"}\n";
    const auto again =
        run_eval({"qa", "--model", dir + "/tiny.gguf", "--lengths", "256", "--samples", "1",
                  "--policy", "full", "--qa-set", dir + "/missing.json", "--out", out});
    EXPECT_EQ(again.status, 1);
    EXPECT_EQ(test::read_file(out), "{\"command\":\"an earlier run\"}\n");
    const auto unwritable =
        run_eval({"niah", "--model", dir + "/tiny.gguf", "--lengths", "256", "--samples", "1",
                  "--policy", "full", "--out", dir + "/no/such/dir/r.jsonl"});
    EXPECT_EQ(unwritable.status, 1);
    EXPECT_NE(unwritable.err.find("cannot be written"), std::string::npos) << unwritable.err;
    std::filesystem::remove_all(dir);
}

// vt gives the model RULER's answer prefix and records it; a result line whose question (or
// prefix) is not the one the task asks now is not taken for it when a run resumes.
TEST(EvalCli, AnswerPrefixIsRecordedAndAStaleQuestionIsMeasuredAgain) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    const std::vector<std::string> args{
        "vt",        "--model", dir + "/tiny.gguf", "--lengths", "600",
        "--samples", "1",       "--max-tokens",     "2",         "--policy",
        "full",      "--json",  "--quiet",          "--out",     dir + "/r.jsonl"};
    const auto r = run_eval(args);
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(r.out["results"].size(), 1u);
    const auto& line = r.out["results"][0];
    const std::string prefix = line.value("answer_prefix", std::string());
    EXPECT_EQ(prefix.rfind("According to the chain(s) of variable assignment", 0), 0u) << prefix;
    EXPECT_EQ(line["expected"], line["meta"]["variables"]);

    // The same line with another question: the sample is measured again, not resumed.
    std::string file = test::read_file(dir + "/r.jsonl");
    const std::string q = line["question"];
    const auto at = file.find(nlohmann::json(q).dump());
    ASSERT_NE(at, std::string::npos);
    file.replace(at, nlohmann::json(q).dump().size(), nlohmann::json("an older question").dump());
    std::ofstream(dir + "/r.jsonl", std::ios::trunc) << file;
    const auto again = run_eval(args);
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(again.out["results"][0]["question"], q);
    const std::string after = test::read_file(dir + "/r.jsonl");
    EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 2 + 2)
        << "two command lines, the stale result and the new one";
    std::filesystem::remove_all(dir);
}

// Each sekv line names the router that answered it (issue 8); a run resumes only from lines of
// the same router (lines written before the field existed were training-free).
TEST(EvalCli, SekvLinesNameTheirRouterAndResumeOnlyWithTheSameOne) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    // Learned thresholds that expand nothing: only calibrated τ (the default) expands.
    const auto zp = test::tiny_router_params(*Model::load(dir + "/tiny.gguf"), 100.0f, 32);
    save_router_params(zp, dir + "/tiny.zoom.gguf");
    const std::vector<std::string> args{
        "niah", "--model", dir + "/tiny.gguf", "--lengths", "600", "--samples", "1", "--max-tokens",
        "2", "--threads", "2", "--policy", "full,sekv", "--budget", "0.5", "--json", "--quiet",
        // τ on the question (one stage): the configuration this
        // test started from; τ per query is tried as another
        "--tau-on-question", "--out", dir + "/r.jsonl"};
    auto line_of = [](const EvalRun& r, const std::string& policy) {
        for (const auto& j : r.out["results"])
            if (j["policy"] == policy)
                return j;
        return nlohmann::json();
    };
    auto lines = [&] {
        const std::string f = test::read_file(dir + "/r.jsonl");
        return std::count(f.begin(), f.end(), '\n');
    };
    const auto free = run_eval(args);
    ASSERT_EQ(free.status, 0) << free.err;
    EXPECT_EQ(line_of(free, "sekv")["router"], "training-free");
    EXPECT_FALSE(line_of(free, "sekv").contains("zoom_digest"));
    EXPECT_FALSE(line_of(free, "full").contains("router"));
    for (const auto& s : free.out["summaries"])
        EXPECT_EQ(s.contains("router"), s["policy"] == "sekv") << s.dump();
    EXPECT_EQ(lines(), 1 + 2);
    // As written before the field existed.
    std::string file = test::read_file(dir + "/r.jsonl");
    const std::string field = "\"router\":\"training-free\",";
    ASSERT_NE(file.find(field), std::string::npos);
    file.erase(file.find(field), field.size());
    ASSERT_EQ(file.find(field), std::string::npos);
    std::ofstream(dir + "/r.jsonl", std::ios::trunc) << file;

    auto trained_args = args;
    for (const std::string a : {"--router", "trained", "--zoom-params"})
        trained_args.push_back(a);
    trained_args.push_back(dir + "/tiny.zoom.gguf");
    const auto trained = run_eval(trained_args);
    ASSERT_EQ(trained.status, 0) << trained.err;
    EXPECT_EQ(line_of(trained, "sekv")["router"], "trained");
    EXPECT_EQ(line_of(trained, "sekv")["zoom_digest"], zp.digest());
    EXPECT_EQ(line_of(trained, "sekv")["tau"], "calibrated");
    EXPECT_GT(line_of(trained, "sekv")["expansions"].get<double>(), 0.0);
    EXPECT_EQ(lines(), 1 + 2 + 1 + 2) << "measured again, not taken from the training-free line";
    // The learned thresholds: another router for resuming, and they decide (θ = 100: nothing).
    auto learned_args = trained_args;
    learned_args.push_back("--learned-tau");
    const auto learned = run_eval(learned_args);
    ASSERT_EQ(learned.status, 0) << learned.err;
    EXPECT_EQ(line_of(learned, "sekv")["tau"], "learned");
    EXPECT_EQ(line_of(learned, "sekv")["expansions"].get<double>(), 0.0);
    EXPECT_EQ(lines(), 1 + 2 + 1 + 2 + 1 + 2) << "not taken from the calibrated line";
    const auto trained_again = run_eval(trained_args);
    ASSERT_EQ(trained_again.status, 0) << trained_again.err;
    EXPECT_EQ(line_of(trained_again, "sekv")["tau"], "calibrated");
    EXPECT_EQ(lines(), 1 + 2 + 1 + 2 + 1 + 2) << "resumed from the calibrated line";
    // --expand-rate is for calibration: refused with the learned thresholds, in one line.
    learned_args.push_back("--expand-rate");
    learned_args.push_back("0.3");
    const auto both = run_eval(learned_args);
    EXPECT_EQ(both.status, 1);
    EXPECT_NE(both.err.find("--learned-tau"), std::string::npos) << both.err;
    // Training-free again: resumed from the first run's lines, nothing written.
    const auto again = run_eval(args);
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(lines(), 1 + 2 + 1 + 2 + 1 + 2);
    EXPECT_EQ(line_of(again, "sekv")["router"], "training-free");
    EXPECT_EQ(line_of(again, "sekv")["answer"], line_of(free, "sekv")["answer"]);
    // τ per query is another configuration: measured, not resumed from the question-calibrated
    // line, and named in the settings; with the learned thresholds it is refused in one line.
    // `base` with `flag`: measured anew (more lines), its settings naming `setting`.
    auto another_configuration = [&](std::vector<std::string> base, const char* flag,
                                     const char* setting) {
        base.push_back(flag);
        const auto before = lines();
        const auto r = run_eval(base);
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_GT(lines(), before) << flag << ": not taken from an earlier line";
        EXPECT_NE(line_of(r, "sekv")["settings"].get<std::string>().find(setting),
                  std::string::npos)
            << line_of(r, "sekv").dump();
        return r;
    };
    const auto pq = another_configuration(args, "--tau-per-query", " tau=per_query");
    EXPECT_EQ(line_of(again, "sekv")["settings"].get<std::string>().find("tau="),
              std::string::npos);
    EXPECT_EQ(line_of(pq, "sekv")["tau"], "per_query"); // the report's own configuration
    EXPECT_FALSE(line_of(again, "sekv").contains("tau"));
    auto pq_learned = learned_args;
    pq_learned.resize(pq_learned.size() - 2); // without --expand-rate
    pq_learned.push_back("--tau-per-query");
    const auto pq_refused = run_eval(pq_learned);
    EXPECT_EQ(pq_refused.status, 1);
    EXPECT_NE(pq_refused.err.find("--tau-per-query"), std::string::npos) << pq_refused.err;
    EXPECT_EQ(std::count(pq_refused.err.begin(), pq_refused.err.end(), '\n'), 1) << pq_refused.err;
    // The trained router without its rank gate: another configuration, named in the settings.
    const auto fr = another_configuration(trained_args, "--full-rank", " rank=full");
    EXPECT_EQ(line_of(fr, "sekv")["rank_gate"], "energy");
    EXPECT_FALSE(line_of(trained, "sekv").contains("rank_gate"));
    // The trained router with τ per query; its lines as measured before "tau" said per_query
    // ("calibrated", the settings naming the rule) still resume: nothing is measured again.
    const auto tpq = another_configuration(trained_args, "--tau-per-query", " tau=per_query");
    EXPECT_EQ(line_of(tpq, "sekv")["tau"], "per_query");
    {
        std::string f = test::read_file(dir + "/r.jsonl");
        const std::string now = R"("tau":"per_query")", before = R"("tau":"calibrated")";
        size_t replaced = 0;
        for (size_t at = f.find(now); at != std::string::npos; at = f.find(now, at)) {
            f.replace(at, now.size(), before);
            ++replaced;
        }
        EXPECT_GT(replaced, 0u);
        std::ofstream(dir + "/r.jsonl", std::ios::trunc) << f;
    }
    auto tpq_args = trained_args;
    tpq_args.push_back("--tau-per-query");
    const auto before_old = lines();
    const auto resumed = run_eval(tpq_args);
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_EQ(lines(), before_old) << "an earlier line of the same router measured again";
    EXPECT_EQ(line_of(resumed, "sekv")["answer"], line_of(tpq, "sekv")["answer"]);
    // Plain-mean summary rows: another configuration of the training-free router, named in the
    // settings; refused in one line with the trained router, which was trained on the design's.
    auto uniform_args = args;
    uniform_args.push_back("--summary-weights");
    const auto uniform = another_configuration(uniform_args, "uniform", " summary=uniform");
    EXPECT_EQ(line_of(uniform, "sekv")["router"], "training-free");
    // The setting reaches the memory: the same sample's output moves (the tiny model's
    // surprisal is not flat, so the two summary rows differ).
    EXPECT_NE(line_of(uniform, "sekv")["fidelity"]["kl"], line_of(again, "sekv")["fidelity"]["kl"])
        << line_of(uniform, "sekv").dump() << "\n"
        << line_of(again, "sekv").dump();
    EXPECT_EQ(line_of(again, "sekv")["settings"].get<std::string>().find("summary="),
              std::string::npos);
    // `base` with --summary-weights uniform: refused in one line naming `says`, nothing written.
    auto refused_uniform = [&](std::vector<std::string> base, const std::string& says) {
        base.push_back("--summary-weights");
        base.push_back("uniform");
        const auto before = lines();
        const auto r = run_eval(base);
        EXPECT_EQ(r.status, 1);
        EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(lines(), before);
    };
    refused_uniform(trained_args, "--summary-weights uniform");
    // Without a policy that holds spans it would change nothing: refused too.
    auto full_only = args;
    for (size_t i = 0; i + 1 < full_only.size(); ++i)
        if (full_only[i] == "--policy")
            full_only[i + 1] = "full";
    refused_uniform(full_only, "sekv and chunk_summary");
    // Two-stage routing: another configuration of τ per query, named in the settings. With
    // candidates of 64 times the share (every span at this rate) it expands what the oracle
    // expands, which the router alone does not.
    auto pq_base = args; // τ per query at 20 % (spans to expand at this length), two-stage default
    for (const char* a : {"--tau-per-query", "--expand-rate", "0.2"})
        pq_base.push_back(a);
    auto pq_args = pq_base; // one stage
    pq_args.push_back("--rerank");
    pq_args.push_back("0");
    auto rerank_args = pq_base;
    rerank_args.push_back("--rerank");
    const auto rerank = another_configuration(rerank_args, "64", " rerank=64");
    EXPECT_EQ(line_of(rerank, "sekv")["router"], "training-free");
    auto oracle_args = pq_base; // the default two-stage routing gives way to the oracle
    oracle_args.push_back("--router");
    oracle_args.push_back("oracle");
    const auto oracle = run_eval(oracle_args);
    ASSERT_EQ(oracle.status, 0) << oracle.err;
    EXPECT_EQ(line_of(rerank, "sekv")["fidelity"]["kl"], line_of(oracle, "sekv")["fidelity"]["kl"])
        << line_of(rerank, "sekv").dump() << "\n"
        << line_of(oracle, "sekv").dump();
    EXPECT_EQ(line_of(rerank, "sekv")["expansions"], line_of(oracle, "sekv")["expansions"]);
    const auto one_stage = run_eval(pq_args);
    ASSERT_EQ(one_stage.status, 0) << one_stage.err;
    EXPECT_GT(line_of(one_stage, "sekv")["expansions"].get<double>(), 0.0);
    EXPECT_NE(line_of(rerank, "sekv")["fidelity"]["kl"],
              line_of(one_stage, "sekv")["fidelity"]["kl"])
        << line_of(one_stage, "sekv").dump();
    // Refused in one line, nothing written: without τ per query, with one candidate per
    // expanded span, with the oracle, without the sekv policy.
    auto refused_rerank = [&](std::vector<std::string> base, const char* n,
                              const std::string& says) {
        base.push_back("--rerank");
        base.push_back(n);
        const auto before = lines();
        const auto r = run_eval(base);
        EXPECT_EQ(r.status, 1) << n;
        EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(lines(), before);
    };
    refused_rerank(args, "4", "--tau-per-query");
    refused_rerank(pq_base, "1", "at least 2");
    refused_rerank(oracle_args, "4", "oracle");
    refused_rerank(full_only, "4", "apply to the sekv policy");
    // Trained asked for without a file for the model: one line, nothing measured.
    auto no_file = args;
    no_file.push_back("--router");
    no_file.push_back("trained");
    const auto refused = run_eval(no_file);
    EXPECT_EQ(refused.status, 1);
    EXPECT_NE(refused.err.find("none was found"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    std::filesystem::remove_all(dir);
}

TEST(EvalCli, BadArgumentsAreRefusedInOneLine) {
    const auto r = run_eval({"nosuchtask"});
    EXPECT_EQ(r.status, 2);
    const auto p = run_eval({"niah", "--policy", "lru"});
    EXPECT_EQ(p.status, 2);
    EXPECT_NE(p.err.find("lru"), std::string::npos) << p.err;
}

// The small configuration recorded in tests/fixtures/ci-eval.json, on the real model.
TEST(EvalCli, TheRecordedSmallConfigurationOnTheRealModel) {
    const auto model = test::real_model_path();
    if (!model)
        GTEST_SKIP() << "the default model is not installed (run the set-up command)";
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    std::ifstream in(test::data_dir() + "/fixtures/ci-eval.json");
    const auto recorded = nlohmann::json::parse(in);
    std::vector<std::string> args = recorded["arguments"];
    args.insert(args.end(), {"--model", *model, "--json", "--quiet"});
    const auto r = run_eval(args);
    ASSERT_EQ(r.status, 0) << r.err;
    expect_contract(r.out["results"]);
    for (const auto& s : r.out["summaries"]) {
        if (s["policy"] != "full")
            continue;
        EXPECT_GE(s["accuracy"].get<double>(), recorded["full_accuracy"].get<double>())
            << "full scored below its recorded level";
    }
}

// pic-eval on a tiny model: the cold prefill and every selector answer each sample; `full`
// recompute gives the cold prefill's answer; the recompute sets have the sizes asked for.
TEST(EvalCli, PicEvalMeasuresEverySelectorAgainstAColdPrefill) {
    if (!std::filesystem::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const std::string dir = tiny_model_dir();
    const std::vector<std::string> args{"niah_multikey",
                                        "--model",
                                        dir + "/tiny.gguf",
                                        "--lengths",
                                        "700,800",
                                        "--documents",
                                        "3",
                                        "--samples",
                                        "1",
                                        "--max-tokens",
                                        "4",
                                        "--selector",
                                        "none,epic,cacheblend,full",
                                        "--recompute",
                                        "0.1,0.5",
                                        "--threads",
                                        "2",
                                        "--json",
                                        "--quiet",
                                        "--out",
                                        dir + "/p.jsonl"};
    const auto r = run_eval(args, "pic-eval");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto& out = r.out;
    const auto& results = out["results"];
    ASSERT_EQ(results.size(), 2u * 7u) << "cold, none, full and 2 ratios of epic and cacheblend";
    std::map<int, std::string> cold_answer;
    for (const auto& j : results)
        if (j["selector"] == "cold")
            cold_answer[j["target_length"].get<int>()] = j["answer"];
    for (const auto& j : results) {
        const std::string sel = j["selector"];
        EXPECT_EQ(j["documents"], 3);
        if (sel == "cold")
            continue;
        const int64_t n = j["length"], u = j["recompute_set"];
        if (sel == "none") {
            EXPECT_EQ(u, 0);
        }
        if (sel == "full") {
            EXPECT_EQ(u, n);
            EXPECT_EQ(j["answer"], cold_answer.at(j["target_length"].get<int>())) << j.dump();
            EXPECT_EQ(j["fidelity"]["top1_agreement"].get<double>(), 1.0);
        }
        if (sel == "epic") { // k = ceil(ratio · n / 2) at the start of documents 2 and 3
            EXPECT_GT(u, 0);
            EXPECT_LE(u, 2 * static_cast<int64_t>(std::ceil(j["ratio"].get<double>() * n / 2)));
        }
        if (sel == "cacheblend") {
            EXPECT_GT(u, 0);
            EXPECT_LE(u, j["tokens_forwarded"].get<int64_t>());
            // The ratio is a share of the whole context, taken from the later documents.
            EXPECT_NEAR(static_cast<double>(u) / static_cast<double>(n), j["ratio"].get<double>(),
                        0.02);
        }
        EXPECT_GT(j["ttft_ms"].get<double>(), 0.0);
    }
    // A summary per length, document count and configuration: lengths are not pooled.
    ASSERT_EQ(out["summaries"].size(), 14u);
    std::map<int, int> per_length;
    for (const auto& s : out["summaries"]) {
        EXPECT_EQ(s["samples"], 1);
        ++per_length[s["target_length"].get<int>()];
    }
    EXPECT_EQ(per_length, (std::map<int, int>{{700, 7}, {800, 7}}));
    std::filesystem::remove_all(dir);
}

// state-init-eval on the committed tiny hybrid models (tests/reference/README.md): per sample
// and K, the exact composition is the closest to the joint run's recurrent states, the zero
// state is off by exactly 1 (‖0 − S‖/‖S‖), K grows as asked, and a second run resumes from
// the lines already written.
TEST(EvalCli, StateInitEvalComparesTheInitialisersWithAJointRun) {
    for (const std::string file : {"tiny_granitehybrid.gguf", "tiny_qwen3next.gguf"}) {
        const std::string dir = test::temp_dir();
        const std::string model = test::data_dir() + "/reference/fixtures/" + file;
        const std::string out = dir + "/s.jsonl";
        std::vector<std::string> args{"--model",
                                      model,
                                      "--documents",
                                      "2,4",
                                      "--samples",
                                      "3",
                                      "--doc-tokens",
                                      "16",
                                      "--question-tokens",
                                      "4",
                                      "--threads",
                                      "2",
                                      "--json",
                                      "--quiet",
                                      "--out",
                                      out};
        const auto r = run_eval(args, "state-init-eval");
        ASSERT_EQ(r.status, 0) << r.err;
        const auto& results = r.out["results"];
        ASSERT_EQ(results.size(), 2u * 3u * 3u) << file;
        std::map<std::string, std::map<std::string, nlohmann::json>> by_sample;
        for (const auto& j : results) {
            const int K = j["documents"];
            EXPECT_EQ(j["n_past"].get<int>(), 16 * K);
            EXPECT_GE(j["kl"].get<double>(), 0.0);
            EXPECT_GE(j["init_ms"].get<double>(), 0.0);
            EXPECT_GE(j["assembly_ms"].get<double>(), j["init_ms"].get<double>());
            EXPECT_FALSE(j["state_error"].empty());
            by_sample[std::to_string(K) + "#" + std::to_string(j["index"].get<int>())]
                     [j["initialiser"].get<std::string>()] = j;
        }
        ASSERT_EQ(by_sample.size(), 6u);
        for (const auto& [key, m] : by_sample) {
            const auto& exact = m.at("exact");
            const auto& single = m.at("single-block");
            const auto& zero = m.at("zero");
            for (const auto& e : zero["state_error"])
                EXPECT_NEAR(e.get<double>(), 1.0, 1e-12) << file << " " << key;
            EXPECT_LT(exact["state_error_mean"].get<double>(),
                      single["state_error_mean"].get<double>())
                << file << " " << key;
            EXPECT_LT(exact["state_error_mean"].get<double>(),
                      zero["state_error_mean"].get<double>())
                << file << " " << key;
            EXPECT_GT(single["state_error_mean"].get<double>(), 0.0) << file << " " << key;
        }
        ASSERT_EQ(r.out["summaries"].size(), 2u * 3u);
        // A second run with a larger K resumes: the K = 2, 4 lines come back from the file
        // (timings included, so they are the same lines), only K = 8 is computed.
        args[3] = "2,4,8";
        const auto again = run_eval(args, "state-init-eval");
        ASSERT_EQ(again.status, 0) << again.err;
        ASSERT_EQ(again.out["results"].size(), 3u * 3u * 3u);
        std::map<std::string, double> first_ms;
        for (const auto& j : results)
            first_ms[std::to_string(j["documents"].get<int>()) +
                     j["initialiser"].get<std::string>() + std::to_string(j["index"].get<int>())] =
                j["assembly_ms"];
        int resumed = 0;
        for (const auto& j : again.out["results"]) {
            const auto k = std::to_string(j["documents"].get<int>()) +
                           j["initialiser"].get<std::string>() +
                           std::to_string(j["index"].get<int>());
            if (first_ms.count(k)) {
                EXPECT_EQ(j["assembly_ms"].get<double>(), first_ms[k]);
                ++resumed;
            }
        }
        EXPECT_EQ(resumed, 18);
        int lines = 0;
        std::ifstream in(out);
        for (std::string line; std::getline(in, line);)
            lines += line.find("\"initialiser\"") != std::string::npos;
        EXPECT_EQ(lines, 27) << "K = 8 appended, nothing written twice";
        std::filesystem::remove_all(dir);
    }
    // A model without recurrent layers is refused in one line.
    const std::string dir = tiny_model_dir();
    const auto bad = run_eval({"--model", dir + "/tiny.gguf", "--samples", "1"}, "state-init-eval");
    EXPECT_EQ(bad.status, 1);
    EXPECT_NE(bad.err.find("hybrid"), std::string::npos) << bad.err;
    std::filesystem::remove_all(dir);
}

// CLI11's ranges compare with < and >, which NaN passes: the lab's floating-point options refuse
// a value that is not finite, with its name, before anything runs (exit 2).
TEST(LabCli, NumbersThatAreNotFiniteAreRefused) {
    const std::string dir = test::temp_dir();
    const std::string model = dir + "/tiny.gguf";
    test::write_tiny_gemma3(model, test::TinyGemma3Config{});
    const std::vector<std::vector<std::string>> cases = {
        {"eval", "niah", "--model", model, "--budget", "0.35,nan", "--out", dir + "/e.jsonl"},
        {"zoom-train", "--model", model, "--records", dir, "--out", dir + "/p.gguf", "--compare",
         "--compare-rates", "0.1,nan"},
        {"zoom-train", "--model", model, "--records", dir, "--out", dir + "/p.gguf", "--lr", "nan"},
    };
    for (const auto& args : cases) {
        const auto r = test::run_cli(dir, {}, args);
        EXPECT_EQ(r.status, 2) << args[0] << " " << r.err;
        EXPECT_NE(r.err.find("is not a finite number"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "") << r.out;
    }
    std::filesystem::remove_all(dir);
}
