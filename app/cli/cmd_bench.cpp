#include "app/cli/commands.h"

#include "app/cli/bench_bandwidth.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/quant.h"
#include "engine/model/backend.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "engine/text/sampler.h"

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
    // The text repeated: the first copy starts the prompt, the others continue it (a space
    // prefix only before the first, tokenizer.h TextStart).
    const auto first = tok.encode(text);
    const auto again = tok.encode(text, false, TextStart::Continues);
    std::vector<int32_t> ids;
    if (tok.add_bos()) // as every prompt starts (prompt.h)
        ids.push_back(tok.bos());
    for (bool start = true; static_cast<int>(ids.size()) < n; start = false) {
        const auto& piece = start ? first : again;
        ids.insert(ids.end(), piece.begin(),
                   piece.begin() + std::min<size_t>(piece.size(), n - ids.size()));
    }
    return ids;
}
} // namespace

int run_bench(const BenchOptions& o) {
    auto model = open_model(o.model, o.backend);
    using Clock = std::chrono::steady_clock;
    nlohmann::json results = nlohmann::json::array();
    const int threads =
        o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
    set_prefill_products(o.products == "float" ? PrefillProducts::Float : PrefillProducts::Integer);
    if (o.kernel_level != "best" && o.backend != "cpu")
        throw std::runtime_error("--kernel-level chooses the cpu backend's kernels; drop it with "
                                 "--backend " +
                                 o.backend);
    if (const auto level = kernel_level_from_name(o.kernel_level); level != KernelLevel::Auto) {
        if (!level)
            throw std::runtime_error("no kernel level " + o.kernel_level);
        if (!kernel_level_supported(*level))
            throw std::runtime_error("kernel level " + o.kernel_level +
                                     " does not run here: the CPU lacks it (or, for amx, Linux "
                                     "refused the tile state; best: " +
                                     std::string(kernel_level_name(best_kernel_level())) + ")");
        set_kernel_level(*level);
    }
    if (!o.json)
        std::printf("%-10s %-14s %-14s%s%s\n", "prompt", "prefill tok/s", "decode tok/s",
                    o.ingest ? " ingest tok/s " : "",
                    o.bandwidth ? " decode GB/s (of read bw)" : "");
    struct Row {
        std::string text;
        double decode_gbs;
        std::string suffix;
    };
    std::vector<Row> rows; // printed at the end, with the bandwidth
    for (int len : o.lengths)
        if (len + o.decode_tokens > model->info().n_ctx_train)
            throw std::runtime_error("prompt length " + std::to_string(len) + " plus " +
                                     std::to_string(o.decode_tokens) +
                                     " decoded tokens exceeds the context window of " +
                                     std::to_string(model->info().n_ctx_train) + " tokens");
    // The settings checked and the sekv router chosen once for every length.
    const auto setup = policy_setup(o.policy, *model, threads, print_note);
    const auto& router = setup.router;
    for (int len : o.lengths) {
        SessionOptions so = setup.options;
        so.n_ctx = std::min<int64_t>(model->info().n_ctx_train, len + o.decode_tokens);
        Session session(*model, so);
        const bool sekv = !session.memory().sealing_layers().empty(); // or another compressor
        const bool segments = session.memory().needs_segmentation();
        const auto prompt = bench_tokens(model->tokenizer(), len);
        auto t0 = Clock::now();
        // sekv: the prompt's surprisal is computed in the same passes (its segmentation needs
        // it), then the prompt is sealed: decode runs over the two resolutions (a baseline:
        // over the rows its budget keeps).
        std::vector<float> surprisal(segments ? prompt.size() : 0);
        auto logits = session.prefill(prompt, nullptr, {}, segments ? surprisal.data() : nullptr);
        const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
        auto decode = [&](Session& s, std::vector<float> l) {
            const auto t = Clock::now();
            for (int i = 0; i < o.decode_tokens; ++i)
                l = s.decode(argmax(l.data(), model->info().n_vocab));
            return std::chrono::duration<double>(Clock::now() - t).count();
        };
        nlohmann::json r;
        r["prompt_tokens"] = len;
        r["policy"] = o.policy.policy;
        put_router_fields(r, router);
        if (so.sekv.router.rerank > 0)
            r["rerank"] = so.sekv.router.rerank;
        if (sekv) {
            // The same prefill decoded with every row at full resolution first (before sealing,
            // SEKV layers attend exactly as full ones), for the comparison.
            SessionOptions fo = so;
            fo.global_policy = "full";
            Session full(*model, fo);
            full.memory() = session.memory().clone();
            full.adopt_memory(session.n_past());
            const double full_s = decode(full, logits);
            r["decode_tokens_per_s_full"] = o.decode_tokens / full_s;
            const auto t_seal = Clock::now();
            session.seal_context(segments ? surprisal.data() : nullptr, 0,
                                 static_cast<int64_t>(prompt.size()));
            r["seal_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - t_seal).count();
        }
        const double decode_s = decode(session, logits);
        const double pf = len / prefill_s, dc = o.decode_tokens / decode_s;
        double ingest_tps = 0.0, decode_gbs = 0.0;
        if (o.ingest) {
            // Prefill with every token's surprisal (of the next prompt token), in a session of
            // its own, as reading a document into a project does.
            Session ingest(*model, so);
            std::vector<float> s(prompt.size());
            const auto ti = Clock::now();
            ingest.prefill(prompt, nullptr, {}, s.data());
            ingest_tps = len / std::chrono::duration<double>(Clock::now() - ti).count();
            r["ingest_tokens_per_s"] = ingest_tps;
        }
        if (o.bandwidth) {
            // Bytes at the middle of the decoded tokens' contexts.
            decode_gbs = decode_bytes_per_token(*model, len + o.decode_tokens / 2) * dc / 1e9;
            r["decode_gb_per_s"] = decode_gbs;
        }

        r["prefill_tokens_per_s"] = pf;
        r["decode_tokens"] = o.decode_tokens;
        r["decode_tokens_per_s"] = dc;
        r["prefill_s"] = prefill_s;
        r["decode_s"] = decode_s;
        if (sekv) {
            const auto m = session.memory().total(o.policy.policy);
            r["memory"] = {{"fast_tier_bytes", m.fast_tier_bytes},
                           {"host_tier_bytes", m.host_tier_bytes},
                           {"full_kv_bytes", m.full_kv_bytes},
                           // SEKV on the GPU: its device cache of span factors and its fetches.
                           {"cache_bytes", m.cache_bytes},
                           {"factor_fetches", m.factor_fetches},
                           {"factor_hits", m.factor_hits},
                           {"factor_prefetches", m.factor_prefetches},
                           {"factor_evictions", m.factor_evictions}};
            r["fast_tier_fraction"] =
                static_cast<double>(m.fast_tier_bytes) / static_cast<double>(m.full_kv_bytes);
        }
        results.push_back(r);
        if (!o.json) {
            char line[160];
            std::snprintf(line, sizeof line, "%-10d %-14.1f %-14.1f", len, pf, dc);
            std::string row = line;
            if (o.ingest) {
                std::snprintf(line, sizeof line, " %-13.1f", ingest_tps);
                row += line;
            }
            rows.push_back({row, decode_gbs,
                            sekv ? "  (full from the same prefill: " +
                                       std::to_string(r["decode_tokens_per_s_full"].get<double>()) +
                                       " tok/s; fast tier " +
                                       std::to_string(r["fast_tier_fraction"].get<double>()) +
                                       " of full)"
                                 : ""});
        }
    }
    // Last, so that its 1 GiB array is not counted in the peak RSS reported.
    const size_t peak_rss = peak_rss_bytes();
    const double bandwidth = o.bandwidth ? read_bandwidth_gb_per_s(threads) : 0.0;
    for (const auto& row : rows) {
        std::printf("%s", row.text.c_str());
        if (o.bandwidth)
            std::printf(" %.1f (%.0f %%)", row.decode_gbs, 100.0 * row.decode_gbs / bandwidth);
        std::printf("%s\n", row.suffix.c_str());
    }
    if (o.json) {
        nlohmann::json j{{"model", model->path()},
                         {"backend", model->backend()},
                         {"device", backend_status(backend_from_name(model->backend())).detail},
                         {"threads", threads},
                         {"kernel_level", std::string(kernel_level_name(kernel_level()))},
                         {"products", o.products},
                         {"results", results},
                         {"peak_rss_bytes", peak_rss}};
        if (o.bandwidth)
            j["read_bandwidth_gb_per_s"] = bandwidth;
        std::cout << j.dump(2) << "\n";
    } else {
        std::printf("backend %s (%s), threads %d, kernel level %s, %s prefill products, peak RSS "
                    "%.1f MiB\n",
                    model->backend(),
                    backend_status(backend_from_name(model->backend())).detail.c_str(), threads,
                    std::string(kernel_level_name(kernel_level())).c_str(), o.products.c_str(),
                    static_cast<double>(peak_rss) / 1048576.0);
        if (o.bandwidth)
            std::printf("read bandwidth %.1f GB/s (1 GiB read on %d threads, best of 5)\n",
                        bandwidth, threads);
    }
    return 0;
}

} // namespace spanscope::cli
