// `spanscope-lab zoom-record` on a tiny model: files per document (held-out ones apart), their
// provenance, resuming, and the refusals (other settings, the evaluation's texts); and
// `spanscope-lab zoom-train` on those recordings: the parameter file and its provenance, the
// curves, resuming, and the refusals (other recordings, thread count, trained-on held-out text).
#include "cli_runner.h"
#include "engine/model/model.h"
#include "engine/sekv/router_params.h"
#include "lab/router/zoom_fact_probes.h"
#include "lab/router/zoom_question_probes.h"
#include "lab/router/zoom_record.h"
#include "lab/router/zoom_recorder.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

using namespace spanscope;

namespace {

class ZoomRecordCli : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = test::temp_dir();
        model_ = dir_ + "/tiny.gguf";
        test::TinyGemma3Config cfg;
        cfg.n_ctx = 1024;
        test::write_tiny_gemma3(model_, cfg);
        for (int i = 0; i < 3; ++i) {
            docs_.push_back(dir_ + "/doc" + std::to_string(i) + ".txt");
            std::ofstream(docs_.back()) << test::sample_prose(10 + i, 1500);
        }
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    using Run = test::CliRun;
    Run run(const std::vector<std::string>& args) {
        return test::run_cli(dir_, {"-u SPANSCOPE_MODEL", "HOME=" + dir_}, args);
    }
    std::vector<std::string> record_args(const std::string& tail = "16") {
        std::vector<std::string> a{"zoom-record", "--model", model_, "--out", dir_ + "/rec"};
        for (const char* o : {"--max-tokens 400", "--first-query 128", "--queries 3",
                              "--budget 0.5", "--threads 1", "--held-out 1"}) {
            const std::string s = o;
            a.push_back(s.substr(0, s.find(' ')));
            a.push_back(s.substr(s.find(' ') + 1));
        }
        a.insert(a.end(), {"--tail", tail, "--documents"});
        a.insert(a.end(), docs_.begin(), docs_.end());
        return a;
    }

    std::vector<std::string> train_args(const std::string& threads = "1") {
        return {"zoom-train",
                "--model",
                model_,
                "--records",
                dir_ + "/rec",
                "--out",
                dir_ + "/p.zoom.gguf",
                "--curves",
                dir_ + "/curves.jsonl",
                "--steps",
                "6",
                "--batch",
                "8",
                "--warmup",
                "2",
                "--eval-every",
                "3",
                "--checkpoint-every",
                "3",
                "--threads",
                threads};
    }
    static std::string slurp(const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    }

    std::string dir_, model_;
    std::vector<std::string> docs_;
};

} // namespace

TEST_F(ZoomRecordCli, RecordsEachDocumentWithItsProvenanceAndResumes) {
    const auto r = run(record_args());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "");
    const std::string train0 = dir_ + "/rec/doc0.txt.zoom-record.gguf";
    const std::string train1 = dir_ + "/rec/doc1.txt.zoom-record.gguf";
    const std::string held = dir_ + "/rec/held-out/doc2.txt.zoom-record.gguf";
    ASSERT_TRUE(std::filesystem::exists(train0)) << r.err;
    ASSERT_TRUE(std::filesystem::exists(train1));
    ASSERT_TRUE(std::filesystem::exists(held));
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/rec/doc2.txt.zoom-record.gguf"));
    EXPECT_NE(r.err.find("[1/3] doc0.txt: 400 tokens"), std::string::npos) << r.err;

    const ZoomRecord z = load_zoom_record(train0);
    EXPECT_EQ(z.source, std::filesystem::weakly_canonical(docs_[0]).string());
    EXPECT_EQ(z.n_tokens(), 400);
    EXPECT_EQ(z.n_queries(), 3);
    EXPECT_EQ(z.tail, 16);
    EXPECT_EQ(z.budget, 0.5);
    EXPECT_EQ(z.model_fingerprint.size(), 32u);
    EXPECT_NE(z.command.find("zoom-record"), std::string::npos);
    EXPECT_NE(z.command.find("--queries 3"), std::string::npos);
    EXPECT_FALSE(z.commit.empty());
    EXPECT_NE(z.settings.find("max_tokens=400"), std::string::npos);
    EXPECT_FALSE(z.layers.empty());

    // Again: every document is skipped, the files stay as they are.
    const auto before = std::filesystem::last_write_time(train0);
    const auto again = run(record_args());
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.err.find("doc0.txt: already recorded"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("doc2.txt: already recorded"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("0 recorded, 3 already recorded"), std::string::npos) << again.err;
    EXPECT_EQ(std::filesystem::last_write_time(train0), before);

    // A missing recording is made again, the others are kept.
    std::filesystem::remove(train1);
    const auto resumed = run(record_args());
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_NE(resumed.err.find("1 recorded, 2 already recorded"), std::string::npos) << resumed.err;
    EXPECT_TRUE(std::filesystem::exists(train1));

    // Other settings into the same directory: refused, naming the file; nothing changes.
    const auto other = run(record_args("32"));
    EXPECT_NE(other.status, 0);
    EXPECT_NE(other.err.find(train0), std::string::npos) << other.err;
    EXPECT_NE(other.err.find("other settings"), std::string::npos) << other.err;
    EXPECT_EQ(std::filesystem::last_write_time(train0), before);
}

