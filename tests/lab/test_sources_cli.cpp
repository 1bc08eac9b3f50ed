// `spanscope-lab sources` (lab/cli/cmd_sources.cpp) on a tiny model: every needle line names the
// needle's bytes in the stored document (read back, they are the needle written out here), its
// top1/top3 flags and rank follow from the printed ranges of the needle and of the sources
// (recomputed here), the answer is the same with and without sources, and the summaries count
// the lines; with --qa, whether a line is correct and whether its top source holds an accepted
// answer are recomputed from the answer and from the document's bytes at the source's range.
#include "cli_runner.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

using namespace spanscope;
namespace fs = std::filesystem;

namespace {

struct Lines {
    std::vector<nlohmann::json> samples, summaries;
};

Lines parse_lines(const std::string& out) {
    Lines l;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << line;
        if (j.is_discarded())
            continue;
        (j.contains("summary") ? l.summaries : l.samples).push_back(j);
    }
    return l;
}

// A tiny Gemma 3 with a 2048-token context in dir.
std::string tiny_model(const test::TempDir& dir) {
    test::TinyGemma3Config cfg;
    cfg.n_ctx = 2048;
    test::write_tiny_gemma3(dir.file("tiny.gguf"), cfg);
    return dir.file("tiny.gguf");
}

