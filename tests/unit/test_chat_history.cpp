// A chat's history across a model switch (answering/chat_history.h), on chats written by hand:
// which exchanges a question sends, how many are left out, where the history started afresh.
#include "answering/chat_history.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace spanscope;
using namespace spanscope::test;

namespace {

class ChatHistory : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        p_ = Project::open(dir_ + "/p.spanscope", true);
        chat_ = p_->create_chat("c");
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // One exchange; `model` "" records none (an answer saved before answers named their model).
    void exchange(const std::string& q, const std::string& a, const std::string& model) {
        p_->add_message(chat_, "user", q);
        p_->add_message(chat_, "assistant", a,
                        model.empty() ? std::string(R"({"documents": [1]})")
                                      : R"({"model_id": ")" + model + R"(", "model_file": ")" +
                                            model + R"(.gguf", "documents": [1]})");
    }
    using History = std::vector<std::pair<std::string, std::string>>;

    std::string dir_;
    std::unique_ptr<Project> p_;
    int64_t chat_ = 0;
};

} // namespace

TEST_F(ChatHistory, AQuestionSendsTheRunOfItsOwnModelsAnswers) {
    exchange("q1", "a1", "A");
    exchange("q2", "a2", "A");
    exchange("q3", "b3", "B");
    // Asked of A after B: nothing of the first run, nothing of B's.
    auto c = chat_context(*p_, chat_, "A");
    EXPECT_TRUE(c.history.empty());
    EXPECT_TRUE(c.restarted);
    EXPECT_EQ(c.turns_left_out, 3u);
    EXPECT_EQ(c.left_out_model.id, "B");
    // Asked of B: B's own answer.
    c = chat_context(*p_, chat_, "B");
    EXPECT_EQ(c.history, (History{{"q3", "b3"}}));
    EXPECT_FALSE(c.restarted);
    EXPECT_EQ(c.turns_left_out, 2u);
    EXPECT_EQ(c.documents, (std::vector<int64_t>{1}));
    // Without a model to compare with, everything.
    EXPECT_EQ(chat_context(*p_, chat_, "").history.size(), 3u);
    // A back after B: the history restarted twice, at q3 (A to B) and at q4 (B to A).
    exchange("q4", "a4", "A");
    c = chat_context(*p_, chat_, "A");
    EXPECT_EQ(c.history, (History{{"q4", "a4"}}));
    const auto r = history_restarts(p_->messages(chat_));
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].message, 4u); // q3's index: q1 a1 q2 a2 q3
    EXPECT_EQ(r[0].before.id, "A");
    EXPECT_EQ(r[0].after.id, "B");
    EXPECT_EQ(r[1].message, 6u);
    EXPECT_EQ(r[1].after.file, "A.gguf");
}

TEST_F(ChatHistory, AnswersWithoutARecordedModelOrWithoutTextEndNoRun) {
    exchange("q1", "old", ""); // saved before answers named their model
    exchange("q2", "a2", "A");
    exchange("q3", "", "B"); // B stopped before its first token
    exchange("q4", "a4", "A");
    const auto c = chat_context(*p_, chat_, "A");
    EXPECT_EQ(c.history, (History{{"q1", "old"}, {"q2", "a2"}, {"q4", "a4"}}));
    EXPECT_FALSE(c.restarted);
    EXPECT_EQ(c.turns_left_out, 0u);
    EXPECT_TRUE(history_restarts(p_->messages(chat_)).empty());
    // Asked of B now: A's answers are another model's.
    const auto b = chat_context(*p_, chat_, "B");
    EXPECT_TRUE(b.history.empty());
    EXPECT_TRUE(b.restarted);
    EXPECT_EQ(b.turns_left_out, 3u);
}

// A continued chat answers from the documents its last answer was asked about, not only from
// those its ranking kept (a question whose ranking left a document out would otherwise drop
// it from the chat for good); an answer saved before they were recorded gives those it used.
TEST_F(ChatHistory, AContinuedChatAnswersFromTheDocumentsTheLastAnswerWasAskedAbout) {
    exchange("q1", "a1", "A"); // documents [1] (used), nothing asked recorded
    EXPECT_EQ(chat_context(*p_, chat_, "A").documents, (std::vector<int64_t>{1}));
    p_->add_message(chat_, "user", "q2");
    p_->add_message(chat_, "assistant", "a2",
                    R"({"model_id": "A", "documents": [3], "documents_asked": [3, 1, 2]})");
    EXPECT_EQ(chat_context(*p_, chat_, "A").documents, (std::vector<int64_t>{3, 1, 2}));
}

// Only the run of exchanges about the question's documents is kept: asked about the same set,
// or (saved before the documents asked were recorded) having used only documents among them;
// an exchange that records no documents counts as about them.
TEST_F(ChatHistory, OnlyTheTurnsAboutTheQuestionsDocumentsAreKept) {
    const auto answer = [&](const std::string& q, const std::string& stats) {
        p_->add_message(chat_, "user", q);
        p_->add_message(chat_, "assistant", "a" + q, stats);
    };
    answer("1", R"({"model_id": "A", "documents_asked": [1]})");
    answer("2", R"({"model_id": "A", "documents_asked": [2, 3]})");
    answer("3", R"({"model_id": "A"})");                   // no documents recorded
    answer("4", R"({"model_id": "A", "documents": [3]})"); // used 3, asked not recorded
    answer("5", R"({"model_id": "A", "documents_asked": [3, 2]})");
    auto c = chat_context(*p_, chat_, "A");
    ASSERT_EQ(c.history.size(), 5u);
    ASSERT_EQ(c.history_documents.size(), 5u);
    EXPECT_EQ(keep_history_of(c, {2, 3}), 1u);
    EXPECT_EQ(c.history, (History{{"2", "a2"}, {"3", "a3"}, {"4", "a4"}, {"5", "a5"}}));
    ASSERT_EQ(c.history_documents.size(), c.history.size());
    EXPECT_EQ(c.history_documents[0].ids, (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(c.history_documents[0].asked);
    EXPECT_FALSE(c.history_documents[2].asked); // "documents": used
    EXPECT_EQ(c.turns_left_out, 1u);
    // Only 2: the turns asked about {2, 3} are about other documents; the one that used 3 too.
    c = chat_context(*p_, chat_, "A");
    EXPECT_EQ(keep_history_of(c, {2}), 5u);
    EXPECT_TRUE(c.history.empty());
    EXPECT_TRUE(c.history_documents.empty());
    // After a model switch, both rules add up in turns_left_out.
    answer("6", R"({"model_id": "B", "documents_asked": [1]})");
    answer("7", R"({"model_id": "B", "documents_asked": [2]})");
    c = chat_context(*p_, chat_, "B");
    EXPECT_EQ(c.turns_left_out, 5u); // A's answers
    EXPECT_EQ(keep_history_of(c, {2}), 1u);
    EXPECT_EQ(c.history, (History{{"7", "a7"}}));
    EXPECT_EQ(c.turns_left_out, 6u);
}
