// The project database (storage/project.h): creation, what a damaged or foreign file gets (a
// clear error, the file untouched), documents, chunks, chats, the committed project of schema
// version 1 (tests/README.md, failure mode 15) and its upgrade, and the full-text index of units
// (FTS5). Chunk states, their eviction and the project's locks: test_project_states.cpp.
#include "project_test_support.h"
#include "storage/project_schema.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// Expect open() to refuse `path` with `phrase` in the message and leave it unchanged.
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

namespace {

// A unit of one chunk covering the bytes [begin, end) of a document's text.
DocumentUnit text_unit(int index, int64_t begin, int64_t end) {
    auto u = one_chunk_unit(index, end, {2, 7});
    u.chunks[0].char_begin = begin;
    u.char_begin = begin;
    return u;
}

int64_t index_rows(Project& p) {
    auto q = p.db().prepare("SELECT count(*) FROM unit_text");
    q.step();
    return q.int64(0);
}

} // namespace

// The full-text index of units (schema version 2): a question's words find the sections that
// contain them, only among the documents and chunking asked for; FTS5 syntax in a question is
// searched as text; the rows go with their chunks.
TEST_F(ProjectTest, UnitSearchFindsTheSectionsThatHoldTheQuestionsWords) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::string ta = "The harbour master rings a brass bell.\n\n"
                           "Lighthouse keepers trim the wicks at dusk.\n\n"
                           "Gulls circle over the fish market.";
    const std::string tb = "An orchard of pears grows on the hill.\n\n"
                           "The lighthouse lighthouse beam sweeps the bay.";
    const auto a = p->add_document("/a.txt", text_document(ta));
    const auto b = p->add_document("/b.txt", text_document(tb));
    const auto pa1 = static_cast<int64_t>(ta.find("Lighthouse"));
    const auto pa2 = static_cast<int64_t>(ta.find("Gulls"));
    const auto pb1 = static_cast<int64_t>(tb.find("The lighthouse"));
    ASSERT_TRUE(p->insert_chunks(
        a, "key",
        {text_unit(0, 0, pa1), text_unit(1, pa1, pa2), text_unit(2, pa2, std::ssize(ta))}));
    ASSERT_TRUE(
        p->insert_chunks(b, "key", {text_unit(0, 0, pb1), text_unit(1, pb1, std::ssize(tb))}));
    EXPECT_EQ(index_rows(*p), 5);

    // The sections holding a word, any case, the one with it twice first (same length).
    auto m = p->search_units({a, b}, "key", "LIGHTHOUSE locksmith?");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].document_id, b);
    EXPECT_EQ(m[0].unit, 1);
    EXPECT_EQ(m[1].document_id, a);
    EXPECT_EQ(m[1].unit, 1);
    EXPECT_LT(m[0].bm25, m[1].bm25) << "lower bm25() is more relevant";
    EXPECT_LT(m[1].bm25, 0);
    // Stemmed (porter): "keeper" finds "keepers".
    m = p->search_units({a, b}, "key", "keeper");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].document_id, a);
    EXPECT_EQ(m[0].unit, 1);
    // Words of two sections, and only in the documents asked about.
    m = p->search_units({a}, "key", "bell or gulls?");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].document_id, a);
    EXPECT_EQ(m[1].document_id, a);
    EXPECT_NE(m[0].unit, m[1].unit);
    EXPECT_TRUE(p->search_units({b}, "key", "bell or gulls?").empty());
    EXPECT_TRUE(p->search_units({a, b}, "other key", "lighthouse").empty());
    EXPECT_TRUE(p->search_units({a, b}, "key", "submarine").empty());

    // FTS5 syntax is text: operators, column filters, prefixes, carets, quotes, brackets.
    for (const std::string q :
         {"pears AND NOT hill", "NEAR(pears hill, 2)", "text: pears*", "^pears \"hill",
          "'pears' -- ; DROP TABLE unit_text; (", "\"\"\"", "pears\"hill", "?!", "", "   ",
          "the of and", "caf\xc3\xa9 \xe2\x80\x94 \xe2\x80\xa6 pears"}) {
        std::vector<UnitMatch> r;
        EXPECT_NO_THROW(r = p->search_units({a, b}, "key", q)) << q;
        for (const auto& x : r)
            EXPECT_NE(x.document_id, 0) << q;
        if (q.find("pears") != std::string::npos) {
            ASSERT_FALSE(r.empty()) << q;
            EXPECT_EQ(r[0].document_id, b) << q;
            EXPECT_EQ(r[0].unit, 0) << q;
        }
    }
    EXPECT_EQ(fts_match_expression("which NEAR(x*)?"), "\"NEAR\" OR \"x\"");
    // English function words (NLTK's stop words) are not searched; a question of them only
    // searches nothing.
    EXPECT_EQ(fts_match_expression("What does the licence say about it?"),
              "\"licence\" OR \"say\"");
    EXPECT_EQ(fts_match_expression("What is it?"), "");
    EXPECT_EQ(fts_match_expression("Bell bell BELL"), "\"Bell\"");
    EXPECT_EQ(fts_match_expression(" ?! \"* "), "");
    // Unicode punctuation and spaces separate words; letters beyond ASCII stay in them.
    EXPECT_EQ(fts_match_expression("cats\u2014dogs \u201cfa\u00e7ade\u201d\u00a0caf\u00e9"),
              "\"cats\" OR \"dogs\" OR \"fa\u00e7ade\" OR \"caf\u00e9\"");
    EXPECT_EQ(fts_match_expression("\xff\xfeword\xc3"), "\"word\"");
    EXPECT_TRUE(p->search_units({a, b}, "key", "(\"*^:)").empty());
    EXPECT_EQ(index_rows(*p), 5) << "searching changes nothing";

    // Rows go with their chunks: dropped chunks, an updated document, a removed document.
    p->delete_chunks(b, "key");
    EXPECT_EQ(index_rows(*p), 3);
    EXPECT_TRUE(p->search_units({a, b}, "key", "pears").empty());
    ASSERT_TRUE(p->insert_chunks(b, "key", {text_unit(0, 0, std::ssize(tb))}));
    EXPECT_EQ(index_rows(*p), 4);
    EXPECT_EQ(p->add_document("/b.txt", text_document("Copper kettles.")), b);
    EXPECT_EQ(index_rows(*p), 3) << "an updated document's chunks and rows are dropped";
    EXPECT_TRUE(p->remove_document(a));
    EXPECT_EQ(index_rows(*p), 0);
    EXPECT_TRUE(p->search_units({a, b}, "key", "lighthouse bell pears").empty());
}

