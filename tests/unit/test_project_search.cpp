// The full-text index of units (storage/project.h, FTS5): a question's words find the sections
// that hold them, ranked by Okapi BM25 over one chunking's units; the index rows are written and
// dropped with their chunks. The rest of the project database: test_project.cpp.
#include "project_test_support.h"
#include "storage/project_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

using namespace spanscope;
using namespace spanscope::test;

namespace {

// A unit of one chunk covering the bytes [begin, end) of a document's text.
DocumentUnit text_unit(int index, int64_t begin, int64_t end) {
    auto u = one_chunk_unit(index, end, {2, 7});
    u.chunks[0].char_begin = begin;
    u.char_begin = begin;
    return u;
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

TEST_F(ProjectTest, SqliteHasFts5) {
    Db db(dir_ + "/x.db", /*create=*/true);
    EXPECT_TRUE(sqlite_has_fts5(db)) << "Debian 12's libsqlite3 is built with FTS5";
}
