// The project database (storage/project.h): creation, what a damaged or foreign file gets (a
// clear error, the file untouched), documents, chunks, chats, the committed project of schema
// version 1 (tests/README.md, failure mode 15) and its upgrade (its units indexed), and the
// committed projects of later versions. The full-text index of units (FTS5) and its search:
// test_project_search.cpp. Chunk states, their eviction and the project's locks:
// test_project_states.cpp.
#include "project_test_support.h"
#include "storage/project_schema.h"

#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// Expect open() to refuse `path` with `phrase` in the message and leave it unchanged; Spanscope's
// own checks refuse it, before SQLite reads it (sqlite_code() 0).
void expect_refused(const std::string& path, const std::string& phrase) {
    const auto before = read_all(path);
    try {
        Project::open(path, /*create=*/true);
        ADD_FAILURE() << path << " was opened";
    } catch (const ProjectError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(phrase), std::string::npos) << m;
        EXPECT_NE(m.find(path), std::string::npos) << "names the file: " << m;
        EXPECT_NE(m.find("not changed"), std::string::npos) << m;
        EXPECT_EQ(e.sqlite_code(), 0) << m;
    }
    EXPECT_EQ(read_all(path), before) << "the file was modified";
    EXPECT_FALSE(fs::exists(path + "-wal")) << "a journal was created";
}

} // namespace

TEST_F(ProjectTest, NewProjectUsesWalForeignKeysAndTheCurrentSchema) {
    const auto path = dir_ + "/sub/dir/new.spanscope";
    auto p = Project::open(path, true);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    auto q = p->db().prepare("PRAGMA journal_mode");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.text(0), "wal");
    auto f = p->db().prepare("PRAGMA foreign_keys");
    ASSERT_TRUE(f.step());
    EXPECT_EQ(f.int64(0), 1);
    EXPECT_EQ(p->cache_limit_bytes(), kDefaultCacheLimitBytes);
    EXPECT_THROW(Project::open(dir_ + "/missing.spanscope", false), ProjectError);
}

TEST_F(ProjectTest, ZeroByteFileIsRefusedUntouched) {
    const auto path = dir_ + "/empty.spanscope";
    std::ofstream(path).close();
    expect_refused(path, "empty (0 bytes)");
}

TEST_F(ProjectTest, TruncatedFileIsRefusedUntouched) {
    const auto path = dir_ + "/p.spanscope";
    {
        auto p = Project::open(path, true);
        for (int i = 0; i < 20; ++i)
            p->add_document("/doc" + std::to_string(i),
                            text_document(std::string(3000, 'a' + i % 26)));
        p->vacuum(); // everything in the main file
    }
    const auto full = read_all(path);
    for (const size_t keep : {full.size() / 2, size_t{4096} + 100, size_t{50}}) {
        const auto cut = dir_ + "/cut" + std::to_string(keep) + ".spanscope";
        std::ofstream(cut, std::ios::binary).write(full.data(), static_cast<std::streamsize>(keep));
        expect_refused(cut, keep == 50 ? "too short" : "truncated");
    }
}