TEST_F(ZoomRecordCli, RecallProbesAreRecordedAfterTheDocument) {
    auto args = record_args();
    args.insert(args.begin() + 1, {"--recall-probes", "2", "--probe-tokens", "16"});
    const auto r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    const ZoomRecord z = load_zoom_record(dir_ + "/rec/doc0.txt.zoom-record.gguf");
    ASSERT_EQ(z.n_tokens(), 400);
    EXPECT_NE(z.settings.find("recall_probes=2 probe_tokens=16"), std::string::npos) << z.settings;
    // The last 32 tokens are two runs of the first 368.
    const std::vector<int32_t> doc(z.tokens.begin(), z.tokens.begin() + 368);
    ZoomRecordSettings s;
    s.max_tokens = 400;
    s.recall_probes = 2;
    s.probe_tokens = 16;
    EXPECT_EQ(zoom_recall_probes(doc, s), z.tokens);
    // Recorded without probes into the same directory: other settings, refused.
    const auto plain = run(record_args());
    EXPECT_NE(plain.status, 0);
    EXPECT_NE(plain.err.find("other settings"), std::string::npos) << plain.err;
}

TEST_F(ZoomRecordCli, QuestionProbesAreRecordedInThePromptForm) {
    auto args = record_args();
    args.insert(args.begin() + 1,
                {"--recall-probes", "2", "--probe-tokens", "16", "--probe-form", "question"});
    const auto r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find(" after the document ("), std::string::npos) << r.err;
    const ZoomRecord z = load_zoom_record(dir_ + "/rec/doc0.txt.zoom-record.gguf");
    EXPECT_NE(z.settings.find("recall_probes=2 probe_tokens=16 probe_form=question"),
              std::string::npos)
        << z.settings;
    // The tokens are the document's question probes, in the tiny model's prompt style.
    ZoomRecordSettings s;
    s.max_tokens = 400;
    s.recall_probes = 2;
    s.probe_tokens = 16;
    s.probe_form = ZoomProbeForm::Question;
    const auto model = Model::load(model_);
    const auto p =
        zoom_question_probes(model->tokenizer(), chat_format_of(model->info(), model->tokenizer()),
                             "doc0.txt", slurp(docs_[0]), s);
    EXPECT_EQ(p.tokens, z.tokens);
    // Recorded with copy probes into the same directory: other settings, refused.
    auto copy = record_args();
    copy.insert(copy.begin() + 1, {"--recall-probes", "2", "--probe-tokens", "16"});
    const auto other = run(copy);
    EXPECT_NE(other.status, 0);
    EXPECT_NE(other.err.find("other settings"), std::string::npos) << other.err;
    // A form that does not exist is refused.
    args[6] = "quiz";
    const auto quiz = run(args);
    EXPECT_EQ(quiz.status, 2) << quiz.err;
    EXPECT_NE(quiz.err.find("--probe-form"), std::string::npos) << quiz.err;
    // Question probes need probes.
    args[2] = "0";
    args[6] = "question";
    const auto zero = run(args);
    EXPECT_NE(zero.status, 0);
    EXPECT_NE(zero.err.find("--recall-probes N >= 1"), std::string::npos) << zero.err;
}

