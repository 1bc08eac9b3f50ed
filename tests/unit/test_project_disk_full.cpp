// A full disk under spanscope-cli: during an ingest (a file size limit in the child, so that
// write() fails with EFBIG, and a small tmpfs where the machine lets a test mount one, ENOSPC)
// and while `ask --project` saves its chat. Each fault must be reported in one line that names
// the project file and the cause, lose nothing committed before it (integrity_check, every
// earlier row byte for byte), and the same command run once the fault is gone must finish
// with exactly what an uninterrupted run stores.
#include "project_faults.h"

#include <gtest/gtest.h>

#include <sys/mount.h>

#include <cstdio>
#include <filesystem>

using namespace spanscope::test;

namespace {

/// How the product names each fault (storage/sqlite_db.cpp): EFBIG (RLIMIT_FSIZE) and ENOSPC.
const std::string kFileSizeLimit = "file size limit";
const std::string kDiskFull = "disk is full";

class DiskFull : public ::testing::Test {
protected:
    void SetUp() override {
        model_ = write_fault_model(dir_.file("tiny.gguf"));
        first_ = write_prose(dir_.file("first.txt"), 3, 900);
        second_ = write_prose(dir_.file("second.txt"), 7, 2200);
    }

    std::vector<std::string> ingest(const std::string& project, const std::string& doc) const {
        return ingest_args(project, model_, doc);
    }
    std::vector<std::string> ask(const std::string& project, const std::string& q) const {
        return {"ask",       "--project", project,        "--model", model_,
                "--threads", "1",         "--max-tokens", "6",       q};
    }

    ChildRun run(const std::vector<std::string>& args, const ChildSetup& s = {}) const {
        return run_cli_in(dir_.path, args, s);
    }

    /// An uninterrupted ingest of both documents: its states (want_) and the project's size
    /// after each document (after_first_, after_both_).
    void reference() {
        const std::string path = dir_.file("reference.spanscope");
        ASSERT_EQ(run(ingest(path, first_)).status, 0);
        after_first_ = static_cast<int64_t>(std::filesystem::file_size(path));
        const auto r = run(ingest(path, second_));
        ASSERT_EQ(r.status, 0) << r.err;
        after_both_ = static_cast<int64_t>(std::filesystem::file_size(path));
        want_ = states_by_chunk(path);
    }

    /// An ingest stopped by a full disk: the report naming `cause` (printed), and the project
    /// still passes integrity_check with every row of `before` as it was.
    static void expect_fault_lost_nothing(const ChildRun& r, const std::string& project,
                                          const std::string& cause, const ProjectDump& before,
                                          const std::string& where) {
        expect_disk_full_report(r, project, cause, where);
        const auto lines = message_lines(r.err);
        std::printf("[ message ] %s\n", lines.empty() ? "" : lines.back().c_str());
        EXPECT_EQ(integrity_of(project), "ok");
        EXPECT_EQ(rows_lost(before, dump_project(project)), std::vector<std::string>{});
    }

    /// The fault gone: the same ingest completes, with exactly the reference's states.
    void expect_resume_matches_reference(const std::string& project) const {
        const auto again = run(ingest(project, second_));
        EXPECT_EQ(again.status, 0) << again.err;
        EXPECT_EQ(integrity_of(project), "ok");
        EXPECT_EQ(state_differences(want_, states_by_chunk(project)), std::vector<std::string>{});
    }

    /// The fault's report: exit status 1 and one line that names the project file and the
    /// fault's `cause` (kFileSizeLimit or kDiskFull), and nothing that names the other one.
    static void expect_disk_full_report(const ChildRun& r, const std::string& project,
                                        const std::string& cause, const std::string& where) {
        EXPECT_EQ(r.status, 1) << where << "\n" << r.err;
        const std::string& other = cause == kFileSizeLimit ? kDiskFull : kFileSizeLimit;
        const auto lines = message_lines(r.err);
        const auto named = std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
            return l.find(project) != std::string::npos && l.find(cause) != std::string::npos;
        });
        EXPECT_EQ(named, 1) << where << ": want one line naming " << project << " and \"" << cause
                            << "\":\n"
                            << r.err;
        EXPECT_EQ(r.err.find(other), std::string::npos)
            << where << ": the fault is \"" << cause << "\", not \"" << other << "\":\n"
            << r.err;
        EXPECT_EQ(r.err.find("disk I/O error"), std::string::npos) << where << "\n" << r.err;
    }

    TempDir dir_;
    std::string model_, first_, second_;
    int64_t after_first_ = 0, after_both_ = 0;
    std::map<std::string, std::string> want_;
};

} // namespace

TEST_F(DiskFull, IngestStopsAtAFileSizeLimitKeepsWhatWasCommittedAndResumes) {
    ASSERT_NO_FATAL_FAILURE(reference());

    const std::string p = dir_.file("p.spanscope");
    ASSERT_EQ(run(ingest(p, first_)).status, 0);
    const auto before = dump_project(p);
    // The second document's writes go to the write-ahead log from its start: a limit of half
    // what they add stops the ingest in its middle (never below the 32 KiB shared-memory file).
    const int64_t limit = std::max<int64_t>(48 << 10, (after_both_ - after_first_) / 2);
    ChildSetup s;
    s.file_size_limit = limit;
    const auto r = run(ingest(p, second_), s);
    std::printf("[ limit ] %lld bytes (the second document adds %lld)\n",
                static_cast<long long>(limit), static_cast<long long>(after_both_ - after_first_));
    expect_fault_lost_nothing(r, p, kFileSizeLimit, before, "ingest under RLIMIT_FSIZE");
    const auto part = states_by_chunk(p);
    int64_t stored = 0;
    for (const auto& [k, v] : part) {
        if (k.find(second_) == 0 && k.find(" kind 1") != std::string::npos)
            ++stored;
        const auto it = want_.find(k);
        // A committed attention-row state is final; a sliding tail is replaced as chunks follow.
        if (k.find(" kind 2") == std::string::npos) {
            ASSERT_NE(it, want_.end()) << k;
            EXPECT_TRUE(it->second == v) << k << " differs from the uninterrupted ingest";
        }
    }
    int64_t total = 0;
    for (const auto& [k, v] : want_)
        total += k.find(second_) == 0 && k.find(" kind 1") != std::string::npos ? 1 : 0;
    std::printf("[ fault ] %lld of %lld chunks of the second document committed\n",
                static_cast<long long>(stored), static_cast<long long>(total));
    EXPECT_LT(stored, total) << "the limit did not interrupt the ingest";

    expect_resume_matches_reference(p);
}

