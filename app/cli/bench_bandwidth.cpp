#include "app/cli/bench_bandwidth.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace spanscope::cli {

double read_bandwidth_gb_per_s(int threads) {
    constexpr size_t kWords = (size_t{1} << 30) / sizeof(uint64_t);
    std::vector<uint64_t> a(kWords);
    for (size_t i = 0; i < kWords; ++i)
        a[i] = i;
    ThreadPool pool(threads);
    std::vector<uint64_t> sums(static_cast<size_t>(pool.size()));
    double best = 0.0;
    for (int pass = 0; pass < 5; ++pass) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(static_cast<int64_t>(kWords), [&](int64_t b, int64_t e, int t) {
            uint64_t s[8] = {};
            int64_t i = b;
            for (; i + 8 <= e; i += 8)
                for (int k = 0; k < 8; ++k)
                    s[k] += a[static_cast<size_t>(i + k)];
            for (; i < e; ++i)
                s[0] += a[static_cast<size_t>(i)];
            uint64_t total = 0;
            for (uint64_t v : s)
                total += v;
            sums[static_cast<size_t>(t)] = total;
        });
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, static_cast<double>(kWords * sizeof(uint64_t)) / s / 1e9);
    }
    // The sums are used, so the reads cannot be optimised away.
    uint64_t check = 0;
    for (uint64_t v : sums)
        check += v;
    if (check == 1)
        std::fputc(' ', stderr);
    return best;
}

double decode_bytes_per_token(const Model& model, int64_t n_ctx) {
    double bytes = 0.0;
    // With an output matrix of its own, the token embedding is only gathered a row at a time.
    const bool own_output = model.gguf().find_tensor("output.weight") != nullptr;
    for (const auto& t : model.gguf().tensors())
        if (t.ne.size() >= 2 && !(own_output && t.name == "token_embd.weight"))
            bytes += static_cast<double>(t.nbytes);
    for (const auto& l : model.info().layers) {
        if (l.recurrent())
            continue;
        const int64_t rows = l.sliding() ? std::min<int64_t>(n_ctx, l.attn.window) : n_ctx;
        bytes += 2.0 * static_cast<double>(rows) * l.attn.n_kv_head * l.attn.head_dim * 4.0;
    }
    return bytes;
}

} // namespace spanscope::cli
