// Evaluation task generators (lab/evaluation/eval_tasks.h, eval_needles.h, eval_qa.h): samples are
// pure functions of their request, have the requested length in tokens, hold their needles
// where asked and the answers they expect. Lengths are counted with the tiny test models'
// tokenizer (about one token per byte), and with the real one where it is installed.
#include "engine/gguf/gguf_reader.h"
#include "engine/text/tokenizer.h"
#include "lab/evaluation/eval_corpus.h"
#include "lab/evaluation/eval_documents.h"
#include "lab/evaluation/eval_needles.h"
#include "lab/evaluation/eval_qa.h"
#include "lab/evaluation/eval_tasks.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

using namespace spanscope;
using namespace spanscope::eval;
using namespace spanscope::test;

namespace {

class EvalTasks : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new std::string(temp_dir());
        write_tiny_gemma3(*dir_ + "/tiny.gguf", TinyGemma3Config{});
        gguf_ = GgufFile::open(*dir_ + "/tiny.gguf").release();
        tok_ = Tokenizer::from_gguf(*gguf_).release();
        try {
            corpus_ = new Corpus(load_corpus(data_dir() + "/qa/questions.json"));
        } catch (const std::runtime_error& e) {
            skip_reason_ = new std::string(e.what());
        }
    }
    static void TearDownTestSuite() {
        delete corpus_;
        delete tok_;
        delete gguf_;
        std::filesystem::remove_all(*dir_);
        delete dir_;
        delete skip_reason_;
        corpus_ = nullptr;
        skip_reason_ = nullptr;
    }
    void SetUp() override {
        if (!corpus_)
            GTEST_SKIP() << "no prose haystack: " << *skip_reason_;
    }
    static EvalSample make(const std::string& task, int64_t length, double depth, int64_t index,
                           const std::string& haystack = "prose", uint64_t seed = 7) {
        return make_sample(*tok_, {task, haystack, length, depth, seed, index}, *corpus_);
    }
    static int64_t tokens(const std::string& text) {
        return static_cast<int64_t>(tok_->encode(text).size());
    }
    // The largest block of the context (paragraphs of prose, lines of noise), in tokens: the
    // granularity of lengths and depths.
    static int64_t largest_block(const EvalSample& s) {
        const std::string sep = s.haystack == "noise" && s.task != "qa" ? "\n" : "\n\n";
        int64_t most = 0;
        size_t b = 0;
        while (b < s.context.size()) {
            size_t e = s.context.find(sep, b);
            e = e == std::string::npos ? s.context.size() : e + sep.size();
            most = std::max(most, tokens(s.context.substr(b, e - b)));
            b = e;
        }
        return most;
    }
    static void expect_length(const EvalSample& s) {
        const int64_t n = tokens(s.context);
        const double tolerance = std::max(0.05 * static_cast<double>(s.target_length),
                                          static_cast<double>(largest_block(s)));
        EXPECT_LE(std::abs(static_cast<double>(n - s.target_length)), tolerance)
            << s.task << " at " << s.target_length;
        // Block by block counting is exact: the separators are pieces of their own.
        EXPECT_EQ(s.meta["context_tokens"].get<int64_t>(), n);
    }
    // Depth of the first occurrence of `text`, measured in tokens.
    static double measured_depth(const EvalSample& s, const std::string& text) {
        const size_t at = s.context.find(text);
        EXPECT_NE(at, std::string::npos) << text;
        return static_cast<double>(tokens(s.context.substr(0, at))) /
               static_cast<double>(tokens(s.context));
    }
    static size_t occurrences(const std::string& hay, const std::string& needle) {
        size_t n = 0;
        for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1))
            ++n;
        return n;
    }

    static inline std::string* dir_ = nullptr;
    static inline GgufFile* gguf_ = nullptr;
    static inline Tokenizer* tok_ = nullptr;
    static inline Corpus* corpus_ = nullptr;
    static inline std::string* skip_reason_ = nullptr;
};