// The section ranking is Okapi BM25 over one chunking's units, with Lucene's idf. Reference:
// SQLite's own FTS5 bm25() on the same rows while they are the whole index, one word at a time:
// a word's bm25() is FTS5's idf times its length-normalised term part, so the part is bm25()
// over FTS5's idf (ln((N - n + 0.5) / (n + 0.5)), 1e-6 where not positive), and the reference
// sums it times Lucene's idf (ln(1 + (N - n + 0.5) / (n + 0.5))), n counted by MATCH. A second
// chunking of the same documents (another model read them) leaves the first chunking's scores
// as they were, where bm25()'s table-wide statistics see every word twice.
TEST_F(ProjectTest, UnitRankingCountsOneChunkingsUnitsOnly) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const std::string ta = "The licence grants rights to copy and modify the program.\n\n"
                           "Conveying modified versions needs prominent notices.";
    const std::string tb = "Trademarks: this licence does not grant permission to use the "
                           "trade names or trademarks of the licensor. Trademarks stay theirs.";
    const std::string tc = "Warranty: the work is provided as is, without warranty of any kind.";
    const auto a = p->add_document("/a.txt", text_document(ta));
    const auto b = p->add_document("/b.txt", text_document(tb));
    const auto c = p->add_document("/c.txt", text_document(tc));
    const auto pa = static_cast<int64_t>(ta.find("Conveying"));
    ASSERT_TRUE(
        p->insert_chunks(a, "one", {text_unit(0, 0, pa), text_unit(1, pa, std::ssize(ta))}));
    ASSERT_TRUE(p->insert_chunks(b, "one", {text_unit(0, 0, std::ssize(tb))}));
    ASSERT_TRUE(p->insert_chunks(c, "one", {text_unit(0, 0, std::ssize(tc))}));
    // "licence" is in 2 of the 4 units: FTS5's idf gives it no weight, Lucene's some.
    const std::string question = "What does the licence say about trademarks?";
    auto fts5_bm25 = [&](const std::string& words) {
        std::map<std::pair<int64_t, int>, double> out;
        auto q = p->db().prepare(
            "SELECT c.document_id, c.unit, bm25(unit_text) FROM unit_text JOIN chunks AS c ON "
            "c.id = unit_text.rowid WHERE unit_text MATCH ? AND c.chunking = 'one'");
        q.bind(1, fts_match_expression(words));
        while (q.step())
            out[{q.int64(0), static_cast<int>(q.int64(1))}] = q.real(2);
        return out;
    };
    const double units = 4; // a's two, b's, c's
    std::map<std::pair<int64_t, int>, double> reference;
    // The question's words less its function words ("What does the … about"), by hand.
    for (const char* w : {"licence", "say", "trademarks"}) {
        const auto per_unit = fts5_bm25(w);
        const double n = static_cast<double>(per_unit.size());
        double fts5_idf = std::log((units - n + 0.5) / (n + 0.5));
        if (fts5_idf <= 0)
            fts5_idf = 1e-6;
        const double idf = std::log(1.0 + (units - n + 0.5) / (n + 0.5));
        // score = -fts5_idf × part, both negated: the reference is -idf × part.
        for (const auto& [unit, score] : per_unit)
            reference[unit] += idf * score / fts5_idf;
    }
    const auto before = p->search_units({a, b, c}, "one", question);
    ASSERT_EQ(before.size(), reference.size());
    for (const auto& m : before)
        EXPECT_NEAR(m.bm25, reference.at({m.document_id, m.unit}), 1e-9)
            << m.document_id << ":" << m.unit;
    ASSERT_FALSE(before.empty());
    EXPECT_EQ(before[0].document_id, b) << "the section about trademarks first";
    // The word in half the units counts: the unit that has only it scores, unlike bm25()'s.
    ASSERT_EQ(fts5_bm25("licence").size(), 2u);
    const auto a0 = std::find_if(before.begin(), before.end(), [&](const UnitMatch& m) {
        return m.document_id == a && m.unit == 0;
    });
    ASSERT_NE(a0, before.end());
    EXPECT_GT(std::abs(a0->bm25), 1e3 * std::abs(fts5_bm25(question).at({a, 0})));

    // Another model's chunking of the same documents: the index holds each text twice.
    ASSERT_TRUE(p->insert_chunks(a, "two", {text_unit(0, 0, std::ssize(ta))}));
    ASSERT_TRUE(p->insert_chunks(b, "two", {text_unit(0, 0, std::ssize(tb))}));
    ASSERT_TRUE(p->insert_chunks(c, "two", {text_unit(0, 0, std::ssize(tc))}));
    EXPECT_EQ(index_rows(*p), 7);
    const auto after = p->search_units({a, b, c}, "one", question);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
        EXPECT_EQ(after[i].document_id, before[i].document_id) << i;
        EXPECT_EQ(after[i].unit, before[i].unit) << i;
        EXPECT_EQ(after[i].bm25, before[i].bm25) << i;
    }
    // bm25() itself now counts both chunkings' rows (the fault the ranking avoids).
    EXPECT_NE(fts5_bm25(question).at({b, 0}), reference.at({b, 0}));
    const auto two = p->search_units({a, b, c}, "two", question);
    ASSERT_FALSE(two.empty());
    EXPECT_EQ(two[0].document_id, b);
}

// A unit outside the document's text is refused before anything is written: no chunk and no
// index row (the chunks and their index rows are one transaction).
TEST_F(ProjectTest, ChunksAndTheirIndexRowsAreWrittenTogetherOrNotAtAll) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const auto a = p->add_document("/a.txt", text_document("twelve bytes"));
    EXPECT_THROW(p->insert_chunks(a, "key", {text_unit(0, 0, 6), text_unit(1, 6, 40)}),
                 std::invalid_argument);
    EXPECT_FALSE(p->has_chunks(a, "key"));
    EXPECT_EQ(index_rows(*p), 0);
    ASSERT_TRUE(p->insert_chunks(a, "key", {text_unit(0, 0, 6), text_unit(1, 6, 12)}));
    const auto m = p->search_units({a}, "key", "bytes");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].unit, 1);
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
    EXPECT_THROW(Project::open(copy, false), ProjectError);
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

TEST_F(ProjectTest, SqliteHasFts5) {
    Db db(dir_ + "/x.db", /*create=*/true);
    EXPECT_TRUE(sqlite_has_fts5(db)) << "Debian 12's libsqlite3 is built with FTS5";
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