TEST_F(ProjectTest, ForeignAndNewerFilesAreRefusedUntouched) {
    const auto text = dir_ + "/notes.spanscope";
    std::ofstream(text) << std::string(5000, 'x');
    expect_refused(text, "not an SQLite database");

    const auto other = dir_ + "/other.sqlite";
    {
        Db db(other, true);
        db.exec("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
    }
    expect_refused(other, "not a Spanscope project");

    const auto newer = dir_ + "/newer.spanscope";
    {
        auto p = Project::open(newer, true);
        p->db().exec("UPDATE schema_version SET version = 99");
        p->vacuum();
    }
    fs::remove(newer + "-wal");
    fs::remove(newer + "-shm");
    expect_refused(newer, "newer Spanscope");
}

TEST_F(ProjectTest, DocumentsChunksAndChats) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    Project::AddOutcome outcome{};
    const auto a = p->add_document("/x/a.txt", text_document("alpha text"), &outcome);
    EXPECT_EQ(outcome, Project::AddOutcome::Added);
    const auto b = p->add_document("/x/b.txt", text_document("beta text"));
    EXPECT_EQ(p->add_document("/elsewhere/a-copy.txt", text_document("alpha text"), &outcome), a);
    EXPECT_EQ(outcome, Project::AddOutcome::Unchanged) << "the same content is one document";
    const auto docs = p->documents();
    ASSERT_EQ(docs.size(), 2u);
    EXPECT_EQ(docs[0].id, a);
    EXPECT_EQ(docs[1].id, b);
    EXPECT_EQ(docs[0].name, "a.txt");
    EXPECT_EQ(p->document_text(b), "beta text");
    // Damaged text is refused (its content hash is its checksum), and ingesting the file again
    // replaces it.
    p->db().exec("UPDATE documents SET text = 'beta test' WHERE id = " + std::to_string(b));
    try {
        p->document_text(b);
        ADD_FAILURE() << "damaged text was returned";
    } catch (const ProjectError& e) {
        EXPECT_NE(std::string(e.what()).find("damaged"), std::string::npos) << e.what();
    }
    EXPECT_EQ(p->add_document("/x/b.txt", text_document("beta text"), &outcome), b);
    EXPECT_EQ(outcome, Project::AddOutcome::Updated);
    EXPECT_EQ(p->document_text(b), "beta text");
    EXPECT_EQ(p->document_offset_map(a).size(), 1u);

    p->insert_chunks(a, "key", {one_chunk_unit(0, 10, {2, 5, 6})});
    EXPECT_TRUE(p->has_chunks(a, "key"));
    EXPECT_FALSE(p->has_chunks(a, "other key"));
    std::vector<std::vector<int64_t>> ids;
    const auto units = p->load_units(a, "key", &ids);
    ASSERT_EQ(units.size(), 1u);
    EXPECT_EQ(units[0].chunks[0].tokens, (std::vector<int32_t>{2, 5, 6}));
    p->commit_chunk_state(ids[0][0], "fp", std::vector<uint8_t>(100, 1),
                          std::vector<uint8_t>(50, 2), 0);
    EXPECT_TRUE(p->state_blob(ids[0][0], "fp", StateKind::AttentionRows));
    EXPECT_FALSE(p->state_blob(ids[0][0], "another model", StateKind::AttentionRows));

    const auto chat = p->create_chat("a question");
    p->add_message(chat, "user", "What?");
    p->add_message(chat, "assistant", "That.", R"({"tokens_reused": 3})");
    EXPECT_THROW(p->add_message(chat, "system", "no such role"), DbError);

    // The same path with new content: the document is updated, its chunks and states dropped.
    const auto c = p->add_document("/x/c.txt", text_document("gamma, first version"));
    p->insert_chunks(c, "key", {one_chunk_unit(0, 5, {2, 9})});
    EXPECT_EQ(p->add_document("/x/c.txt", text_document("gamma, second version"), &outcome), c);
    EXPECT_EQ(outcome, Project::AddOutcome::Updated);
    EXPECT_EQ(p->document_text(c), "gamma, second version");
    EXPECT_FALSE(p->has_chunks(c, "key"));
    EXPECT_EQ(p->documents().size(), 3u);
    // A name that is not UTF-8 is shown with '?'.
    const auto bad = p->add_document("/x/caf\xe9.txt", text_document("delta"));
    EXPECT_EQ(p->document(bad)->name, "caf?.txt");

    EXPECT_TRUE(p->remove_document(a));
    EXPECT_FALSE(p->remove_document(a));
    EXPECT_FALSE(p->has_chunks(a, "key")) << "chunks go with their document";
    EXPECT_EQ(p->info().states, 0) << "states go with their chunks";
    ASSERT_EQ(p->messages(chat).size(), 2u) << "chats stay";
    EXPECT_EQ(p->messages(chat)[1].stats_json, R"({"tokens_reused": 3})");
}

TEST_F(ProjectTest, ChatsAreListedRenamedAndDeleted) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const auto a = p->create_chat("first");
    const auto b = p->create_chat("second");
    p->add_message(a, "user", "q");
    p->add_message(a, "assistant", "r", "{}");
    auto chats = p->chats();
    ASSERT_EQ(chats.size(), 2u);
    EXPECT_EQ(chats[0].id, a);
    EXPECT_EQ(chats[0].messages, 2);
    EXPECT_EQ(chats[1].title, "second");
    EXPECT_EQ(chats[1].messages, 0);
    EXPECT_TRUE(p->rename_chat(b, "renamed"));
    EXPECT_THROW(p->rename_chat(b, "  "), std::invalid_argument);
    EXPECT_FALSE(p->rename_chat(999, "x"));
    EXPECT_TRUE(p->delete_chat(a));
    EXPECT_FALSE(p->delete_chat(a));
    chats = p->chats();
    ASSERT_EQ(chats.size(), 1u);
    EXPECT_EQ(chats[0].title, "renamed");
    EXPECT_TRUE(p->messages(a).empty()) << "messages go with their chat";
    EXPECT_EQ(p->info().messages, 0);
}