bool same(const EvalSample& a, const EvalSample& b) {
    return a.context == b.context && a.question == b.question && a.expected == b.expected &&
           a.metric == b.metric && a.max_tokens == b.max_tokens && a.meta == b.meta;
}

} // namespace

TEST(EvalCorpus, SplitsParagraphsAtBlankLines) {
    const auto p = split_paragraphs("\n\nFirst line\n  second line  \n \t\nNext\n\n\n\nLast\n");
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[0], "First line\n  second line");
    EXPECT_EQ(p[1], "Next");
    EXPECT_EQ(p[2], "Last");
}

TEST(EvalCorpus, SampleSeedIsStable) {
    // Resumed runs rely on this hash: changing it changes every sample.
    const TaskRequest r{"niah", "prose", 4096, 0.5, 1, 3};
    EXPECT_EQ(sample_seed(r), sample_seed(TaskRequest{"niah", "prose", 4096, 0.5, 1, 3}));
    EXPECT_NE(sample_seed(r), sample_seed(TaskRequest{"niah", "prose", 4096, 0.5, 1, 4}));
    EXPECT_NE(sample_seed(r), sample_seed(TaskRequest{"niah", "noise", 4096, 0.5, 1, 3}));
    EXPECT_NE(sample_seed(r), sample_seed(TaskRequest{"niah", "prose", 4096, 0.25, 1, 3}));
    EXPECT_EQ(sample_seed(r), 4165428515785454501ull);
}

TEST(EvalCorpus, UuidsAreVersion4) {
    std::mt19937_64 rng(5);
    const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
    for (int i = 0; i < 100; ++i)
        EXPECT_TRUE(std::regex_match(random_uuid(rng), uuid));
}

TEST_F(EvalTasks, CorpusHasTheLicenceParagraphs) {
    EXPECT_GE(corpus_->prose.size(), 50u);
    for (const auto& p : corpus_->prose) {
        EXPECT_FALSE(p.text.empty());
        EXPECT_EQ(p.text.find("\n\n"), std::string::npos);
    }
}

TEST_F(EvalTasks, SamplesAreAPureFunctionOfTheRequest) {
    for (const auto& task : task_names()) {
        SCOPED_TRACE(task);
        const auto a = make(task, 1024, 0.3, 2);
        // Made again, after other samples, and from a fresh corpus (an empty token cache).
        (void)make(task, 1024, 0.3, 0);
        const auto b = make(task, 1024, 0.3, 2);
        EXPECT_TRUE(same(a, b));
        const Corpus fresh(corpus_->prose, corpus_->qa_set);
        EXPECT_TRUE(same(a, make_sample(*tok_, {task, "prose", 1024, 0.3, 7, 2}, fresh)));
        const auto c = make(task, 1024, 0.3, 3);
        EXPECT_FALSE(same(a, c));
        EXPECT_FALSE(same(a, make(task, 1024, 0.3, 2, "prose", 8)));
        EXPECT_FALSE(a.expected.empty());
        for (const auto& e : a.expected)
            EXPECT_FALSE(e.empty());
        EXPECT_EQ(a.task, task);
        EXPECT_GT(a.max_tokens, 0);
    }
}

TEST_F(EvalTasks, LengthsAreWithinToleranceInTokens) {
    for (const auto& task : task_names())
        for (const std::string haystack : {"prose", "noise"})
            for (const int64_t length : {256, 1000, 4096, 16384}) {
                SCOPED_TRACE(task + " " + haystack + " " + std::to_string(length));
                expect_length(make(task, length, 0.6, 1, haystack));
            }
}

