// Two spanscope-cli processes on one project at the same time: two ingests of different
// documents, and two of the same document. Each must finish, or wait and then finish, or refuse
// in one line that names the file and says another program holds it (then running it again
// finishes); afterwards the project passes integrity_check and holds every chunk and chunk
// state of every document, byte for byte those of ingests run one at a time.
#include "project_faults.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

using namespace spanscope::test;

namespace {

class TwoPrograms : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = write_fault_model(dir_.file("tiny.gguf"));
        a_ = write_prose(dir_.file("a.txt"), 5, 2200);
        b_ = write_prose(dir_.file("b.txt"), 6, 2000);
    }

    std::vector<std::string> ingest(const std::string& project, const std::string& doc) const {
        return ingest_args(project, model_, doc);
    }

    /// Two ingests started together into `project`; each one refused is run again once the
    /// other has ended. Returns how each ended ("finished" or the refusal's line).
    std::vector<std::string> run_together(const std::string& project, const std::string& d1,
                                          const std::string& d2) const {
        const std::string o1 = dir_.file("out1"), e1 = dir_.file("err1");
        const std::string o2 = dir_.file("out2"), e2 = dir_.file("err2");
        const pid_t p1 = start_cli(ingest(project, d1), o1, e1);
        const pid_t p2 = start_cli(ingest(project, d2), o2, e2);
        const ChildRun r1 = finish_cli(p1, o1, e1), r2 = finish_cli(p2, o2, e2);
        std::vector<std::string> how;
        for (const auto* r : {&r1, &r2}) {
            const std::string& doc = r == &r1 ? d1 : d2;
            if (r->status == 0) {
                how.push_back("finished");
                continue;
            }
            const auto lines = message_lines(r->err);
            const std::string last = lines.empty() ? "" : lines.back();
            EXPECT_EQ(r->status, 1) << r->err;
            EXPECT_EQ(lines.size(), 1u) << "want one line that says why:\n" << r->err;
            EXPECT_NE(last.find(project), std::string::npos) << last;
            EXPECT_NE(last.find("another program"), std::string::npos) << last;
            how.push_back(last);
            const auto again = run_cli_in(dir_.path, ingest(project, doc));
            EXPECT_EQ(again.status, 0) << "run again after the refusal:\n" << again.err;
        }
        return how;
    }

    TempDir dir_;
    std::string model_, a_, b_;
};

} // namespace

TEST_F(TwoPrograms, IngestsOfTwoDocumentsAtOnceStoreEveryChunkOfBoth) {
    const std::string ref = dir_.file("reference.spanscope");
    ASSERT_EQ(run_cli_in(dir_.path, ingest(ref, a_)).status, 0);
    ASSERT_EQ(run_cli_in(dir_.path, ingest(ref, b_)).status, 0);
    const auto want = states_by_chunk(ref);

    // A new project (both create it) and an existing one (both add to it).
    const std::string fresh = dir_.file("fresh.spanscope");
    for (const auto& how : run_together(fresh, a_, b_))
        std::printf("[ new project      ] %s\n", how.c_str());
    EXPECT_EQ(integrity_of(fresh), "ok");
    EXPECT_EQ(state_differences(want, states_by_chunk(fresh)), std::vector<std::string>{});

    const std::string existing = dir_.file("existing.spanscope");
    const std::string c = write_prose(dir_.file("c.txt"), 9, 300);
    ASSERT_EQ(run_cli_in(dir_.path, ingest(existing, c)).status, 0);
    const auto before = dump_project(existing);
    for (const auto& how : run_together(existing, a_, b_))
        std::printf("[ existing project ] %s\n", how.c_str());
    EXPECT_EQ(integrity_of(existing), "ok");
    EXPECT_EQ(rows_lost(before, dump_project(existing)), std::vector<std::string>{});
    auto got = states_by_chunk(existing);
    for (auto it = got.begin(); it != got.end();)
        it = it->first.find(c) == 0 ? got.erase(it) : std::next(it);
    EXPECT_EQ(state_differences(want, got), std::vector<std::string>{});
}

TEST_F(TwoPrograms, IngestsOfTheSameDocumentAtOnceStoreItOnce) {
    const std::string ref = dir_.file("reference.spanscope");
    ASSERT_EQ(run_cli_in(dir_.path, ingest(ref, a_)).status, 0);
    const auto want = states_by_chunk(ref);
    const auto ref_dump = dump_project(ref);

    const std::string p = dir_.file("p.spanscope");
    for (const auto& how : run_together(p, a_, a_))
        std::printf("[ same document ] %s\n", how.c_str());
    EXPECT_EQ(integrity_of(p), "ok");
    EXPECT_EQ(state_differences(want, states_by_chunk(p)), std::vector<std::string>{});
    // Stored once: as many documents, chunks and states as one ingest stores.
    const auto got = dump_project(p);
    for (const char* t : {"documents", "chunks", "chunk_states", "chunk_state_blobs"})
        EXPECT_EQ(got.at(t).size(), ref_dump.at(t).size()) << t;
}

// A program that holds the project's write lock for longer than the store's busy timeout (5 s):
// the ingest waits that long, then refuses in one line naming the file and the other program,
// changing nothing; once the lock is gone the same command finishes.
TEST_F(TwoPrograms, AnIngestWaitsForAnotherProgramsWriteThenRefusesClearly) {
    const std::string ref = dir_.file("reference.spanscope");
    ASSERT_EQ(run_cli_in(dir_.path, ingest(ref, a_)).status, 0);
    const auto want = states_by_chunk(ref);

    const std::string p = dir_.file("p.spanscope");
    const std::string c = write_prose(dir_.file("c.txt"), 9, 300);
    ASSERT_EQ(run_cli_in(dir_.path, ingest(p, c)).status, 0);
    const auto before = dump_project(p);
    {
        spanscope::Db other(p, /*create=*/false);
        other.exec("BEGIN IMMEDIATE");
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = run_cli_in(dir_.path, ingest(p, a_));
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        other.exec("ROLLBACK");
        std::printf("[ locked ] after %.1f s: %s", waited, r.err.c_str());
        EXPECT_EQ(r.status, 1) << r.err;
        EXPECT_GE(waited, 4.5) << "it should wait for the busy timeout";
        const auto lines = message_lines(r.err);
        ASSERT_EQ(lines.size(), 1u) << r.err;
        EXPECT_NE(lines[0].find(p), std::string::npos) << lines[0];
        EXPECT_NE(lines[0].find("another program"), std::string::npos) << lines[0];
    }
    EXPECT_EQ(integrity_of(p), "ok");
    EXPECT_EQ(dump_project(p), before);
    const auto again = run_cli_in(dir_.path, ingest(p, a_));
    EXPECT_EQ(again.status, 0) << again.err;
    auto got = states_by_chunk(p);
    for (auto it = got.begin(); it != got.end();)
        it = it->first.find(c) == 0 ? got.erase(it) : std::next(it);
    EXPECT_EQ(state_differences(want, got), std::vector<std::string>{});
}