namespace {

// The committed project of version `version`; SPANSCOPE_WRITE_GOLDEN rewrites the one of the
// current version (an older one can no longer be written by this build).
std::string project_fixture(int version) {
    const auto fixture =
        data_dir() + "/fixtures/project_v" + std::to_string(version) + ".spanscope";
    if (std::getenv("SPANSCOPE_WRITE_GOLDEN") && version == kSchemaVersion) {
        fs::remove(fixture);
        auto p = Project::open(fixture, true);
        const auto id = p->add_document("/usr/share/common-licenses/MIT",
                                        text_document("Permission is hereby granted"));
        p->insert_chunks(id, "key", {one_chunk_unit(0, 28, {2, 40, 41, 42})});
        if (version >= 3) { // a scan: pages read by OCR (migration 3)
            auto scan = text_document("Scanned page two.\n\nScanned page three.");
            scan.format = spanscope::DocumentFormat::Pdf;
            scan.ocr_pages = {2, 3};
            p->add_document("/tmp/scan.pdf", scan);
        }
        const auto chat = p->create_chat("Who grants permission?");
        p->add_message(chat, "user", "Who grants permission?");
        if (version >= 4) // the answer's sources (migration 4)
            p->add_message(chat, "assistant", "The copyright holder.", "{}", {},
                           {{id, 0, 10, 0, 1, 0.75, "Permission"}},
                           {{}, {{id, 11, 13, 0, 1, 0.5, "is"}}});
        else
            p->add_message(chat, "assistant", "The copyright holder.", "{}");
        p->vacuum();
        p.reset();
        fs::remove(fixture + "-wal");
        fs::remove(fixture + "-shm");
    }
    return fixture;
}

} // namespace

TEST_F(ProjectTest, CommittedVersion1ProjectStillOpens) {
    // Work on a copy: opening upgrades a project in place.
    const auto copy = dir_ + "/v1.spanscope";
    fs::copy_file(project_fixture(1), copy);
    auto p = Project::open(copy, false);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    const auto docs = p->documents();
    ASSERT_EQ(docs.size(), 1u);
    EXPECT_EQ(p->document_text(docs[0].id), "Permission is hereby granted");
    const auto units = p->load_units(docs[0].id, "key");
    ASSERT_EQ(units.size(), 1u);
    EXPECT_EQ(units[0].chunks[0].tokens, (std::vector<int32_t>{2, 40, 41, 42}));
    ASSERT_EQ(p->messages(1).size(), 2u);
    EXPECT_EQ(p->messages(1)[1].text, "The copyright holder.");
}

// Schema version 1 (no index) opens as the current version with every stored unit indexed.
TEST_F(ProjectTest, Version1ProjectGetsItsUnitsIndexed) {
    const auto copy = dir_ + "/v1.spanscope";
    fs::copy_file(project_fixture(1), copy);
    {
        Db db(copy, /*create=*/false);
        auto q = db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'unit_text'");
        q.step();
        ASSERT_EQ(q.int64(0), 0) << "the fixture is of version 1, without the index";
    }
    auto p = Project::open(copy, false);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    EXPECT_EQ(index_rows(*p), 1);
    const auto id = p->documents().at(0).id;
    const auto m = p->search_units({id}, "key", "Who grants permission?");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].document_id, id);
    EXPECT_EQ(m[0].unit, 0);
    EXPECT_TRUE(p->remove_document(id));
    EXPECT_EQ(index_rows(*p), 0);
}

TEST_F(ProjectTest, AFailedMigrationLeavesTheVersion1ProjectAsItWas) {
    // A table of the index's name already there: migration 2 fails inside its transaction, the
    // project is refused with a message, and stays a complete version-1 project.
    const auto copy = dir_ + "/v1-blocked.spanscope";
    fs::copy_file(project_fixture(1), copy);
    {
        Db db(copy, /*create=*/false);
        db.exec("CREATE TABLE unit_text(x)");
    }
    try {
        Project::open(copy, false);
        ADD_FAILURE() << "the blocked migration was taken for done";
    } catch (const ProjectError& e) {
        // SQLite refused the migration's statement: its code travels with the message.
        EXPECT_EQ(e.sqlite_code(), SQLITE_ERROR) << e.what();
        EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    }
    Db db(copy, /*create=*/false);
    auto v = db.prepare("SELECT version FROM schema_version");
    ASSERT_TRUE(v.step());
    EXPECT_EQ(v.int64(0), 1);
    auto t = db.prepare("SELECT count(*) FROM sqlite_master WHERE name = "
                        "'chunks_delete_unit_text'");
    t.step();
    EXPECT_EQ(t.int64(0), 0) << "half of the migration was left behind";
    auto d = db.prepare("SELECT count(*) FROM documents");
    d.step();
    EXPECT_EQ(d.int64(0), 1);
}