TEST_F(EvalTasks, SingleNeedleSitsAtItsDepth) {
    for (const std::string task : {"niah_single_number", "niah_single_uuid"})
        for (const std::string haystack : {"prose", "noise"})
            for (const double depth : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}) {
                SCOPED_TRACE(task + " " + haystack + " " + std::to_string(depth));
                const auto s = make(task, 4096, depth, 0, haystack);
                ASSERT_EQ(s.expected.size(), 1u);
                EXPECT_EQ(s.metric, "string_match_all");
                EXPECT_EQ(s.max_tokens, task == "niah_single_uuid" ? 40 : 16);
                const std::string key = s.meta["keys"][0];
                const std::string needle =
                    "The secret code for the " + key + " is " + s.expected[0] + ".";
                EXPECT_EQ(occurrences(s.context, needle), 1u);
                EXPECT_EQ(s.meta["needle_chars"][0].get<size_t>(), s.context.find(needle))
                    << "the byte where the needle was inserted";
                EXPECT_EQ(occurrences(s.context, s.expected[0]), 1u);
                EXPECT_EQ(s.question, "What is the secret code for the " + key + "?");
                const double d = measured_depth(s, needle);
                const double tol =
                    static_cast<double>(largest_block(s)) / static_cast<double>(tokens(s.context));
                EXPECT_NEAR(d, depth, tol + 0.01);
                EXPECT_NEAR(d, s.meta["needle_depths"][0].get<double>(), 1e-9);
            }
}

TEST_F(EvalTasks, MultikeyHidesFourDistinctKeysAndAsksTheFirst) {
    for (int64_t index = 0; index < 10; ++index) {
        const auto s = make("niah_multikey", 2048, 0.4, index);
        const auto keys = s.meta["keys"].get<std::vector<std::string>>();
        const auto values = s.meta["values"].get<std::vector<std::string>>();
        ASSERT_EQ(keys.size(), 4u);
        EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 4u);
        EXPECT_EQ(std::set<std::string>(values.begin(), values.end()).size(), 4u);
        for (size_t i = 0; i < 4; ++i) {
            const std::string needle =
                "The secret code for the " + keys[i] + " is " + values[i] + ".";
            EXPECT_EQ(occurrences(s.context, needle), 1u);
            // Each needle's byte, in the order given (not the order of depth).
            EXPECT_EQ(s.meta["needle_chars"][i].get<size_t>(), s.context.find(needle));
        }
        EXPECT_EQ(s.question, "What is the secret code for the " + keys[0] + "?");
        EXPECT_EQ(s.expected, std::vector<std::string>{values[0]});
        const double tol =
            static_cast<double>(largest_block(s)) / static_cast<double>(tokens(s.context));
        EXPECT_NEAR(measured_depth(s, "for the " + keys[0] + " is"), 0.4, tol + 0.02);
    }
}

TEST_F(EvalTasks, MultivalueHidesThreeValuesOfOneKey) {
    const auto s = make("niah_multivalue", 2048, 0.2, 0);
    const std::string key = s.meta["keys"][0];
    ASSERT_EQ(s.expected.size(), 3u);
    EXPECT_EQ(std::set<std::string>(s.expected.begin(), s.expected.end()).size(), 3u);
    for (const auto& v : s.expected)
        EXPECT_EQ(occurrences(s.context, "The secret code for the " + key + " is " + v + "."), 1u);
    EXPECT_EQ(occurrences(s.context, "The secret code for the " + key + " is "), 3u);
    EXPECT_EQ(s.question, "What are all the secret codes for the " + key + "?");
    EXPECT_EQ(s.max_tokens, 48);
}

TEST_F(EvalTasks, MultiqueryAsksTwoOfFourKeys) {
    for (int64_t index = 0; index < 6; ++index) {
        const auto s = make("niah_multiquery", 2048, 0.7, index);
        const auto keys = s.meta["keys"].get<std::vector<std::string>>();
        const auto values = s.meta["values"].get<std::vector<std::string>>();
        const auto asked = s.meta["asked"].get<std::vector<size_t>>();
        ASSERT_EQ(asked.size(), 2u);
        EXPECT_EQ(asked[0], 0u);
        EXPECT_NE(asked[1], 0u);
        EXPECT_EQ(s.question, "What are the secret codes for the " + keys[asked[0]] + " and the " +
                                  keys[asked[1]] + "?");
        EXPECT_EQ(s.expected, (std::vector<std::string>{values[asked[0]], values[asked[1]]}));
        for (size_t i = 0; i < 4; ++i) {
            const std::string needle =
                "The secret code for the " + keys[i] + " is " + values[i] + ".";
            EXPECT_EQ(occurrences(s.context, needle), 1u);
            // Each needle's byte, in the order given (not the order of depth).
            EXPECT_EQ(s.meta["needle_chars"][i].get<size_t>(), s.context.find(needle));
        }
    }
}

