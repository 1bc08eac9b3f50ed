#include "answering/chat_history.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <set>
#include <string_view>

namespace spanscope {

namespace {

std::string string_field(const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                  : std::string();
}

AnswerModel answer_model(const nlohmann::json& stats) {
    AnswerModel m;
    m.id = string_field(stats, "model_id");
    m.file = string_field(stats, "model_file");
    m.name = string_field(stats, "model_name");
    return m;
}

nlohmann::json parse(const std::string& stats_json) {
    return nlohmann::json::parse(stats_json, nullptr, /*allow_exceptions=*/false);
}

} // namespace

AnswerModel answer_model(const std::string& stats_json) {
    return answer_model(parse(stats_json));
}

ChatContext chat_context(Project& project, int64_t chat_id, const std::string& model_id) {
    ChatContext c;
    std::string pending, last_recorded;
    size_t answered = 0;
    for (const auto& m : project.messages(chat_id)) {
        if (m.role == "user") {
            pending = m.text;
            continue;
        }
        const auto stats = parse(m.stats_json);
        // An answer without text (stopped or failed before its first token) gave the model
        // nothing to see: it neither ends a run nor starts one.
        const AnswerModel by = m.text.empty() ? AnswerModel{} : answer_model(stats);
        TurnDocuments turn;
        for (const char* key : {"documents_asked", "documents"}) {
            if (!stats.is_object() || !stats.contains(key) || !stats[key].is_array())
                continue;
            for (const auto& d : stats[key])
                if (d.is_number_integer())
                    turn.ids.push_back(d.get<int64_t>());
            turn.asked = std::string_view(key) == "documents_asked";
            break;
        }
        // The documents the chat's last answer records: a continued chat answers from them.
        if (turn.asked || !turn.ids.empty())
            c.documents = turn.ids;
        if (!model_id.empty() && !by.id.empty() && by.id != model_id) {
            // Another model's answer: the history starts again after it.
            c.history.clear();
            c.history_documents.clear();
            c.left_out_model = by;
        } else if (!m.text.empty()) {
            c.history.emplace_back(pending, m.text);
            c.history_documents.push_back(std::move(turn));
        }
        answered += m.text.empty() ? 0 : 1;
        if (!by.id.empty())
            last_recorded = by.id;
    }
    c.turns_left_out = answered - c.history.size();
    c.restarted = !model_id.empty() && !last_recorded.empty() && last_recorded != model_id;
    return c;
}

size_t keep_history_of(ChatContext& chat, const std::vector<int64_t>& documents) {
    const std::set<int64_t> these(documents.begin(), documents.end());
    // The run of exchanges about these documents at the end of the history starts at run_start.
    size_t run_start = chat.history.size();
    while (run_start > 0) {
        const TurnDocuments& turn = chat.history_documents[run_start - 1];
        const bool other = turn.asked
                               ? std::set<int64_t>(turn.ids.begin(), turn.ids.end()) != these
                               : std::any_of(turn.ids.begin(), turn.ids.end(),
                                             [&](int64_t id) { return these.count(id) == 0; });
        if (other)
            break;
        --run_start;
    }
    const size_t left_out = run_start;
    const auto cut = static_cast<std::ptrdiff_t>(run_start);
    chat.history.erase(chat.history.begin(), chat.history.begin() + cut);
    chat.history_documents.erase(chat.history_documents.begin(),
                                 chat.history_documents.begin() + cut);
    chat.turns_left_out += left_out;
    return left_out;
}

std::vector<HistoryRestart> history_restarts(const std::vector<MessageRecord>& messages) {
    std::vector<HistoryRestart> out;
    AnswerModel last;
    size_t question = 0;
    bool has_question = false;
    for (size_t i = 0; i < messages.size(); ++i) {
        if (messages[i].role == "user") {
            question = i;
            has_question = true;
            continue;
        }
        const bool asked = has_question;
        has_question = false;
        if (messages[i].text.empty())
            continue; // as chat_context: an answer without text neither ends a run nor starts one
        const AnswerModel by = answer_model(messages[i].stats_json);
        if (by.id.empty())
            continue;
        if (!last.id.empty() && by.id != last.id)
            out.push_back({asked ? question : i, last, by});
        last = by;
    }
    return out;
}

} // namespace spanscope
