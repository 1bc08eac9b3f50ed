// A project's chunk states (storage/project.h): least-recently-used eviction under the cache
// limit, each eviction with its event in one transaction, and the locks of a project opened twice
// in one process while another program opens and closes it.
#include "kill_support.h"
#include "project_test_support.h"

#include <sys/wait.h>

#include <filesystem>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

TEST_F(ProjectTest, OpeningAProjectTwiceInOneProcessKeepsItsLocks) {
    // The desktop application opens its project twice (engine and store worker). Closing any
    // descriptor of a file drops every POSIX lock the process holds on it, so the second open
    // must not read the file with a descriptor of its own: another program closing the project
    // would then take itself for its last user and delete the log and shared memory under us.
    const std::string path = dir_ + "/p.spanscope";
    auto first = Project::open(path, true);
    first->add_document("/a", text_document("first document"));
    auto second = Project::open(path, false);
    const std::string err = dir_ + "/stderr.txt";
    const int st = test::wait_status(
        test::spawn_program(SPANSCOPE_CLI, {"project", "info", "--project", path}, err));
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << test::read_file(err);
    EXPECT_TRUE(fs::exists(path + "-wal")) << "the log was deleted under two open connections";
    EXPECT_TRUE(fs::exists(path + "-shm")) << "the shared memory was deleted under two open "
                                              "connections";
    EXPECT_NO_THROW(first->add_document("/b", text_document("second document")));
    EXPECT_EQ(second->documents().size(), 2u);
}

namespace {
/// `n` documents of one one-chunk unit each, each chunk with a 1000-byte state of model "fp";
/// the chunk ids, in document order.
std::vector<int64_t> documents_with_a_state(Project& p, int n) {
    std::vector<int64_t> chunk_of_doc;
    for (int d = 0; d < n; ++d) {
        const auto id =
            p.add_document("/d" + std::to_string(d), text_document("doc " + std::to_string(d)));
        p.insert_chunks(id, "key", {one_chunk_unit(0, 5, {2, 7})});
        std::vector<std::vector<int64_t>> ids;
        p.load_units(id, "key", &ids);
        chunk_of_doc.push_back(ids[0][0]);
        p.commit_chunk_state(ids[0][0], "fp", std::vector<uint8_t>(1000, 1),
                             std::vector<uint8_t>(0), 0);
    }
    return chunk_of_doc;
}
} // namespace

TEST_F(ProjectTest, AnEvictionAndItsEventAreOneTransaction) {
    // When the event cannot be written (here a trigger refuses it, as a full disk would), the
    // unit's states stay: no unit is ever evicted without the event that says so.
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::vector<int64_t> chunk_of_doc = documents_with_a_state(*p, 2);
    p->set_cache_limit_bytes(1500);
    p->db().exec("CREATE TEMP TRIGGER refuse_events BEFORE INSERT ON main.events BEGIN "
                 "SELECT RAISE(ABORT, 'events refused'); END");
    EXPECT_THROW(p->evict_to_limit(), std::exception);
    for (const auto chunk : chunk_of_doc)
        EXPECT_TRUE(p->state_blob(chunk, "fp", StateKind::AttentionRows))
            << "chunk " << chunk << "'s state was deleted without its event";
    p->db().exec("DROP TRIGGER refuse_events");
    EXPECT_EQ(p->evict_to_limit(), 1000);
    int evicted_events = 0;
    for (const auto& [kind, message] : p->events())
        evicted_events += kind == "evicted";
    EXPECT_EQ(evicted_events, 1);
}

TEST_F(ProjectTest, EvictionTakesTheLeastRecentlyUsedUnitsFirst) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::vector<int64_t> chunk_of_doc = documents_with_a_state(*p, 3);
    // Use order: doc 1 oldest, then doc 0, then doc 2.
    p->db().exec("UPDATE chunk_states SET last_used = 100 WHERE chunk_id = " +
                 std::to_string(chunk_of_doc[1]));
    p->db().exec("UPDATE chunk_states SET last_used = 200 WHERE chunk_id = " +
                 std::to_string(chunk_of_doc[0]));
    p->db().exec("UPDATE chunk_states SET last_used = 300 WHERE chunk_id = " +
                 std::to_string(chunk_of_doc[2]));
    p->set_cache_limit_bytes(2500);
    EXPECT_EQ(p->evict_to_limit(), 1000);
    EXPECT_FALSE(p->state_blob(chunk_of_doc[1], "fp", StateKind::AttentionRows));
    EXPECT_TRUE(p->state_blob(chunk_of_doc[0], "fp", StateKind::AttentionRows));
    // A protected unit is kept even when it is the oldest.
    p->set_cache_limit_bytes(500);
    p->evict_to_limit({chunk_of_doc[0]});
    EXPECT_TRUE(p->state_blob(chunk_of_doc[0], "fp", StateKind::AttentionRows));
    EXPECT_FALSE(p->state_blob(chunk_of_doc[2], "fp", StateKind::AttentionRows));
    EXPECT_EQ(p->documents().size(), 3u) << "documents are never evicted";
    int evicted_events = 0;
    for (const auto& [kind, message] : p->events())
        evicted_events += kind == "evicted";
    EXPECT_EQ(evicted_events, 2);
    EXPECT_THROW(p->set_cache_limit_bytes(-1), std::invalid_argument);
}