TEST_F(EvalTasks, NiahMixesTheFiveVariantsByIndex) {
    const std::vector<std::string> order = {"niah_single_number", "niah_single_uuid",
                                            "niah_multikey", "niah_multivalue", "niah_multiquery"};
    for (int64_t index = 0; index < 10; ++index) {
        const auto s = make("niah", 1024, 0.5, index);
        EXPECT_EQ(s.meta["variant"], order[static_cast<size_t>(index % 5)]);
        EXPECT_EQ(s.task, "niah");
        for (const auto& e : s.expected)
            EXPECT_NE(s.context.find(e), std::string::npos);
    }
}

TEST_F(EvalTasks, VariableTrackingChainLeadsToTheValue) {
    const std::regex assign(R"(VAR ([A-Z]{5}) = (VAR ([A-Z]{5})|([0-9]{5}))\.)");
    std::set<int> hops_seen;
    for (const std::string haystack : {"prose", "noise"})
        for (int64_t index = 0; index < 12; ++index) {
            const auto s = make("vt", 4096, 0.3, index, haystack);
            const int hops = s.meta["hops"];
            hops_seen.insert(hops);
            EXPECT_GE(hops, 2);
            EXPECT_LE(hops, 4);
            const auto vars = s.meta["variables"].get<std::vector<std::string>>();
            ASSERT_EQ(vars.size(), static_cast<size_t>(hops) + 1);
            std::map<std::string, std::string> refers, value;
            std::vector<std::string> in_order;
            for (auto it = std::sregex_iterator(s.context.begin(), s.context.end(), assign);
                 it != std::sregex_iterator(); ++it) {
                in_order.push_back((*it)[1]);
                if ((*it)[3].matched)
                    refers[(*it)[1]] = (*it)[3];
                else
                    value[(*it)[1]] = (*it)[4];
            }
            EXPECT_EQ(in_order, vars); // statements at increasing depths, in chain order
            // Every name in the chain leads to the value asked for, and every one is expected.
            ASSERT_EQ(s.meta["values"].size(), 1u);
            const std::string asked = s.meta["values"][0];
            EXPECT_NE(s.question.find("assigned the value " + asked + " in the text above"),
                      std::string::npos);
            for (size_t i = 0; i < vars.size(); ++i) {
                std::string v = vars[i];
                size_t steps = 0;
                while (refers.count(v) && steps++ < 10)
                    v = refers[v];
                ASSERT_TRUE(value.count(v));
                EXPECT_EQ(value[v], asked);
                EXPECT_EQ(steps, i); // the i-th name is i hops from the value
            }
            EXPECT_EQ(s.expected, vars);
            EXPECT_EQ(s.answer_prefix, "According to the chain(s) of variable assignment in the "
                                       "text above, " +
                                           std::to_string(hops + 1) +
                                           " variables are assigned the value " + asked +
                                           ", they are: VAR");
            const double tol =
                static_cast<double>(largest_block(s)) / static_cast<double>(tokens(s.context));
            EXPECT_NEAR(measured_depth(s, "VAR " + vars[0] + " ="), 0.3, tol + 0.01);
        }
    EXPECT_EQ(hops_seen, (std::set<int>{2, 3, 4}));
}

TEST_F(EvalTasks, NoiseHaystackIsOnlyTheNoiseSentenceAndNeedles) {
    const auto s = make("niah_single_number", 1024, 0.5, 0, "noise");
    size_t b = 0, needles = 0;
    while (b < s.context.size()) {
        const size_t e = s.context.find('\n', b);
        ASSERT_NE(e, std::string::npos);
        const std::string line = s.context.substr(b, e - b);
        if (line != noise_sentence()) {
            EXPECT_EQ(line.rfind("The secret code for the ", 0), 0u) << line;
            ++needles;
        }
        b = e + 1;
    }
    EXPECT_EQ(needles, 1u);
}

