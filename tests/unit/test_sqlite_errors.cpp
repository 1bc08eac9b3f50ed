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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
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

/// A line read from `fd`, without its newline; false where the stream ended (or failed) first.
bool read_line(int fd, std::string* line) {
    line->clear();
    for (;;) {
        char c = 0;
        const ssize_t n = ::read(fd, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            return false;
        if (c == '\n')
            return true;
        *line += c;
    }
}

/// Send `s` and a newline on the socket `fd`: 0, or the errno of the failed send. MSG_NOSIGNAL:
/// an end whose peer has closed gets EPIPE, not SIGPIPE.
int send_line(int fd, const std::string& s) {
    const std::string line = s + '\n';
    size_t done = 0;
    while (done < line.size()) {
        const ssize_t n = ::send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EPIPE;
        done += static_cast<size_t>(n);
    }
    return 0;
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

/// A child, as uid 65534, opens `p` and replies with its documents, or with "error: ..." and
/// ends where it refuses to open it; when asked, it replies with them again. Its replies and
/// the question go over one socket.
struct Reader {
    pid_t pid = -1;
    int sock = -1;  ///< this process's end
    int failed = 0; ///< errno where the child could not be started

    explicit Reader(const std::string& p) {
        int s[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) != 0) {
            failed = errno;
            return;
        }
        pid = ::fork();
        if (pid < 0) {
            failed = errno;
            ::close(s[0]);
            ::close(s[1]);
            return;
        }
        if (pid == 0) {
            ::close(s[0]);
            const int fd = s[1];
            if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
                _exit(125);
            std::unique_ptr<Project> project;
            try {
                project = Project::open(p, /*create=*/false);
            } catch (const std::exception& e) {
                _exit(send_line(fd, std::string("error: ") + e.what()) == 0 ? 0 : 3);
            }
            if (send_line(fd, listing(*project)) != 0)
                _exit(3);
            std::string go;
            if (!read_line(fd, &go))
                _exit(4); // the test ended without asking again
            if (send_line(fd, listing(*project)) != 0)
                _exit(3);
            project.reset();
            _exit(0);
        }
        ::close(s[1]);
        sock = s[0];
    }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;
    ~Reader() { // a test that stopped early leaves no child behind
        try {
            if (pid > 0)
                finish();
        } catch (const std::exception&) {
        }
    }

    /// The reply at opening; none (a test failure) where the child ended without one.
    std::optional<std::string> first() const {
        std::string line;
        if (!read_line(sock, &line)) {
            ADD_FAILURE() << "the reader ended without replying at opening";
            return std::nullopt;
        }
        return line;
    }
    /// Ask for the list again: the reply; none (a test failure, saying why) where the child
    /// could not be asked or ended without replying.
    std::optional<std::string> again() const {
        if (const int e = send_line(sock, "go"); e != 0) {
            ADD_FAILURE() << "cannot ask the reader to read again: " << std::strerror(e);
            return std::nullopt;
        }
        std::string line;
        if (!read_line(sock, &line)) {
            ADD_FAILURE() << "the reader ended without replying to the second read";
            return std::nullopt;
        }
        return line;
    }
    /// Close this end and reap the child: its wait status.
    int finish() {
        ::close(sock);
        sock = -1;
        const pid_t p = pid;
        pid = -1;
        return wait_status(p);
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
        ASSERT_GT(reader.pid, 0) << std::strerror(reader.failed);
        const auto before = reader.first();
        // A refusal is allowed where it names the file; the reader has then ended.
        const bool refused = before && before->rfind("error: ", 0) == 0;
        if (before) {
            std::printf("[ %s ] the reader at opening: %s\n", where.c_str(), before->c_str());
            if (refused)
                EXPECT_NE(before->find(p), std::string::npos) << where << ": " << *before;
            else
                EXPECT_EQ(*before, "/docs/first.txt;") << where;
        }
        if (!owner)
            owner = Project::open(p, /*create=*/false);
        owner->add_document("/docs/second.txt", text_document("The second document."));
        const std::string expected = listing(*owner);
        ASSERT_EQ(expected, "/docs/first.txt;/docs/second.txt;");
        if (before && !refused) {
            const auto after = reader.again();
            if (after) {
                std::printf("[ %s ] the reader's next read: %s\n", where.c_str(), after->c_str());
                if (after->rfind("error: ", 0) == 0) {
                    EXPECT_NE(after->find(p), std::string::npos) << where << ": " << *after;
                    EXPECT_NE(after->find("changed"), std::string::npos)
                        << where << ": say that another program changed it: " << *after;
                } else {
                    EXPECT_EQ(*after, expected) << where << ": the reader shows an old list";
                }
            }
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
    // Nothing lost: the table is there and empty; and with the limit gone, the same connection
    // writes the same row.
    {
        auto count = db.prepare("SELECT count(*) FROM t");
        ASSERT_TRUE(count.step());
        EXPECT_EQ(count.int64(0), 0);
    }
    try {
        db.prepare("INSERT INTO t VALUES (zeroblob(1000000))").run();
    } catch (const DbError& e) {
        ADD_FAILURE() << "the write after the limit was lifted failed: " << e.what();
    }
    auto rows = db.prepare("SELECT count(*), sum(length(x)) FROM t");
    ASSERT_TRUE(rows.step());
    EXPECT_EQ(rows.int64(0), 1);
    EXPECT_EQ(rows.int64(1), 1000000);
    auto check = db.prepare("PRAGMA integrity_check");
    ASSERT_TRUE(check.step());
    EXPECT_EQ(check.text(0), "ok");
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