// The committed project of schema version 2 (with its index) opens and searches; the next
// migration must keep it so.
TEST_F(ProjectTest, CommittedVersion2ProjectStillOpens) {
    const auto copy = dir_ + "/v2.spanscope";
    fs::copy_file(project_fixture(2), copy);
    auto p = Project::open(copy, false);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    const auto docs = p->documents();
    ASSERT_EQ(docs.size(), 1u);
    EXPECT_EQ(p->document_text(docs[0].id), "Permission is hereby granted");
    const auto m = p->search_units({docs[0].id}, "key", "permission");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].unit, 0);
    ASSERT_EQ(p->messages(1).size(), 2u);
    EXPECT_EQ(p->messages(1)[1].text, "The copyright holder.");
    EXPECT_TRUE(docs[0].ocr_pages.empty()); // migration 3: no page was read by OCR
}

// The committed project of schema version 3 (pages read by OCR recorded) opens.
TEST_F(ProjectTest, CommittedVersion3ProjectStillOpens) {
    const auto copy = dir_ + "/v3.spanscope";
    fs::copy_file(project_fixture(3), copy);
    auto p = Project::open(copy, false);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    const auto docs = p->documents();
    ASSERT_EQ(docs.size(), 2u);
    EXPECT_EQ(p->document_text(docs[0].id), "Permission is hereby granted");
    EXPECT_TRUE(docs[0].ocr_pages.empty());
    EXPECT_EQ(docs[1].ocr_pages, (std::vector<int32_t>{2, 3}));
    ASSERT_EQ(p->messages(1).size(), 2u);
}

// The committed project of schema version 4 (an answer's sources) opens with its sources; an
// older project's answers have none (migration 4).
TEST_F(ProjectTest, CommittedVersion4ProjectStillOpensWithItsSources) {
    const auto copy = dir_ + "/v4.spanscope";
    fs::copy_file(project_fixture(4), copy);
    auto p = Project::open(copy, false);
    EXPECT_EQ(p->schema_version(), kSchemaVersion);
    const auto m = p->messages(1);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_TRUE(m[0].sources.empty());
    ASSERT_EQ(m[1].sources.size(), 1u);
    EXPECT_EQ(m[1].sources[0].excerpt, "Permission");
    EXPECT_EQ(m[1].sources[0].end_char, 10);
    EXPECT_DOUBLE_EQ(m[1].sources[0].share, 0.75);
    ASSERT_EQ(m[1].token_sources.size(), 2u); // token 0 has none, token 1 one
    EXPECT_TRUE(m[1].token_sources[0].empty());
    ASSERT_EQ(m[1].token_sources[1].size(), 1u);
    EXPECT_EQ(m[1].token_sources[1][0].excerpt, "is");
    EXPECT_EQ(m[1].token_sources[1][0].start_char, 11);
    const auto old = dir_ + "/v3.spanscope";
    fs::copy_file(project_fixture(3), old);
    auto p3 = Project::open(old, false);
    for (const auto& msg : p3->messages(1))
        EXPECT_TRUE(msg.sources.empty());
}

