#include "commands.h"

#include "model.h"
#include "prompt.h"
#include "session.h"
#include "text_input.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

namespace spanscope::cli {

int run_ask(const AskOptions& o) {
    // Read and check every document before loading the model or printing anything.
    std::vector<PromptDocument> docs;
    for (const auto& path : o.docs) {
        // The file name is shown to the model: a name that is not UTF-8 gets '?' for each
        // byte that breaks it, so that it cannot fail the prompt.
        std::string name = std::filesystem::path(path).filename().string();
        if (!is_valid_utf8(name))
            for (auto& c : name)
                if (static_cast<unsigned char>(c) >= 0x80)
                    c = '?';
        docs.push_back({name, read_text_document(path)});
    }
    if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
        throw std::runtime_error("the question is empty");
    if (!is_valid_utf8(o.question))
        throw std::runtime_error("the question is not valid UTF-8");

    auto model = open_model(o.model);
    const auto prompt = build_question_prompt(model->tokenizer(), model->info().instruction_tuned,
                                              docs, o.question);
    const int64_t n_ctx = model->info().n_ctx_train;
    if (static_cast<int64_t>(prompt.tokens.size()) > n_ctx)
        throw ContextOverflow("the prompt is " + std::to_string(prompt.tokens.size()) +
                              " tokens, longer than the model's context window of " +
                              std::to_string(n_ctx) + " tokens");

    SessionOptions so;
    so.threads = o.threads;
    Session session(*model, so);
    SamplingParams sp;
    sp.temperature = o.temperature;
    sp.top_k = o.top_k;
    sp.top_p = o.top_p;
    sp.seed = o.seed;

    std::function<void(const std::string&)> on_text;
    bool printed_any = false;
    if (!o.json)
        on_text = [&](const std::string& piece) {
            // Leading whitespace of a completion ("Answer: 30") is not part of the answer.
            std::string p = piece;
            if (!printed_any) {
                const auto b = p.find_first_not_of(" \t\n");
                if (b == std::string::npos)
                    return;
                p = p.substr(b);
            }
            if (prompt.style == PromptStyle::Completion && p.find('\n') != std::string::npos)
                p = p.substr(0, p.find('\n'));
            std::cout << p << std::flush;
            printed_any = true;
        };
    const Answer ans = session.ask(prompt, o.max_tokens, sp, on_text);
    if (!o.json) {
        std::cout << "\n";
        return 0;
    }
    const auto& s = ans.stats;
    nlohmann::json j;
    j["answer"] = ans.text;
    j["stop_reason"] = ans.stop_reason;
    j["stats"] = {{"prompt_tokens", s.prompt_tokens},
                  {"tokens_computed", s.tokens_computed},
                  {"tokens_reused", s.tokens_reused},
                  {"ttft_ms", s.ttft_ms},
                  {"prefill_tokens_per_s", s.prefill_tokens_per_s},
                  {"decode_tokens_per_s", s.decode_tokens_per_s},
                  {"generated_tokens", s.generated_tokens},
                  {"peak_rss_bytes", peak_rss_bytes()},
                  {"memory_fast_tier_bytes", s.memory.fast_tier_bytes},
                  {"memory_host_tier_bytes", s.memory.host_tier_bytes}};
    // replace: a byte-fallback answer may end in an incomplete UTF-8 sequence.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
}

} // namespace spanscope::cli