TEST_F(ZoomRecordCli, FactProbesAreRecordedInThePromptForm) {
    auto args = record_args();
    args.insert(args.begin() + 1,
                {"--recall-probes", "2", "--probe-tokens", "64", "--probe-form", "fact"});
    const auto r = run(args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find(" after the document ("), std::string::npos) << r.err;
    const ZoomRecord z = load_zoom_record(dir_ + "/rec/doc0.txt.zoom-record.gguf");
    EXPECT_NE(z.settings.find("recall_probes=2 probe_tokens=64 probe_form=fact"), std::string::npos)
        << z.settings;
    ZoomRecordSettings s;
    s.max_tokens = 400;
    s.recall_probes = 2;
    s.probe_tokens = 64;
    s.probe_form = ZoomProbeForm::Fact;
    const auto model = Model::load(model_);
    const auto p =
        zoom_fact_probes(model->tokenizer(), chat_format_of(model->info(), model->tokenizer()),
                         "doc0.txt", slurp(docs_[0]), s);
    EXPECT_EQ(p.tokens, z.tokens);
    // Recorded with copy probes into the same directory: other settings, refused.
    args[6] = "copy";
    const auto other = run(args);
    EXPECT_NE(other.status, 0);
    EXPECT_NE(other.err.find("other settings"), std::string::npos) << other.err;
    // Fact probes need probes.
    args[2] = "0";
    args[6] = "fact";
    const auto zero = run(args);
    EXPECT_NE(zero.status, 0);
    EXPECT_NE(zero.err.find("--recall-probes N >= 1"), std::string::npos) << zero.err;
}