// An answer's sources are saved with it in order, read back with the chat's messages (each
// with its own), refused whole when one is out of range, and deleted with the chat.
TEST_F(ProjectTest, AnAnswersSourcesAreSavedWithItsMessage) {
    auto p = Project::open(dir_ + "/sources.spanscope", true);
    const auto doc = p->add_document("/a.txt", text_document("Alpha beta. Gamma delta."));
    const auto chat = p->create_chat("q");
    p->add_message(chat, "user", "q");
    const std::vector<SourceRecord> first{{doc, 12, 24, 0, 1, 0.6, "Gamma delta."},
                                          {doc, 0, 11, 3, 1, 0.25, "Alpha beta."}};
    const std::vector<std::vector<SourceRecord>> tokens{
        {{doc, 0, 5, 0, 1, 0.9, "Alpha"}},
        {},
        {{doc, 12, 17, 0, 1, 0.7, "Gamma"}, {doc, 18, 23, 0, 1, 0.2, "delta"}}};
    const auto a1 = p->add_message(chat, "assistant", "one", "{}", {}, first, tokens);
    p->add_message(chat, "user", "q2");
    const auto a2 =
        p->add_message(chat, "assistant", "two", "{}", {}, {{doc, 0, 5, 0, 1, 1.0, "Alpha"}});
    const auto m = p->messages(chat);
    ASSERT_EQ(m.size(), 4u);
    EXPECT_EQ(m[1].id, a1);
    ASSERT_EQ(m[1].sources.size(), 2u);
    EXPECT_EQ(m[1].sources[0].excerpt, "Gamma delta.");
    EXPECT_EQ(m[1].sources[1].page, 3);
    EXPECT_EQ(m[1].sources[1].start_char, 0);
    ASSERT_EQ(m[1].token_sources.size(), 3u);
    ASSERT_EQ(m[1].token_sources[0].size(), 1u);
    EXPECT_EQ(m[1].token_sources[0][0].excerpt, "Alpha");
    EXPECT_TRUE(m[1].token_sources[1].empty());
    ASSERT_EQ(m[1].token_sources[2].size(), 2u);
    EXPECT_EQ(m[1].token_sources[2][1].excerpt, "delta");
    EXPECT_DOUBLE_EQ(m[1].token_sources[2][0].share, 0.7);
    EXPECT_EQ(m[3].id, a2);
    EXPECT_TRUE(m[3].token_sources.empty());
    ASSERT_EQ(m[3].sources.size(), 1u);
    EXPECT_TRUE(m[2].sources.empty());
    const auto before = p->messages(chat).size();
    EXPECT_THROW(p->add_message(chat, "assistant", "bad", "{}", {}, {{doc, 5, 5, 0, 1, 0.5, ""}}),
                 std::invalid_argument);
    EXPECT_THROW(p->add_message(chat, "assistant", "bad", "{}", {}, {{doc, 0, 5, 0, 1, 1.5, ""}}),
                 std::invalid_argument);
    EXPECT_THROW(p->add_message(chat, "assistant", "bad", "{}", {}, first,
                                {{}, {{doc, -1, 5, 0, 1, 0.5, ""}}}),
                 std::invalid_argument);
    EXPECT_EQ(p->messages(chat).size(), before) << "a refused answer wrote nothing";
    // A row changed by hand to one the write path refuses is not shown; the others are.
    p->db().exec("UPDATE answer_sources SET share = 2.5 WHERE message_id = " + std::to_string(a2));
    p->db().exec("UPDATE answer_sources SET start_char = 20 WHERE message_id = " +
                 std::to_string(a1) + " AND token = -1 AND ordinal = 1");
    const auto damaged = p->messages(chat);
    EXPECT_TRUE(damaged[3].sources.empty());
    ASSERT_EQ(damaged[1].sources.size(), 1u);
    EXPECT_EQ(damaged[1].sources[0].excerpt, "Gamma delta.");
    ASSERT_TRUE(p->delete_chat(chat));
    auto q = p->db().prepare("SELECT count(*) FROM answer_sources");
    ASSERT_TRUE(q.step());
    EXPECT_EQ(q.int64(0), 0);
}

// The pages a PDF had read by OCR are kept with the document, replaced with its text.
TEST_F(ProjectTest, PagesReadByOcrAreKept) {
    auto p = Project::open(dir_ + "/ocr.spanscope", true);
    auto doc = text_document("page one text\n\npage two text");
    doc.format = spanscope::DocumentFormat::Pdf;
    doc.ocr_pages = {2, 3};
    const auto id = p->add_document("/tmp/scan.pdf", doc);
    ASSERT_TRUE(p->document(id).has_value());
    EXPECT_EQ(p->document(id)->ocr_pages, (std::vector<int32_t>{2, 3}));
    EXPECT_EQ(p->documents().at(0).ocr_pages, (std::vector<int32_t>{2, 3}));
    doc.text += " changed";
    doc.ocr_pages = {7};
    EXPECT_EQ(p->add_document("/tmp/scan.pdf", doc), id); // the same path: its text replaced
    EXPECT_EQ(p->document(id)->ocr_pages, std::vector<int32_t>{7});
}
