// The store's errors and read-only opens, in process: a project this process cannot write is
// read while its owner adds a document (the reader's next read shows it, or says clearly that
// the project changed: never the old list in silence), a write stopped by the process's file
// size limit says so (not a full disk), and a conflict inside one connection does not blame
// another program.
#include "project_faults.h"
#include "storage/project.h"
#include "storage/sqlite_db.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

using namespace spanscope;
using namespace spanscope::test;

namespace {

std::set<std::string> names_in(const std::string& dir) {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        out.insert(e.path().filename().string());
    return out;
}

std::string read_line(int fd) {
    std::string s;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n')
        s += c;
    return s;
}

void write_line(int fd, const std::string& s) {
    const std::string line = s + '\n';
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        _exit(3);
}

/// The documents `project` lists, or "error: ..." where reading it failed.
std::string listing(Project& project) {
    try {
        std::string out;
        for (const auto& d : project.documents())
            out += d.path + ';';
        return out;
    } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
    }
}

/// A child, as uid 65534, opens `p` and lists its documents; when told, lists them again.
struct Reader {
    pid_t pid = -1;
    int to = -1, from = -1;

    explicit Reader(const std::string& p) {
        int down[2], up[2];
        if (::pipe(down) != 0 || ::pipe(up) != 0)
            return;
        pid = ::fork();
        if (pid == 0) {
            ::close(down[1]);
            ::close(up[0]);
            if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
                _exit(125);
            std::unique_ptr<Project> project;
            try {
                project = Project::open(p, /*create=*/false);
            } catch (const std::exception& e) {
                write_line(up[1], std::string("error: ") + e.what());
                _exit(0);
            }
            write_line(up[1], listing(*project));
            read_line(down[0]);
            write_line(up[1], listing(*project));
            project.reset();
            _exit(0);
        }
        ::close(down[0]);
        ::close(up[1]);
        to = down[1];
        from = up[0];
    }
    std::string first() const { return read_line(from); }
    std::string again() const {
        write_line(to, "go");
        return read_line(from);
    }
    int finish() {
        ::close(to);
        ::close(from);
        int status = 0;
        ::waitpid(pid, &status, 0);
        return status;
    }
};

} // namespace

TEST(SqliteErrors, AReaderThatCannotWriteTheProjectSeesItsOwnersNewDocument) {
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root, to read the project as another user (uid 65534)";
    for (const bool owner_open_first : {true, false}) {
        const std::string where =
            owner_open_first ? "the owner had it open" : "the owner opened it after the reader";
        TempDir dir;
        ::chmod(dir.path.c_str(), 0755); // the owner's folder: the reader cannot write in it
        const std::string p = dir.file("p.spanscope");
        {
            auto owner = Project::open(p, /*create=*/true);
            owner->add_document("/docs/first.txt", text_document("The first document."));
        }
        ::chmod(p.c_str(), 0644);
        const auto files = names_in(dir.path);

        std::unique_ptr<Project> owner;
        if (owner_open_first) {
            owner = Project::open(p, /*create=*/false);
            ASSERT_EQ(listing(*owner), "/docs/first.txt;");
        }
        Reader reader(p);
        ASSERT_GT(reader.pid, 0) << std::strerror(errno);
        const std::string before = reader.first();
        std::printf("[ %s ] the reader at opening: %s\n", where.c_str(), before.c_str());
        if (before.rfind("error: ", 0) == 0) {
            // A refusal is allowed where it names the file.
            EXPECT_NE(before.find(p), std::string::npos) << where << ": " << before;
        } else {
            EXPECT_EQ(before, "/docs/first.txt;") << where;
        }
        if (!owner)
            owner = Project::open(p, /*create=*/false);
        owner->add_document("/docs/second.txt", text_document("The second document."));
        const std::string expected = listing(*owner);
        ASSERT_EQ(expected, "/docs/first.txt;/docs/second.txt;");
        const std::string after = reader.again();
        std::printf("[ %s ] the reader's next read: %s\n", where.c_str(), after.c_str());
        if (after.rfind("error: ", 0) == 0) {
            EXPECT_NE(after.find(p), std::string::npos) << where << ": " << after;
            EXPECT_NE(after.find("changed"), std::string::npos)
                << where << ": say that another program changed it: " << after;
        } else {
            EXPECT_EQ(after, expected) << where << ": the reader shows an old list";
        }
        const int status = reader.finish();
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << where << ": " << status;
        owner.reset();
        // Nothing left beside the project that its owner did not have.
        EXPECT_EQ(names_in(dir.path), files) << where;
        auto check = Project::open(p, /*create=*/false);
        EXPECT_EQ(listing(*check), expected) << where;
    }
}

TEST(SqliteErrors, AFileSizeLimitIsNamedAsSuchNotAsAFullDisk) {
    TempDir dir;
    const std::string p = dir.file("p.spanscope");
    Db db(p, /*create=*/true);
    db.exec("PRAGMA journal_mode=WAL; CREATE TABLE t(x BLOB)");
    const int64_t limit = std::max(file_bytes(p), file_bytes(p + "-wal")) + 8192;
    int code = 0, sys = 0;
    std::string what;
    {
        FileSizeLimit l(limit);
        try {
            auto st = db.prepare("INSERT INTO t VALUES (zeroblob(1000000))");
            st.run();
        } catch (const DbError& e) {
            code = e.code();
            sys = e.system_errno();
            what = e.what();
        }
    }
    std::printf("at a file size limit of %lld bytes: %s\n", static_cast<long long>(limit),
                what.c_str());
    EXPECT_EQ(code, SQLITE_FULL) << what;
    EXPECT_EQ(sys, EFBIG) << what;
    EXPECT_NE(what.find("file size limit (ulimit -f)"), std::string::npos) << what;
    EXPECT_EQ(what.find("disk is full"), std::string::npos) << what;
    EXPECT_NE(what.find(p), std::string::npos) << what;
    // Nothing lost: the table is there and empty, and writes work again.
    auto count = db.prepare("SELECT count(*) FROM t");
    ASSERT_TRUE(count.step());
    EXPECT_EQ(count.int64(0), 0);
}

TEST(SqliteErrors, AConflictInsideOneConnectionBlamesNoOtherProgram) {
    TempDir dir;
    Db db(dir.file("p.spanscope"), /*create=*/true);
    db.exec("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)");
    auto reading = db.prepare("SELECT x FROM t");
    ASSERT_TRUE(reading.step());
    int code = 0;
    std::string what;
    try {
        db.exec("DROP TABLE t"); // the table is in use by the statement above
    } catch (const DbError& e) {
        code = e.code();
        what = e.what();
    }
    std::printf("%s\n", what.c_str());
    EXPECT_EQ(code & 0xff, SQLITE_LOCKED) << what;
    EXPECT_EQ(what.find("another program"), std::string::npos) << what;
    EXPECT_NE(what.find("this program"), std::string::npos) << what;
}