TEST_F(ZoomRecordCli, RefusesTheEvaluationTextsAndBadOptions) {
    for (const std::string text :
         {"/usr/share/common-licenses/GPL-3", "/usr/share/vim/vim90/doc/usr_01.txt",
          "/usr/share/doc/bash/RBASH"}) {
        const auto r = run({"zoom-record", "--model", model_, "--out", dir_ + "/rec", "--documents",
                            docs_[0], text});
        EXPECT_NE(r.status, 0);
        EXPECT_NE(r.err.find("evaluation"), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(std::filesystem::exists(dir_ + "/rec"));
    }
    const auto dup = run({"zoom-record", "--model", model_, "--out", dir_ + "/rec", "--documents",
                          docs_[0], dir_ + "/./doc0.txt"});
    EXPECT_NE(dup.status, 0);
    EXPECT_NE(dup.err.find("both"), std::string::npos) << dup.err;
    const auto no_out = run({"zoom-record", "--model", model_, "--documents", docs_[0]});
    EXPECT_EQ(no_out.status, 2) << no_out.err;
    const auto missing = run({"zoom-record", "--model", model_, "--out", dir_ + "/rec",
                              "--held-out", "0", "--documents", dir_ + "/none.txt"});
    EXPECT_NE(missing.status, 0);
    EXPECT_NE(missing.err.find("none.txt"), std::string::npos) << missing.err;
}

TEST_F(ZoomRecordCli, TrainsFromTheRecordingsAndResumesToTheSameFile) {
    ASSERT_EQ(run(record_args()).status, 0);
    const auto r = run(train_args());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("2 recordings"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1 held out"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("held-out step 0:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("step 6/6"), std::string::npos) << r.err;

    const auto p = load_router_params(dir_ + "/p.zoom.gguf");
    EXPECT_EQ(p.model_fingerprint,
              load_zoom_record(dir_ + "/rec/doc0.txt.zoom-record.gguf").model_fingerprint);
    EXPECT_FALSE(p.layers.empty());
    EXPECT_NE(p.provenance.command.find("zoom-train"), std::string::npos);
    EXPECT_NE(p.provenance.data.find("2 recordings"), std::string::npos) << p.provenance.data;
    EXPECT_FALSE(p.provenance.commit.empty());
    EXPECT_FALSE(p.share_group); // each query head decided alone

    // The curves: held-out at steps 0, 3, 6 and a train line per step, in order.
    const auto curves = slurp(dir_ + "/curves.jsonl");
    const auto count = [&](const std::string& needle) {
        size_t n = 0;
        for (size_t at = curves.find(needle); at != std::string::npos;
             at = curves.find(needle, at + 1))
            ++n;
        return n;
    };
    EXPECT_EQ(count("\"split\":\"train\""), 6u) << curves;
    EXPECT_EQ(count("\"split\":\"held_out\""), 3u) << curves;

    // Run again: resumed at step 6, nothing trained, the same file and the same curves (a
    // resumed run does not append the lines of the steps it starts after).
    const auto params = slurp(dir_ + "/p.zoom.gguf");
    const auto again = run(train_args());
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.err.find("resuming from"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("at step 6"), std::string::npos) << again.err;
    EXPECT_EQ(slurp(dir_ + "/curves.jsonl"), curves);
    // The provenance records the creation time: compare the parameters, not the bytes.
    const auto q = load_router_params(dir_ + "/p.zoom.gguf");
    EXPECT_EQ(q.digest(), p.digest());
    EXPECT_EQ(params.size(), slurp(dir_ + "/p.zoom.gguf").size());

    // A fresh run (no checkpoint) rewrites the curves from step 0 instead of appending to them.
    std::filesystem::remove(dir_ + "/p.zoom.gguf.ckpt");
    ASSERT_EQ(run(train_args()).status, 0);
    EXPECT_EQ(slurp(dir_ + "/curves.jsonl"), curves);

    // --compare with --compare-rates: both routers with τ calibrated to each share per head
    // expand that share of the held-out spans (the trained router's learned θ set aside), and
    // more expansions recall more labels.
    auto compare = train_args();
    compare.insert(compare.end(), {"--compare", "--compare-rates", "0.25,0.75"});
    const auto c = run(compare);
    ASSERT_EQ(c.status, 0) << c.err;
    {
        // The held-out losses of the parameter file, every component (the ranking loss too,
        // reported whatever its weight in training).
        const size_t at = c.out.find("trained: held-out losses");
        ASSERT_NE(at, std::string::npos) << c.out;
        double v[7];
        ASSERT_EQ(std::sscanf(c.out.c_str() + at,
                              "trained: held-out losses zoom %lf distill %lf recon %lf (hard %lf) "
                              "budget %lf (soft %lf) ranking %lf",
                              &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]),
                  7)
            << c.out.substr(at, 200);
        EXPECT_GT(v[6], 0.0); // a KL of the teacher's masses to a softmax that is not theirs
    }
    std::vector<double> recall_trained, recall_free;
    // The six numbers of the line that starts with `label` at `at`: trained distill, expand,
    // recall, training-free distill, expand, recall.
    // (Empty, with a failure, when the line is not there or does not parse.)
    auto numbers = [&](size_t at, const char* label) {
        std::vector<double> v(6);
        if (at >= c.out.size() || c.out.compare(at, std::strlen(label), label) != 0) {
            ADD_FAILURE() << "no line \"" << label << "\" in\n" << c.out;
            return std::vector<double>{};
        }
        if (std::sscanf(c.out.c_str() + at + std::strlen(label),
                        " trained distill %lf expand %lf %% label recall %lf %% "
                        "training-free distill %lf expand %lf %% label recall %lf %%",
                        &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
            ADD_FAILURE() << "unparsed: " << c.out.substr(at, 200);
            return std::vector<double>{};
        }
        return v;
    };
    for (const double rate : {0.25, 0.75}) {
        char head[40];
        std::snprintf(head, sizeof head, "at %5.1f %% per head:", 100 * rate);
        const auto at = c.out.find(head);
        ASSERT_NE(at, std::string::npos) << head << "\n" << c.out;
        const auto each = numbers(at, head);
        ASSERT_EQ(each.size(), 6u);
        // The quantile of the held-out scores themselves: that share, up to the step of one
        // span in a head's few dozen.
        EXPECT_NEAR(each[1], 100 * rate, 1.5) << c.out.substr(at, 200);
        EXPECT_NEAR(each[4], 100 * rate, 1.5) << c.out.substr(at, 200);
        recall_trained.push_back(each[2]);
        recall_free.push_back(each[5]);
        // The next line: both routers with the KV group's union of those choices, which expands
        // and recalls at least as much as each head alone.
        const auto next = c.out.find('\n', at) + 1;
        const auto group = numbers(next, "  with the KV group union:");
        ASSERT_EQ(group.size(), 6u);
        if (rate < 0.5) { // (at 0.75 the unions cover nearly every span)
            EXPECT_NE(group[0], group[3]) << "the trained column scores with W";
        }
        EXPECT_GE(group[1], each[1]);
        EXPECT_GE(group[2], each[2]);
        EXPECT_GE(group[4], each[4]);
        EXPECT_GE(group[5], each[5]);
        // Then the union with τ calibrated on each query's own spans: the union of shares of
        // about the rate per query.
        const auto per_query = numbers(c.out.find('\n', next) + 1, "  union, tau per query:");
        ASSERT_EQ(per_query.size(), 6u);
        EXPECT_GE(per_query[1], each[1] - 1.5);
        EXPECT_GE(per_query[4], each[4] - 1.5);
        // (After 6 steps W barely moves each query's own order, so the two columns may agree
        // to the digits printed; ZoomReference.TauPerQueryExpandsEachQuerysShare checks that
        // the trained column scores with W.)
    }
    EXPECT_GT(recall_trained[1], recall_trained[0]);
    EXPECT_GT(recall_free[1], recall_free[0]);
    // The rates only with --compare.
    auto alone = train_args();
    alone.insert(alone.end(), {"--compare-rates", "0.5"});
    const auto refused = run(alone);
    EXPECT_EQ(refused.status, 2);
    EXPECT_NE(refused.err.find("--compare"), std::string::npos) << refused.err;
}

TEST_F(ZoomRecordCli, TrainingRefusesOtherRecordingsThreadsAndTrainedOnHeldOutText) {
    ASSERT_EQ(run(record_args()).status, 0);
    ASSERT_EQ(run(train_args()).status, 0);
    // The checkpoint was made with 1 thread: 2 would sum in another order.
    const auto threads = run(train_args("2"));
    EXPECT_NE(threads.status, 0);
    EXPECT_NE(threads.err.find("another training configuration"), std::string::npos) << threads.err;
    EXPECT_NE(threads.err.find("threads=2"), std::string::npos) << threads.err;
    // Gates started otherwise: another run, not this one resumed.
    auto closed = train_args();
    closed.insert(closed.end(), {"--gate-bias", "0"});
    const auto bias = run(closed);
    EXPECT_NE(bias.status, 0);
    EXPECT_NE(bias.err.find("gate_bias=0"), std::string::npos) << bias.err;
    // Trained with the KV group's union or the ranking loss: other runs, not this one resumed.
    for (const std::vector<std::string>& extra : {std::vector<std::string>{"--share-group"},
                                                  std::vector<std::string>{"--w-ranking", "2"}}) {
        auto other = train_args();
        other.insert(other.end(), extra.begin(), extra.end());
        const auto r = run(other);
        EXPECT_NE(r.status, 0) << extra[0];
        EXPECT_NE(r.err.find(extra[0] == "--share-group" ? "share_group=1" : "w_ranking=2"),
                  std::string::npos)
            << r.err;
    }
    // Trained with the union into another file: the file says so (its learned τ decide so).
    auto united = train_args();
    united[6] = dir_ + "/united.zoom.gguf";
    united.push_back("--share-group");
    const auto u = run(united);
    ASSERT_EQ(u.status, 0) << u.err;
    EXPECT_TRUE(load_router_params(dir_ + "/united.zoom.gguf").share_group);
    // --compare reads it from the file: its learned thresholds decide with the union.
    auto compare = train_args();
    compare[6] = dir_ + "/united.zoom.gguf";
    compare.push_back("--compare");
    const auto c = run(compare);
    ASSERT_EQ(c.status, 0) << c.err;
    EXPECT_NE(c.out.find("trained: held-out losses (KV group union)"), std::string::npos) << c.out;
    compare[6] = dir_ + "/p.zoom.gguf";
    const auto c_alone = run(compare);
    ASSERT_EQ(c_alone.status, 0) << c_alone.err;
    EXPECT_EQ(c_alone.out.find("held-out losses (KV group union)"), std::string::npos)
        << c_alone.out;
    EXPECT_NE(c_alone.out.find("trained router, trained rank gate"), std::string::npos);
    // The same parameters with the union (--share-group given) expand more than each head alone.
    auto expand_of = [](const std::string& out, const char* label) {
        const size_t at = out.find(label);
        double distill = -1, expand = -1;
        if (at == std::string::npos ||
            std::sscanf(out.c_str() + at + std::strlen(label), " distill %lf expand %lf", &distill,
                        &expand) != 2)
            ADD_FAILURE() << "no line \"" << label << "\" in\n" << out;
        return expand;
    };
    compare.push_back("--share-group");
    const auto c_union = run(compare);
    ASSERT_EQ(c_union.status, 0) << c_union.err;
    EXPECT_GT(expand_of(c_union.out, "trained router, rank gate (union)"),
              expand_of(c_alone.out, "trained router, trained rank gate"));
    // Other recordings (one removed): refused, not resumed on different data.
    const std::string doc1 = dir_ + "/rec/doc1.txt.zoom-record.gguf";
    const std::string kept = dir_ + "/doc1.kept";
    std::filesystem::rename(doc1, kept);
    const auto fewer = run(train_args());
    EXPECT_NE(fewer.status, 0);
    EXPECT_NE(fewer.err.find("another training configuration"), std::string::npos) << fewer.err;
    std::filesystem::rename(kept, doc1);
    // A held-out document that is also trained on.
    std::filesystem::copy_file(dir_ + "/rec/held-out/doc2.txt.zoom-record.gguf",
                               dir_ + "/rec/doc2.txt.zoom-record.gguf");
    std::filesystem::remove(dir_ + "/p.zoom.gguf.ckpt");
    const auto leak = run(train_args());
    EXPECT_NE(leak.status, 0);
    EXPECT_NE(leak.err.find("also a training recording"), std::string::npos) << leak.err;
    EXPECT_NE(leak.err.find("doc2.txt"), std::string::npos) << leak.err;
}
