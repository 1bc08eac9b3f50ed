// A project that cannot be written (a read-only file, a read-only folder, a read-only
// filesystem) and one whose folder disappears while spanscope-cli ingests into it. Reading
// commands work or refuse clearly, writing ones refuse in one line naming the file, and nothing
// changes: the same rows byte for byte, no file added beside it. A folder removed or renamed
// under an ingest ends it with a message, never a crash, and no file is made anew where the
// project was.
#include "project_faults.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <sys/mount.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

using namespace spanscope::test;

namespace {

class ReadOnlyProject : public ::testing::Test {
protected:
    void SetUp() override {
        // Readable by the user the children may run as (root's tests run them as nobody).
        ::chmod(dir_.path.c_str(), 0755);
        model_ = write_fault_model(dir_.file("tiny.gguf"));
        doc_ = write_prose(dir_.file("doc.txt"), 3, 900);
        other_ = write_prose(dir_.file("other.txt"), 4, 500);
        out_ = dir_.file("out");
        std::filesystem::create_directory(out_);
        ::chmod(out_.c_str(), 0777);
    }

    /// A project holding doc_ and one chat, in its own folder `name`.
    std::string make_project(const std::string& name) {
        const std::string folder = dir_.file(name);
        std::filesystem::create_directory(folder);
        const std::string p = folder + "/p.spanscope";
        EXPECT_EQ(run(ingest_args(p, model_, doc_)).status, 0);
        EXPECT_EQ(run(ask(p)).status, 0);
        return p;
    }

    std::vector<std::string> ask(const std::string& p) const {
        return {"ask", "--project",          p, "--model", model_, "--threads", "1", "--max-tokens",
                "4",   "Where is the river?"};
    }

    ChildRun run(const std::vector<std::string>& args, const ChildSetup& s = {}) const {
        return run_cli_in(out_, args, s);
    }

    /// Every command on the project `p` that cannot be written: reading ones work, writing ones
    /// refuse in one line naming it; nothing in its folder changes.
    void expect_read_only_behaviour(const std::string& p, const ChildSetup& s,
                                    const std::string& where) {
        const std::string folder = std::filesystem::path(p).parent_path().string();
        const auto before = dump_project(p);
        const auto files = files_under(folder);

        const auto info = run({"project", "info", "--json", "--project", p}, s);
        EXPECT_EQ(info.status, 0) << where << ": project info\n" << info.err;
        const auto list =
            run({"project", "list-docs", "--json", "--model", model_, "--project", p}, s);
        EXPECT_EQ(list.status, 0) << where << ": project list-docs\n" << list.err;
        EXPECT_NE(list.out.find(doc_), std::string::npos) << where << ": " << list.out;
        std::printf("[ %s ] info: %s, list-docs: %s\n", where.c_str(),
                    info.status == 0 ? "works" : info.err.c_str(),
                    list.status == 0 ? "works" : list.err.c_str());

        const std::vector<std::pair<const char*, std::vector<std::string>>> writes{
            {"ingest", ingest_args(p, model_, other_)},
            {"ask", ask(p)},
            {"set-cache-limit", {"project", "set-cache-limit", "--project", p, "1G"}},
        };
        for (const auto& [name, args] : writes) {
            const auto r = run(args, s);
            const auto lines = message_lines(r.err);
            std::printf("[ %s ] %s: exit %d: %s\n", where.c_str(), name, r.status,
                        lines.empty() ? "" : lines.back().c_str());
            EXPECT_EQ(r.status, 1) << where << ": " << name << "\n" << r.err;
            ASSERT_FALSE(lines.empty()) << where << ": " << name;
            EXPECT_EQ(lines.size(), 1u) << where << ": " << name << "\n" << r.err;
            EXPECT_NE(lines.back().find(p), std::string::npos) << where << ": " << name;
            EXPECT_NE(lines.back().find("read-only"), std::string::npos)
                << where << ": " << name << ": say why it cannot be written";
        }
        EXPECT_EQ(files_under(folder), files) << where;
        EXPECT_EQ(integrity_of(p), "ok") << where;
        EXPECT_EQ(dump_project(p), before) << where;
    }

    TempDir dir_;
    std::string model_, doc_, other_, out_;
};

/// Root passes permission checks: its children drop to nobody for them.
ChildSetup unprivileged() {
    ChildSetup s;
    s.as_nobody = ::geteuid() == 0;
    return s;
}

} // namespace

TEST_F(ReadOnlyProject, AReadOnlyFileIsReadAndNeverWritten) {
    const std::string p = make_project("file");
    const std::string folder = std::filesystem::path(p).parent_path().string();
    ::chmod(folder.c_str(), 0777); // the folder stays writable: only the file is not
    ::chmod(p.c_str(), 0444);
    expect_read_only_behaviour(p, unprivileged(), "0444 file");
}

TEST_F(ReadOnlyProject, AReadOnlyFolderIsReadAndNeverWritten) {
    const std::string p = make_project("folder");
    const std::string folder = std::filesystem::path(p).parent_path().string();
    // The file itself writable by the children, its folder not (no log beside it).
    if (::geteuid() == 0 && ::chown(p.c_str(), 65534, 65534) != 0)
        GTEST_SKIP() << "cannot give the project to nobody: " << std::strerror(errno);
    ::chmod(p.c_str(), 0644);
    ::chmod(folder.c_str(), 0555);
    expect_read_only_behaviour(p, unprivileged(), "0555 folder");
    ::chmod(folder.c_str(), 0755);
}

