// The document list a project keeps (answering/document_list.h): order and documents left out of
// the context survive reopening, follow documents added and removed, and a damaged setting
// falls back to id order with a warning instead of failing.
#include "answering/document_list.h"
#include "storage/project.h"
#include "test_support.h"

#include <gtest/gtest.h>

using namespace spanscope;
using namespace spanscope::test;

namespace {
using Ids = std::vector<int64_t>;

class DocumentList : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = temp_dir() + "/list.spanscope";
        auto p = Project::open(path_, true);
        for (const char* t : {"alpha text", "beta text", "gamma text"})
            ids_.push_back(p->add_document(std::string("/x/") + t, text_document(t)));
    }
    std::string path_;
    Ids ids_;
};
} // namespace

TEST_F(DocumentList, WithoutAStoredListDocumentsComeByIdAllInContext) {
    auto p = Project::open(path_, false);
    std::string warning;
    const auto s = project_document_list(*p, &warning);
    EXPECT_EQ(s.order, ids_);
    EXPECT_TRUE(s.excluded.empty());
    EXPECT_TRUE(warning.empty());
}

TEST_F(DocumentList, OrderAndLeftOutSurviveReopeningAndFollowDocuments) {
    {
        auto p = Project::open(path_, false);
        set_project_document_list(*p, {{ids_[2], ids_[0], ids_[1]}, {ids_[0]}});
    }
    auto p = Project::open(path_, false);
    auto s = project_document_list(*p);
    EXPECT_EQ(s.order, (Ids{ids_[2], ids_[0], ids_[1]}));
    EXPECT_EQ(s.excluded, (Ids{ids_[0]}));
    // A removed document leaves the list; a new one comes last, in context.
    ASSERT_TRUE(p->remove_document(ids_[0]));
    const int64_t d = p->add_document("/x/delta", text_document("delta text"));
    s = project_document_list(*p);
    EXPECT_EQ(s.order, (Ids{ids_[2], ids_[1], d}));
    EXPECT_TRUE(s.excluded.empty());
}

TEST_F(DocumentList, ANewDocumentGivenTheIdOfARemovedOneIsNotMistakenForIt) {
    auto p = Project::open(path_, false);
    // The last document left out, then removed: SQLite gives the next one its id.
    set_project_document_list(*p, {{ids_[2], ids_[0], ids_[1]}, {ids_[2]}});
    ASSERT_TRUE(p->remove_document(ids_[2]));
    const int64_t d = p->add_document("/x/delta", text_document("delta text"));
    ASSERT_EQ(d, ids_[2]) << "premise: the id is reused";
    const auto s = project_document_list(*p);
    EXPECT_EQ(s.order, (Ids{ids_[0], ids_[1], d})); // new: last, in context
    EXPECT_TRUE(s.excluded.empty());
}

TEST_F(DocumentList, InconsistentListsAreRefusedAndNothingIsWritten) {
    auto p = Project::open(path_, false);
    set_project_document_list(*p, {{ids_[1], ids_[0], ids_[2]}, {}});
    EXPECT_THROW(set_project_document_list(*p, {{ids_[0], ids_[0]}, {}}), std::invalid_argument);
    EXPECT_THROW(set_project_document_list(*p, {{ids_[0]}, {ids_[1]}}), std::invalid_argument);
    EXPECT_EQ(project_document_list(*p).order, (Ids{ids_[1], ids_[0], ids_[2]}));
}

TEST_F(DocumentList, ADamagedSettingFallsBackToIdOrderWithAWarning) {
    auto p = Project::open(path_, false);
    for (const char* junk :
         {"not json", "[1, 2]", R"({"order": "1,2"})", R"({"order": [1, 2]})",
          R"({"order": [[1, 2]]})", R"({"order": [[1, "/x/alpha text"]], "excluded": 5})"}) {
        p->db()
            .prepare("INSERT OR REPLACE INTO settings(key, value) VALUES ('document_list', ?)")
            .bind(1, std::string_view(junk))
            .run();
        std::string warning;
        const auto s = project_document_list(*p, &warning);
        EXPECT_EQ(s.order, ids_) << junk;
        EXPECT_TRUE(s.excluded.empty()) << junk;
        EXPECT_NE(warning.find("unusable document list"), std::string::npos) << junk;
    }
    // Ids the project does not have, and repeats, are dropped without a warning.
    set_project_document_list(*p, {{999, ids_[1]}, {999}});
    std::string warning;
    const auto s = project_document_list(*p, &warning);
    EXPECT_EQ(s.order, (Ids{ids_[1], ids_[0], ids_[2]}));
    EXPECT_TRUE(s.excluded.empty());
    EXPECT_TRUE(warning.empty());
}