TEST_F(EvalTasks, QaSampleHoldsTheAnswerAndCoversEveryQuestion) {
    const auto questions = load_qa_questions(corpus_->qa_set);
    if (questions.empty())
        GTEST_SKIP() << "no document of the QA set is installed";
    std::set<std::string> ids;
    for (const int64_t length : {256, 4096, 32768})
        for (int64_t index = 0; index < static_cast<int64_t>(questions.size()); ++index) {
            const auto s = make("qa", length, 0.5, index);
            SCOPED_TRACE(s.meta.dump());
            ids.insert(s.meta["qa_id"].get<std::string>());
            const auto q = std::find_if(questions.begin(), questions.end(),
                                        [&](const auto& q) { return q.id == s.meta["qa_id"]; });
            ASSERT_NE(q, questions.end());
            EXPECT_EQ(s.question, q->question);
            EXPECT_EQ(s.expected, q->answers);
            EXPECT_EQ(s.metric, "token_f1");
            EXPECT_NE(collapse_lower(s.context).find(collapse_lower(q->answers[0])),
                      std::string::npos);
            expect_length(s);
        }
    EXPECT_EQ(ids.size(), questions.size());
}

TEST_F(EvalTasks, QaPadsAShortDocumentAroundItAtDepth) {
    // At 32K tiny tokens (~32 KB) every document but GPL-3 fits whole: padded with haystack
    // blocks (prose from the other files), the document starting at depth · (padding).
    const auto questions = load_qa_questions(corpus_->qa_set);
    std::set<std::string> docs;
    int padded = 0;
    for (size_t i = 0; i < questions.size(); ++i) {
        const auto probe = make("qa", 32768, 0.5, static_cast<int64_t>(i));
        if (probe.meta["truncated"].get<bool>() || !docs.insert(probe.meta["doc"]).second)
            continue; // one question per document
        for (const std::string haystack : {"prose", "noise"})
            for (const double depth : {0.0, 0.5, 1.0}) {
                const auto s = make("qa", 32768, depth, static_cast<int64_t>(i), haystack);
                SCOPED_TRACE(s.meta.dump());
                ++padded;
                EXPECT_FALSE(s.meta["truncated"].get<bool>());
                const std::string first = split_paragraphs(read_text_file(s.meta["doc"]))[0];
                EXPECT_EQ(occurrences(s.context, first), 1u); // not repeated by the padding
                const int64_t doc_tokens = s.meta["doc_tokens"];
                const int64_t n = s.meta["context_tokens"];
                EXPECT_LE(std::abs(static_cast<double>(n - 32768)), 0.05 * 32768);
                const double want =
                    depth * static_cast<double>(n - doc_tokens) / static_cast<double>(n);
                const double d = measured_depth(s, first);
                EXPECT_NEAR(d, want, 0.02);
                EXPECT_NEAR(d, s.meta["doc_start_depth"].get<double>(), 1e-9);
            }
    }
    if (padded == 0)
        GTEST_SKIP() << "no document of the QA set is installed";
}