bool overlaps(const nlohmann::json& s, int64_t begin, int64_t end) {
    return s["start_char"].get<int64_t>() < end && begin < s["end_char"].get<int64_t>();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string lower(std::string s) {
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The shares are a ranking: each in (0, 1], descending, at most five, summing to at most 1.
void expect_ranked(const nlohmann::json& sources) {
    ASSERT_TRUE(sources.is_array());
    EXPECT_LE(sources.size(), 5u);
    double sum = 0, before = 2;
    for (const auto& s : sources) {
        const double share = s["share"];
        EXPECT_GT(share, 0.0);
        EXPECT_LE(share, before);
        before = share;
        sum += share;
        EXPECT_LT(s["start_char"].get<int64_t>(), s["end_char"].get<int64_t>()) << s.dump();
    }
    EXPECT_LE(sum, 1.0 + 1e-9);
}

} // namespace

TEST(SourcesCli, NeedleFlagsFollowFromThePrintedRanges) {
    if (!fs::exists("/usr/share/common-licenses/GPL-3"))
        GTEST_SKIP() << "/usr/share/common-licenses is missing (package base-files)";
    const test::TempDir dir;
    const std::string model = tiny_model(dir);
    fs::create_directories(dir.file("tmp"));
    const auto run =
        test::run_cli(dir.path, {"TMPDIR=" + dir.file("tmp")},
                      {"sources", "--model", model, "--lengths", "256,700", "--samples", "2",
                       "--depths", "20,80", "--policy", "full,sekv", "--max-tokens", "4",
                       "--threads", "2", "--quiet", "--out", dir.file("s.jsonl")});
    ASSERT_EQ(run.status, 0) << run.err;
    const auto lines = parse_lines(run.out);
    ASSERT_EQ(lines.samples.size(), 8u) << run.out;
    ASSERT_EQ(lines.summaries.size(), 4u) << run.out;
    EXPECT_EQ(test::read_file(dir.file("s.jsonl")), run.out) << "--out holds the same lines";
    EXPECT_TRUE(fs::is_empty(dir.file("tmp"))) << "the throw-away projects are removed";

    struct Count {
        int samples = 0, correct = 0, top1 = 0, top3 = 0, with_first = 0;
        std::vector<double> with, without;
    };
    std::map<std::pair<int64_t, std::string>, Count> count;
    std::set<int> ranks;
    for (const auto& j : lines.samples) {
        SCOPED_TRACE(j.dump());
        EXPECT_EQ(j["task"], "needle");
        const std::string key = j["key"], value = j["value"], answer = j["answer"];
        const std::string needle = "The secret code for the " + key + " is " + value + ".";
        // The needle's bytes, as the project stores the document, are the needle.
        EXPECT_EQ(j["needle_text"], needle);
        const int64_t begin = j["needle"]["start_char"], end = j["needle"]["end_char"];
        EXPECT_EQ(end - begin, static_cast<int64_t>(needle.size()));
        EXPECT_EQ(j["question"], "What is the secret code for the " + key + "?");
        EXPECT_EQ(j["correct"].get<bool>(), answer.find(value) != std::string::npos);

        const auto& sources = j["sources"];
        expect_ranked(sources);
        ASSERT_FALSE(sources.empty()) << "an answer of at least one token has sources";
        int rank = 0;
        for (size_t r = 0; r < sources.size() && rank == 0; ++r)
            if (overlaps(sources[r], begin, end))
                rank = static_cast<int>(r) + 1;
        EXPECT_EQ(j["needle_rank"], rank);
        EXPECT_EQ(j["top1"].get<bool>(), rank == 1);
        EXPECT_EQ(j["top3"].get<bool>(), rank >= 1 && rank <= 3);
        EXPECT_EQ(j["top_share"], sources[0]["share"]);
        ranks.insert(rank);
        // Under full the passages are sentences: the needle (after a blank line, ending in a
        // full stop and a blank line) is one of them.
        if (rank > 0 && j["policy"] == "full") {
            EXPECT_EQ(sources[static_cast<size_t>(rank - 1)]["start_char"], begin);
            EXPECT_EQ(sources[static_cast<size_t>(rank - 1)]["end_char"], end);
        }

        // Measuring the sources does not change the answer.
        EXPECT_TRUE(j["same_answer"].get<bool>());
        EXPECT_GT(j["generated_tokens_with"].get<int64_t>(), 0);
        EXPECT_EQ(j["generated_tokens_with"], j["generated_tokens_without"]);
        const double with = j["decode_tokens_per_s_with"],
                     without = j["decode_tokens_per_s_without"];
        EXPECT_GT(with, 0.0);
        EXPECT_GT(without, 0.0);
        EXPECT_EQ(j.contains("router"), j["policy"] == "sekv");

        auto& c = count[{j["target_length"].get<int64_t>(), j["policy"]}];
        ++c.samples;
        c.with_first += j["first"] == "with";
        if (j["correct"].get<bool>()) {
            ++c.correct;
            c.top1 += rank == 1;
            c.top3 += rank >= 1 && rank <= 3;
        }
        c.with.push_back(with);
        c.without.push_back(without);
    }
    for (const auto& [key, c] : count) {
        EXPECT_EQ(c.samples, 2) << key.first << " " << key.second;
        // Neither order always goes first.
        EXPECT_EQ(c.with_first, 1) << key.first << " " << key.second;
    }
    // The lines exercise both sides of the flags: the needle among the sources and not.
    EXPECT_TRUE(ranks.count(0)) << "no line without the needle among its sources";
    EXPECT_TRUE(ranks.size() > 1) << "no line with the needle among its sources";

    for (const auto& s : lines.summaries) {
        SCOPED_TRACE(s.dump());
        EXPECT_EQ(s["summary"], "needles");
        const auto& c = count[{s["target_length"].get<int64_t>(), s["policy"]}];
        EXPECT_EQ(s["samples"], c.samples);
        EXPECT_EQ(s["correct"], c.correct);
        EXPECT_EQ(s["same_answer"], c.samples);
        EXPECT_EQ(s["top1"]["count"], c.top1);
        EXPECT_EQ(s["top1"]["of"], c.correct);
        EXPECT_EQ(s["top3"]["count"], c.top3);
        for (const char* k : {"top1", "top3"}) {
            const double rate = s[k]["rate"], lo = s[k]["interval"][0], hi = s[k]["interval"][1];
            EXPECT_LE(lo, rate);
            EXPECT_GE(hi, rate);
        }
        const double with = median(c.with), without = median(c.without);
        EXPECT_NEAR(s["median_decode_tokens_per_s_with"].get<double>(), with, 1e-9 * with);
        EXPECT_NEAR(s["median_decode_tokens_per_s_without"].get<double>(), without, 1e-9 * without);
        EXPECT_NEAR(s["decode_ratio"].get<double>(), with / without, 1e-9);
    }
}

TEST(SourcesCli, QaTopSourceIsJudgedOnTheDocumentsBytes) {
    const test::TempDir dir;
    const std::string model = tiny_model(dir);
    // Plain ASCII text with line ends only: the project keeps it byte for byte. The short
    // document has three sentences, so at most three passages: its top three sources hold all of
    // it, the answer with it.
    const std::string text = test::sample_prose(3, 1500) +
                             "\n\nThe keeper of the lighthouse is Ada Marlow.\n\n" +
                             test::sample_prose(4, 1500);
    const std::string short_text =
        "Boats rest in the harbour. The keeper of the lighthouse is Ada Marlow. Gulls circle.\n";
    ASSERT_TRUE(test::write_file(dir.file("doc.txt"), text));
    ASSERT_TRUE(test::write_file(dir.file("short.txt"), short_text));
    const std::map<std::string, std::string> texts{{"keeper", short_text}, {"harbour", text}};
    const nlohmann::json set{{"questions",
                              {{{"id", "keeper"},
                                {"doc", dir.file("short.txt")},
                                {"question", "Who keeps the lighthouse?"},
                                {"answers", {"Ada Marlow", "Marlow"}}},
                               {{"id", "harbour"},
                                {"doc", dir.file("doc.txt")},
                                {"question", "What is in the harbour?"},
                                {"answers", {"boats"}}},
                               {{"id", "missing"},
                                {"doc", dir.file("missing.txt")},
                                {"question", "Anything?"},
                                {"answers", {"x1"}}}}}};
    ASSERT_TRUE(test::write_file(dir.file("q.json"), set.dump()));
    const auto run =
        test::run_cli(dir.path, {},
                      {"sources", "--model", model, "--qa", dir.file("q.json"), "--policy",
                       "sekv,full", "--max-tokens", "4", "--threads", "2", "--quiet"});
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_NE(run.err.find("skipping 1 questions"), std::string::npos) << run.err;
    const auto lines = parse_lines(run.out);
    ASSERT_EQ(lines.samples.size(), 4u) << run.out;
    ASSERT_EQ(lines.summaries.size(), 2u) << run.out;

    auto holds = [](std::string passage, const nlohmann::json& accepted) {
        // Whitespace runs as one space, lower case.
        std::string folded;
        for (const char c : passage) {
            if (std::isspace(static_cast<unsigned char>(c))) {
                if (!folded.empty() && folded.back() != ' ')
                    folded += ' ';
            } else {
                folded += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            }
        }
        for (const auto& a : accepted)
            if (folded.find(lower(a.get<std::string>())) != std::string::npos)
                return true;
        return false;
    };
    std::map<std::string, std::map<std::string, int>> count;
    for (const auto& j : lines.samples) {
        SCOPED_TRACE(j.dump());
        EXPECT_EQ(j["task"], "qa");
        const auto& accepted = j["expected"];
        // The QA set's rule: the answer's first line, its first 200 bytes, any accepted answer.
        std::string first = j["answer"].get<std::string>();
        first = lower(first.substr(0, first.find('\n')).substr(0, 200));
        bool correct = false;
        for (const auto& a : accepted)
            correct = correct || first.find(lower(a.get<std::string>())) != std::string::npos;
        EXPECT_EQ(j["correct"].get<bool>(), correct);
        const auto& sources = j["sources"];
        expect_ranked(sources);
        ASSERT_FALSE(sources.empty());
        const std::string& doc = texts.at(j["id"]);
        auto bytes = [&](const nlohmann::json& s) {
            const auto b = s["start_char"].get<size_t>(), e = s["end_char"].get<size_t>();
            EXPECT_LE(e, doc.size());
            return doc.substr(b, e - b);
        };
        EXPECT_EQ(j["top_contains"].get<bool>(), holds(bytes(sources[0]), accepted));
        EXPECT_EQ(j["top_excerpt_contains"].get<bool>(), holds(sources[0]["excerpt"], accepted));
        bool top3 = false;
        for (size_t r = 0; r < sources.size() && r < 3; ++r)
            top3 = top3 || holds(bytes(sources[r]), accepted);
        EXPECT_EQ(j["top3_contains"].get<bool>(), top3);
        if (j["id"] == "keeper") {
            EXPECT_TRUE(top3) << "three sentences, all among the top three";
        }
        auto& c = count[j["policy"]];
        ++c["asked"];
        c["correct"] += correct;
        c["top"] += j["top_contains"].get<bool>();
        c["top_correct"] += correct && j["top_contains"].get<bool>();
    }
    for (const auto& s : lines.summaries) {
        SCOPED_TRACE(s.dump());
        EXPECT_EQ(s["summary"], "qa");
        auto& c = count[s["policy"]];
        EXPECT_EQ(s["asked"], 2);
        EXPECT_EQ(s["asked"], c["asked"]);
        EXPECT_EQ(s["skipped"], 1);
        EXPECT_EQ(s["correct"], c["correct"]);
        EXPECT_EQ(s["top_contains"]["count"], c["top"]);
        EXPECT_EQ(s["top_contains"]["of"], c["asked"]);
        EXPECT_EQ(s["top_contains_when_correct"]["count"], c["top_correct"]);
        EXPECT_EQ(s["top_contains_when_correct"]["of"], c["correct"]);
    }
}