TEST_F(DiskFull, IngestOnAFullSmallFilesystemKeepsWhatWasCommittedAndResumes) {
    // A private mount namespace: the filesystem is this process's and its children's alone.
    if (const std::string why = private_mount_namespace(); !why.empty())
        GTEST_SKIP() << why << "; the file size limit test covers the full disk";
    ASSERT_NO_FATAL_FAILURE(reference());

    // The project after the first document, copied onto a filesystem with room for it, its
    // shared-memory file and half of what the second document adds.
    const std::string p0 = dir_.file("p0.spanscope");
    ASSERT_EQ(run(ingest(p0, first_)).status, 0);
    const std::string small = dir_.file("small");
    std::filesystem::create_directory(small);
    const int64_t room = after_first_ + (64 << 10) + (after_both_ - after_first_) / 2;
    const std::string size = "size=" + std::to_string((room + 4095) / 4096 * 4096);
    if (mount("tmpfs", small.c_str(), "tmpfs", 0, size.c_str()) != 0)
        GTEST_SKIP() << "cannot mount a small tmpfs (" << std::strerror(errno)
                     << "); the file size limit test covers the full disk";
    struct Unmount {
        std::string at;
        ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
    } unmount{small};
    const std::string p = small + "/p.spanscope";
    std::filesystem::copy_file(p0, p);
    const auto before = dump_project(p);
    const auto r = run(ingest(p, second_));
    expect_fault_lost_nothing(r, p, kDiskFull, before, "ingest on a full tmpfs");

    // The filesystem grown: the same command completes with the reference's states.
    ASSERT_EQ(mount("tmpfs", small.c_str(), "tmpfs", MS_REMOUNT, "size=64m"), 0)
        << std::strerror(errno);
    expect_resume_matches_reference(p);
}

TEST_F(DiskFull, AskThatCannotSaveItsChatSaysSoAndKeepsTheEarlierChats) {
    const std::string p = dir_.file("p.spanscope");
    ASSERT_EQ(run(ingest(p, first_)).status, 0);

    // A read transaction held open here (a second program on the project) keeps a snapshot
    // that the log's later frames may not be checkpointed over nor the log restarted under
    // (SQLite's automatic checkpoint could otherwise reset it between the asks), so each ask
    // writes past the log's end: a limit a little past the log's size stops the ask while it
    // saves its chat. Limits grow until an ask saves it; each one that fails must say so and
    // lose nothing. The transaction begins once the first ask has written to the log: a reader
    // that begins on an empty log reads the database file alone and does not hold it.
    spanscope::Db keep(p, /*create=*/false);
    keep.exec("SELECT count(*) FROM chats");
    const auto first_ask = run(ask(p, "Where is the river?"));
    ASSERT_EQ(first_ask.status, 0) << first_ask.err;
    keep.exec("BEGIN; SELECT count(*) FROM documents;");
    const auto before = dump_project(p);
    ASSERT_EQ(before.at("chats").size(), 1u);
    int failed = 0;
    bool saved = false;
    for (int64_t step = 1; !saved && step < (1 << 20); step = step * 2 + 1024) {
        std::error_code ec;
        const auto wal = std::filesystem::file_size(p + "-wal", ec);
        ChildSetup s;
        const int64_t limit =
            std::max<int64_t>(33 << 10, (ec ? 0 : static_cast<int64_t>(wal)) + step);
        s.file_size_limit = limit;
        const auto r = run(ask(p, "Which garden is quiet?"), s);
        const std::string where = "ask under a limit of " + std::to_string(limit) + " bytes";
        ASSERT_EQ(integrity_of(p), "ok") << where;
        EXPECT_EQ(rows_lost(before, dump_project(p)), std::vector<std::string>{}) << where;
        if (r.status == 0) {
            saved = true;
        } else {
            ++failed;
            expect_disk_full_report(r, p, kFileSizeLimit, where);
        }
        std::printf("[ ask ] limit %7lld bytes: %s\n", static_cast<long long>(limit),
                    r.status == 0 ? "saved" : r.err.c_str());
    }
    EXPECT_GT(failed, 0) << "no limit made the save fail";
    EXPECT_TRUE(saved) << "no ask saved its chat under a limit below 1 MiB past the log";
    // The fault gone and the read transaction ended: an ask works and its chat is kept beside
    // the earlier ones.
    keep.exec("COMMIT");
    const auto later = run(ask(p, "What did the letter say?"));
    EXPECT_EQ(later.status, 0) << later.err;
    EXPECT_EQ(integrity_of(p), "ok");
    const auto after = dump_project(p);
    EXPECT_EQ(rows_lost(before, after), std::vector<std::string>{});
    EXPECT_GE(after.at("chats").size(), 2u);
}
