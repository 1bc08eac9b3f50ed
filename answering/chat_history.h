// A chat's history as a question sends it: its earlier exchanges (question, answer), and where
// a chat continued under another model starts afresh. Each answer's message records the model
// that gave it (its statistics: "model_id", "model_file", "model_name"; ask_project writes
// them); the history a question sends is the run of exchanges since the last answer another
// model gave, so a model never sees another model's answers as its own turns. Answers saved
// before messages named their model count as the current model's; an answer without text
// (stopped or failed before its first token) counts as no model's. Shared by ask_project (the
// prompt) and the desktop application (the note line where a chat's history started afresh).
#pragma once

#include "storage/project.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spanscope {

/// The model an answer's message records. `id` is empty when none is recorded (an answer
/// saved before messages named their model, or a statistics text that is not JSON).
struct AnswerModel {
    std::string id;   ///< model_identity_hex (storage/model_fingerprint.h) of the model
    std::string file; ///< the model file's name, without its directory
    std::string name; ///< its general.name, else the file's name
    /// How the user is told of it: the file's name, as the status bar names models, else
    /// its name.
    const std::string& shown() const { return file.empty() ? name : file; }
};

/// The model recorded in an answer's statistics (MessageRecord::stats_json).
AnswerModel answer_model(const std::string& stats_json);

/// The documents an answer records: those it was asked about (its statistics'
/// documents_asked), or for an answer saved before those were recorded, those it used
/// (documents); none for an answer that records neither.
struct TurnDocuments {
    std::vector<int64_t> ids;
    bool asked = false; ///< ids are the documents asked about, not only those used
};

/// A chat's earlier exchanges (question, answer) as a question asked with one model sends
/// them, and the documents its last answer used.
struct ChatContext {
    /// The exchanges sent as history: those since the last answer another model gave (and,
    /// once keep_history_of ran, since the last asked about other documents), less
    /// unanswered questions and answers without text.
    std::vector<std::pair<std::string, std::string>> history;
    /// For each exchange of `history`, in the same order, the documents its answer records.
    std::vector<TurnDocuments> history_documents;
    /// The documents the chat's last answer was asked about, in order (its statistics'
    /// documents_asked; an answer saved before those were recorded: the documents it used).
    std::vector<int64_t> documents;
    /// Answered exchanges of the chat not sent: those up to the last answer another model gave
    /// (and those keep_history_of left out).
    size_t turns_left_out = 0;
    /// The chat's last answer that records a model records another one: the history starts
    /// afresh with this question (then `history` is empty). Where it did for earlier questions
    /// the chat already said so (history_restarts).
    bool restarted = false;
    /// The model of the last answer left out (empty id when none was).
    AnswerModel left_out_model;
};

/// The context of chat `chat_id` for a question asked with the model `model_id`
/// (model_identity_hex; empty: every answer counts as this model's).
ChatContext chat_context(Project& project, int64_t chat_id, const std::string& model_id);

/// Keeps in chat.history only the exchanges since the last one about other documents than
/// `documents`: asked about another set, or (an answer saved before the documents asked were
/// recorded) having used a document not among them; an exchange that records none counts as
/// about these. An answer about one document sent as history would answer a question about
/// another (a small model repeats it). Adds those left out to chat.turns_left_out and returns
/// how many.
size_t keep_history_of(ChatContext& chat, const std::vector<int64_t>& documents);

/// A place where a chat's history started afresh: the question (an index into the chat's
/// messages) whose answer records another model than the answer before it that records one.
struct HistoryRestart {
    size_t message = 0; ///< the question's index (the answer's, when no question precedes it)
    AnswerModel before; ///< the model of the answers before it
    AnswerModel after;  ///< the model that answered it
};

/// Every place where the chat's history started afresh, in order: the questions at which
/// chat_context gave `restarted` when they were asked (answers without a recorded model
/// neither start nor end a run).
std::vector<HistoryRestart> history_restarts(const std::vector<MessageRecord>& messages);

} // namespace spanscope
