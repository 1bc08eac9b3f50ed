#include "commands.h"

#include "model.h"
#include "sampler.h"
#include "session.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

namespace spanscope::cli {

namespace {
// Prompt text: the GPL-3 as shipped by Debian's base-files (real prose), repeated as needed.
std::vector<int32_t> bench_tokens(const Tokenizer& tok, int n) {
    std::string text;
    if (std::ifstream in("/usr/share/common-licenses/GPL-3"); in) {
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    }
    if (text.empty())
        text = "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor "
               "jugs. How vexingly quick daft zebras jump!\n";
    const auto piece = tok.encode(text);
    std::vector<int32_t> ids{tok.bos()};
    while (static_cast<int>(ids.size()) < n)
        ids.insert(ids.end(), piece.begin(),
                   piece.begin() + std::min<size_t>(piece.size(), n - ids.size()));
    return ids;
}
} // namespace

int run_bench(const BenchOptions& o) {
    auto model = open_model(o.model);
    using Clock = std::chrono::steady_clock;
    nlohmann::json results = nlohmann::json::array();
    const int threads =
        o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    if (!o.json)
        std::printf("%-10s %-14s %-14s\n", "prompt", "prefill tok/s", "decode tok/s");
    for (int len : o.lengths)
        if (len + o.decode_tokens > model->info().n_ctx_train)
            throw std::runtime_error("prompt length " + std::to_string(len) + " plus " +
                                     std::to_string(o.decode_tokens) +
                                     " decoded tokens exceeds the context window of " +
                                     std::to_string(model->info().n_ctx_train) + " tokens");
    for (int len : o.lengths) {
        SessionOptions so;
        so.threads = threads;
        so.n_ctx = std::min<int64_t>(model->info().n_ctx_train, len + o.decode_tokens);
        Session session(*model, so);
        const auto prompt = bench_tokens(model->tokenizer(), len);
        auto t0 = Clock::now();
        auto logits = session.prefill(prompt);
        const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
        t0 = Clock::now();
        for (int i = 0; i < o.decode_tokens; ++i)
            logits = session.decode(argmax(logits.data(), model->info().n_vocab));
        const double decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
        const double pf = len / prefill_s, dc = o.decode_tokens / decode_s;
        results.push_back({{"prompt_tokens", len},
                           {"prefill_tokens_per_s", pf},
                           {"decode_tokens", o.decode_tokens},
                           {"decode_tokens_per_s", dc},
                           {"prefill_s", prefill_s},
                           {"decode_s", decode_s}});
        if (!o.json)
            std::printf("%-10d %-14.1f %-14.1f\n", len, pf, dc);
    }
    if (o.json) {
        nlohmann::json j{{"model", model->path()},
                         {"threads", threads},
                         {"results", results},
                         {"peak_rss_bytes", peak_rss_bytes()}};
        std::cout << j.dump(2) << "\n";
    } else {
        std::printf("threads %d, peak RSS %.1f MiB\n", threads, peak_rss_bytes() / 1048576.0);
    }
    return 0;
}

} // namespace spanscope::cli