TEST_F(EvalTasks, InvalidRequestsThrowNamingTheTask) {
    auto message = [&](const TaskRequest& r) {
        try {
            (void)make_sample(*tok_, r, *corpus_);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("no exception");
    };
    EXPECT_NE(message({"needle", "prose", 1024, 0.5, 1, 0}).find("needle"), std::string::npos);
    EXPECT_NE(message({"vt", "essays", 1024, 0.5, 1, 0}).find("vt"), std::string::npos);
    EXPECT_NE(message({"qa", "prose", 255, 0.5, 1, 0}).find("qa"), std::string::npos);
    EXPECT_NE(message({"niah", "prose", 131073, 0.5, 1, 0}).find("niah"), std::string::npos);
    EXPECT_NE(message({"niah", "prose", 1024, -0.01, 1, 0}).find("niah"), std::string::npos);
    EXPECT_NE(message({"niah", "prose", 1024, 1.01, 1, 0}).find("niah"), std::string::npos);
    EXPECT_NE(message({"niah", "prose", 1024, std::nan(""), 1, 0}).find("niah"), std::string::npos);
    EXPECT_EQ(message({"niah", "prose", 256, 1.0, 1, 0}), "no exception");
    const Corpus no_qa(corpus_->prose);
    EXPECT_THROW(make_sample(*tok_, {"qa", "prose", 1024, 0.5, 1, 0}, no_qa), std::runtime_error);
}

// With Gemma 3's own tokenizer (skipped without the model): lengths and depths hold at the
// lengths the benchmarks use.
TEST_F(EvalTasks, RealTokenizerLengthsAndDepths) {
    const auto path = real_model_path();
    if (!path)
        GTEST_SKIP() << "the default model is not installed (bash scripts/setup.sh model)";
    const auto gguf = GgufFile::open(*path);
    const auto tok = Tokenizer::from_gguf(*gguf);
    for (const auto& task : task_names())
        for (const std::string haystack : {"prose", "noise"})
            for (const int64_t length : {4096, 32768}) {
                SCOPED_TRACE(task + " " + haystack + " " + std::to_string(length));
                const auto s = make_sample(*tok, {task, haystack, length, 0.5, 3, 0}, *corpus_);
                const auto n = static_cast<int64_t>(tok->encode(s.context).size());
                EXPECT_LE(std::abs(static_cast<double>(n - length)), 0.05 * length);
                EXPECT_NEAR(static_cast<double>(s.meta["context_tokens"].get<int64_t>()),
                            static_cast<double>(n), 0.01 * static_cast<double>(n));
                if (s.meta.contains("needles")) {
                    const std::string needle = s.meta["needles"][0];
                    const auto at = s.context.find(needle);
                    const double d =
                        static_cast<double>(tok->encode(s.context.substr(0, at)).size()) /
                        static_cast<double>(n);
                    EXPECT_NEAR(d, 0.5, 0.02);
                }
            }
}

// Documents for position-independent caching: a sample's context cut at paragraph ends into
// pieces of about equal length that concatenate back to it; the needle is in one of them.
TEST_F(EvalTasks, ContextCutIntoDocumentsOfAboutEqualLength) {
    const auto s = make("niah_multikey", 4096, 0.6, 2);
    for (const int n : {1, 2, 4, 8}) {
        SCOPED_TRACE(n);
        const auto docs = split_into_documents(*tok_, s.context, n);
        ASSERT_EQ(docs.size(), static_cast<size_t>(n));
        std::string joined;
        for (const auto& d : docs) {
            joined += d;
            EXPECT_FALSE(d.empty());
            if (&d != &docs.back()) {
                EXPECT_TRUE(d.ends_with("\n\n")) << "cut at a paragraph end";
            }
        }
        EXPECT_EQ(joined, s.context);
        // Each cut is the paragraph end closest to its share, so a document is off its share by
        // at most the longest paragraph (plus a few tokens of tokenisation at the seams).
        int64_t longest = 0;
        for (size_t b = 0; b < s.context.size();) {
            size_t e = s.context.find("\n\n", b);
            e = e == std::string::npos ? s.context.size() : e + 2;
            longest = std::max(longest, tokens(s.context.substr(b, e - b)));
            b = e;
        }
        const double share = static_cast<double>(tokens(s.context)) / n;
        for (const auto& d : docs)
            EXPECT_NEAR(static_cast<double>(tokens(d)), share, static_cast<double>(longest) + 8);
        const int k = document_holding(docs, s.meta["needles"][0].get<std::string>());
        ASSERT_GE(k, 0);
        // The first needle sits at depth 0.6 of the context: in the document covering that
        // share, or (cuts being at paragraph ends) its neighbour.
        EXPECT_LE(std::abs(k - static_cast<int>(0.6 * n)), 1) << "document " << k;
    }
    EXPECT_THROW(split_into_documents(*tok_, "one paragraph only\n\n", 2), std::invalid_argument);
    EXPECT_THROW(split_into_documents(*tok_, s.context, 0), std::invalid_argument);
    EXPECT_EQ(document_holding({"a", "b"}, "c"), -1);
}
