// `spanscope-lab qa`: run a question set (tests/qa/questions.json) with full attention and
// score it: case-insensitive substring match of any accepted answer in the first line of the
// model's answer, cut to 200 characters (tests/qa/README.md). Each document is prefilled once;
// its questions reuse the prefilled prefix.
#include "lab/cli/lab_commands.h"

#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/session/session.h"
#include "engine/text/prompt.h"
#include "engine/text/text_input.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

namespace spanscope::cli {

namespace {
std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}
} // namespace

bool qa_answer_matches(const std::string& answer, const std::vector<std::string>& accepted) {
    std::string window = answer.substr(0, answer.find('\n'));
    window = lower(window.substr(0, 200));
    for (const auto& a : accepted)
        if (!a.empty() && window.find(lower(a)) != std::string::npos)
            return true;
    return false;
}

nlohmann::json read_qa_set(const std::string& path) {
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error(path + ": cannot be read");
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
    }
}

std::map<std::string, std::vector<nlohmann::json>>
questions_by_document(const nlohmann::json& set, std::vector<std::string>& doc_order) {
    std::map<std::string, std::vector<nlohmann::json>> by_doc;
    for (const auto& q : set.at("questions")) {
        const std::string doc = q.at("doc");
        if (!by_doc.count(doc))
            doc_order.push_back(doc);
        by_doc[doc].push_back(q);
    }
    return by_doc;
}

int run_qa(const QaOptions& o) {
    const nlohmann::json set = read_qa_set(o.set);
    if (o.skip_missing_model && o.model.empty()) {
        const auto where = locate_model("");
        if (where.path.empty()) {
            std::cout << "SKIP: " << missing_model_message(where) << "\n";
            return 77;
        }
    }
    // A model that is found but broken is an error, never a skip.
    auto model = open_model(o.model);
    const ChatFormat format = chat_format_of(model->info(), model->tokenizer());
    SessionOptions so;
    so.threads = o.threads;
    Session session(*model, so);
    SamplingParams greedy;

    std::vector<std::string> doc_order;
    auto by_doc = questions_by_document(set, doc_order);
    int correct = 0, asked = 0, skipped = 0;
    nlohmann::json results = nlohmann::json::array();
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& doc : doc_order) {
        std::string text;
        try {
            text = read_text_document(doc);
        } catch (const DocumentError& e) {
            std::cerr << "skipping " << by_doc[doc].size() << " questions: " << e.what() << "\n";
            skipped += static_cast<int>(by_doc[doc].size());
            continue;
        }
        const std::vector<PromptDocument> docs{
            {std::filesystem::path(doc).filename().string(), text}};
        for (const auto& q : by_doc[doc]) {
            const auto prompt = build_question_prompt(model->tokenizer(), format, docs,
                                                      q.at("question").get<std::string>());
            const Answer ans = session.ask(prompt, o.max_tokens, greedy);
            const auto accepted = q.at("answers").get<std::vector<std::string>>();
            const bool ok = qa_answer_matches(ans.text, accepted);
            correct += ok ? 1 : 0;
            ++asked;
            results.push_back({{"id", q.at("id")},
                               {"answer", ans.text},
                               {"expected", accepted},
                               {"correct", ok},
                               {"prompt_tokens", ans.stats.prompt_tokens},
                               {"tokens_reused", ans.stats.tokens_reused},
                               {"tokens_computed", ans.stats.tokens_computed}});
            if (!o.json)
                std::cout << (ok ? "[correct] " : "[wrong]   ") << q.at("id").get<std::string>()
                          << ": " << ans.text << "   (expected: " << accepted.front() << ")"
                          << std::endl;
        }
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.json) {
        nlohmann::json j{{"set", o.set},      {"model", model->path()}, {"correct", correct},
                         {"asked", asked},    {"skipped", skipped},     {"seconds", secs},
                         {"results", results}};
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        std::cout << "QA: " << correct << " of " << asked << " answered correctly (" << skipped
                  << " skipped, " << static_cast<int>(secs) << " s)\n";
    }
    if (o.min_correct >= 0 && asked == 0) {
        std::cerr << "QA: no question could be asked (every document is missing)\n";
        return 1;
    }
    if (o.min_correct >= 0 && correct < o.min_correct) {
        std::cerr << "QA regression: " << correct << " correct, the baseline is " << o.min_correct
                  << "\n";
        return 1;
    }
    return 0;
}

} // namespace spanscope::cli