TEST_F(ReadOnlyProject, AReadOnlyFilesystemIsReadAndNeverWritten) {
    if (const std::string why = private_mount_namespace(); !why.empty())
        GTEST_SKIP() << why;
    const std::string p = make_project("ro");
    const std::string folder = std::filesystem::path(p).parent_path().string();
    if (mount(folder.c_str(), folder.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        mount(nullptr, folder.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
        GTEST_SKIP() << "cannot bind-mount the folder read-only: " << std::strerror(errno);
    struct Unmount {
        std::string at;
        ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
    } unmount{folder};
    expect_read_only_behaviour(p, {}, "read-only filesystem");
}

namespace {
/// An ingest long enough to be interrupted: a slower model and a document of about 70 chunks.
struct LongIngest {
    std::string model, doc;
};
LongIngest long_ingest(const std::string& dir) {
    LongIngest l{dir + "/slow.gguf", dir + "/long.txt"};
    write_tiny_gemma3(l.model, slower_tiny_gemma3());
    write_prose(l.doc, 7, 2200);
    return l;
}

/// The descriptors above 2 of the process `pid` that lead to one of `paths`, as "fd -> path".
std::vector<std::string> descriptors_to(pid_t pid, const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    std::error_code ec;
    const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
    for (auto it = std::filesystem::directory_iterator(fds, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        const std::string fd = it->path().filename().string();
        std::error_code lec;
        const std::string to = std::filesystem::read_symlink(it->path(), lec).string();
        if (std::stoi(fd) > 2 && std::find(paths.begin(), paths.end(), to) != paths.end())
            out.push_back(fd + " -> " + to);
    }
    if (ec)
        out.push_back("cannot list " + fds + ": " + ec.message());
    return out;
}

/// An ingest started by start_ingest_until: its process, and whether it printed the progress
/// line asked for before the wait ended.
struct RunningIngest {
    pid_t pid = -1;
    bool reached = false;
};

/// Start an ingest into `p` and return once it has stored `chunks` chunks (its progress line),
/// once it has ended, or after 60 s.
RunningIngest start_ingest_until(const LongIngest& l, const std::string& p, const std::string& out,
                                 int chunks) {
    std::filesystem::remove(out + "/err"); // not the progress of an earlier run
    RunningIngest r{start_cli(ingest_args(p, l.model, l.doc), out + "/out", out + "/err")};
    const std::string mark = ": " + std::to_string(chunks) + " of ";
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
        if (read_file(out + "/err").find(mark) != std::string::npos) {
            r.reached = true;
            break;
        }
        siginfo_t info{};
        if (waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == r.pid)
            break; // ended (left for finish_cli to reap)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return r;
}
} // namespace

TEST_F(ReadOnlyProject, AFolderRemovedOrRenamedUnderAnIngestEndsItClearly) {
    const auto l = long_ingest(dir_.path);
    for (const bool rename : {true, false}) {
        const std::string where = rename ? "folder renamed" : "folder removed";
        const std::string folder = dir_.file(rename ? "renamed-from" : "removed");
        std::filesystem::create_directory(folder);
        const std::string p = folder + "/p.spanscope";
        const auto ingest = start_ingest_until(l, p, out_, 3);
        if (!ingest.reached) { // renaming now would test an ingest that has made nothing yet
            kill(ingest.pid, SIGKILL);
            const auto r = finish_cli(ingest.pid, out_ + "/out", out_ + "/err");
            FAIL() << where << ": the ingest did not store 3 chunks within 60 s (exit " << r.status
                   << ")\n"
                   << r.err;
        }
        const pid_t pid = ingest.pid;
        // start_cli's descriptors are not inherited beyond 1 and 2 (its /dev/null is left out:
        // this process may have inherited one of its own to hand on).
        EXPECT_EQ(descriptors_to(pid, {out_ + "/out", out_ + "/err"}), std::vector<std::string>{})
            << where;
        const std::string moved = dir_.file("renamed-to");
        if (rename)
            std::filesystem::rename(folder, moved);
        else
            std::filesystem::remove_all(folder);
        const auto r = finish_cli(pid, out_ + "/out", out_ + "/err");
        const auto lines = message_lines(r.err);
        std::printf("[ %s ] exit %d: %s\n", where.c_str(), r.status,
                    lines.empty() ? "" : lines.back().c_str());
        EXPECT_EQ(r.status, 1) << where << "\n" << r.err;
        ASSERT_FALSE(lines.empty()) << where;
        EXPECT_NE(lines.back().find(p), std::string::npos) << where;
        EXPECT_NE(lines.back().find("moved or removed"), std::string::npos) << where;
        EXPECT_FALSE(std::filesystem::exists(folder)) << where << ": made anew";
        EXPECT_FALSE(std::filesystem::exists(p)) << where << ": made anew";
        if (rename) {
            // What was committed before the rename is in the moved project, sound.
            const std::string q = moved + "/p.spanscope";
            EXPECT_EQ(integrity_of(q), "ok");
            EXPECT_GE(dump_project(q).at("chunk_state_blobs").size(), 3u);
        }
    }
    // Nothing new beside the test's own files.
    for (const auto& f : files_under(dir_.path))
        EXPECT_TRUE(f == "slow.gguf" || f == "long.txt" || f == "tiny.gguf" || f == "doc.txt" ||
                    f == "other.txt" || f.rfind("out", 0) == 0 || f.rfind("renamed-to", 0) == 0)
            << f;
}
