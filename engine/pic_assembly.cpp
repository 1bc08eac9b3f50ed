#include "pic_assembly.h"

#include "memory_assembled.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

const AssembledMemory& assembled(const ModelMemory& memory, int il) {
    const auto* m = dynamic_cast<const AssembledMemory*>(&memory.layer(il));
    if (!m)
        throw std::logic_error("layer " + std::to_string(il) + " is not an assembled memory");
    return *m;
}

// Run `positions` (increasing) of the concatenation through the model in ubatches.
void run_positions(const Model& model, const std::vector<int32_t>& tokens,
                   const std::vector<int32_t>& positions, ModelMemory& memory,
                   const RecomputeOptions& o, ThreadPool& pool, const std::atomic<bool>* cancel,
                   std::vector<int32_t>* kept) {
    std::vector<int32_t> tok, pos;
    for (size_t b = 0; b < positions.size(); b += static_cast<size_t>(o.ubatch)) {
        const size_t e = std::min(positions.size(), b + static_cast<size_t>(o.ubatch));
        pos.assign(positions.begin() + static_cast<std::ptrdiff_t>(b),
                   positions.begin() + static_cast<std::ptrdiff_t>(e));
        tok.resize(pos.size());
        for (size_t i = 0; i < pos.size(); ++i)
            tok[i] = tokens[static_cast<size_t>(pos[i])];
        const auto n = static_cast<int64_t>(pos.size());
        if (!kept) {
            model.forward(tok.data(), pos.data(), n, memory, {}, nullptr, pool, nullptr, cancel);
            continue;
        }
        // CacheBlend: the rows whose values moved most at the check layer go on.
        TokenFilter filter;
        filter.after_layer = o.check_layer;
        filter.keep = [&]() {
            const auto& dev = assembled(memory, o.check_layer).last_deviation();
            std::vector<int64_t> order(static_cast<size_t>(n));
            std::iota(order.begin(), order.end(), 0);
            const auto m = static_cast<size_t>(
                std::min<int64_t>(n, static_cast<int64_t>(std::ceil(o.ratio * n - 1e-9))));
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b2) {
                return dev[static_cast<size_t>(a)] > dev[static_cast<size_t>(b2)];
            });
            order.resize(m);
            std::sort(order.begin(), order.end());
            for (const auto r : order)
                kept->push_back(pos[static_cast<size_t>(r)]);
            return order;
        };
        model.forward(tok.data(), pos.data(), n, memory, {}, nullptr, pool, nullptr, cancel,
                      &filter);
    }
}

} // namespace

ModelMemory make_assembled_memory(const ModelInfo& info, int64_t capacity) {
    if (info.hybrid())
        throw std::invalid_argument("position-independent assembly of a hybrid model (recurrent "
                                    "layers) is not supported yet");
    std::vector<std::unique_ptr<LayerMemory>> layers;
    for (const auto& li : info.layers)
        layers.push_back(std::make_unique<AssembledMemory>(li.attn, capacity));
    return ModelMemory(std::move(layers));
}

CachedDocument prefill_document(const Model& model, const std::vector<int32_t>& tokens,
                                ThreadPool& pool, int64_t ubatch, const std::atomic<bool>* cancel) {
    if (tokens.empty())
        throw std::invalid_argument("a document needs at least one token");
    if (ubatch < 1)
        throw std::invalid_argument("ubatch must be at least 1");
    const auto n = static_cast<int64_t>(tokens.size());
    if (n > model.info().n_ctx_train)
        throw std::length_error("the document's " + std::to_string(n) +
                                " tokens exceed the context window of " +
                                std::to_string(model.info().n_ctx_train));
    ModelMemory memory = make_assembled_memory(model.info(), n);
    std::vector<int32_t> pos(tokens.size());
    std::iota(pos.begin(), pos.end(), 0);
    for (int64_t b = 0; b < n; b += ubatch) {
        const int64_t m = std::min(ubatch, n - b);
        model.forward(tokens.data() + b, pos.data() + b, m, memory, {}, nullptr, pool, nullptr,
                      cancel);
    }
    CachedDocument d;
    d.tokens = tokens;
    std::vector<int> layers(static_cast<size_t>(model.info().n_layer));
    std::iota(layers.begin(), layers.end(), 0);
    d.rows = export_rows(memory, layers, 0, static_cast<int32_t>(n));
    return d;
}

int epic_tokens_for(double ratio, int64_t n_past, int64_t documents) {
    if (!(ratio >= 0 && ratio <= 1) || n_past < 0)
        throw std::invalid_argument("epic: the recompute ratio must lie in [0, 1]");
    if (documents < 2)
        return 0;
    return static_cast<int>(
        std::ceil(ratio * static_cast<double>(n_past) / static_cast<double>(documents - 1)));
}

void check_recompute_options(const ModelInfo& info, const RecomputeOptions& o) {
    const auto& names = recompute_selectors();
    if (std::find(names.begin(), names.end(), o.selector) == names.end())
        throw std::invalid_argument("unknown selector '" + o.selector +
                                    "' (none, epic, cacheblend, full)");
    if (o.ubatch < 1)
        throw std::invalid_argument("ubatch must be at least 1");
    if (o.selector == "epic" && o.epic_tokens < 0)
        throw std::invalid_argument("epic: k must not be negative");
    if (o.selector == "cacheblend" &&
        (!(o.ratio > 0 && o.ratio <= 1) || o.check_layer < 0 || o.check_layer + 1 >= info.n_layer))
        throw std::invalid_argument("cacheblend: the ratio must lie in (0, 1] and the check "
                                    "layer before the model's last layer");
}

const std::vector<std::string>& recompute_selectors() {
    static const std::vector<std::string> kSelectors = {"none", "epic", "cacheblend", "full"};
    return kSelectors;
}

AssembledContext assemble_documents(const Model& model,
                                    const std::vector<const CachedDocument*>& docs,
                                    const RecomputeOptions& o, ThreadPool& pool, int64_t capacity,
                                    const std::atomic<bool>* cancel) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto& info = model.info();
    check_recompute_options(info, o);
    if (docs.empty())
        throw std::invalid_argument("no documents to assemble");
    AssembledContext a;
    for (size_t d = 0; d < docs.size(); ++d) {
        if (!docs[d] || docs[d]->tokens.empty())
            throw std::invalid_argument("document " + std::to_string(d + 1) + " has no tokens");
        const auto n = static_cast<int64_t>(docs[d]->tokens.size());
        std::vector<char> seen(static_cast<size_t>(info.n_layer), 0);
        for (const auto& r : docs[d]->rows) {
            if (r.layer < 0 || r.layer >= info.n_layer || seen[static_cast<size_t>(r.layer)] ||
                r.pos_begin != 0 || r.n_rows != n)
                throw std::invalid_argument("document " + std::to_string(d + 1) +
                                            ": its rows must cover its " + std::to_string(n) +
                                            " tokens once in every attention layer");
            seen[static_cast<size_t>(r.layer)] = 1;
        }
        if (std::count(seen.begin(), seen.end(), 1) != info.n_layer)
            throw std::invalid_argument("document " + std::to_string(d + 1) +
                                        " lacks the rows of some attention layers");
        a.starts.push_back(a.n_past);
        a.n_past += n;
        a.tokens.insert(a.tokens.end(), docs[d]->tokens.begin(), docs[d]->tokens.end());
    }
    if (capacity <= 0)
        capacity = info.n_ctx_train;
    if (a.n_past > capacity)
        throw std::length_error("the documents' " + std::to_string(a.n_past) +
                                " tokens exceed the context of " + std::to_string(capacity));

    // Concatenate: keys re-rotated to their new positions, values as cached.
    a.memory = make_assembled_memory(info, capacity);
    for (size_t d = 0; d < docs.size(); ++d)
        for (const auto& r : docs[d]->rows)
            import_rows(a.memory, info, r, static_cast<int32_t>(a.starts[d]),
                        std::max<int64_t>(1, r.n_rows));

    a.stats = recompute_documents(model, a.memory, a.tokens, a.starts, o, pool,
                                  &a.recompute_positions, cancel);
    a.stats.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return a;
}

AssemblyStats recompute_documents(const Model& model, ModelMemory& memory,
                                  const std::vector<int32_t>& tokens,
                                  const std::vector<int64_t>& starts, const RecomputeOptions& o,
                                  ThreadPool& pool, std::vector<int32_t>* recompute_positions,
                                  const std::atomic<bool>* cancel) {
    const auto& info = model.info();
    const auto n_past = std::ssize(tokens);
    if (starts.empty() || starts.front() != 0 || !std::is_sorted(starts.begin(), starts.end()) ||
        starts.back() >= std::max<int64_t>(1, n_past))
        throw std::invalid_argument("document starts must begin at 0 and increase within the "
                                    "context");
    if (memory.n_layers() != info.n_layer)
        throw std::invalid_argument("the memory does not have the model's layers");
    check_recompute_options(info, o);
    // The recompute set: runs of positions forwarded through the model.
    std::vector<std::pair<int64_t, int64_t>> runs;
    if (o.selector == "epic") {
        for (size_t d = 1; d < starts.size(); ++d) {
            const int64_t end = d + 1 < starts.size() ? starts[d + 1] : n_past;
            runs.emplace_back(starts[d], std::min<int64_t>(end, starts[d] + o.epic_tokens));
        }
    } else if (o.selector == "full") {
        runs.emplace_back(0, n_past);
    } else if (o.selector == "cacheblend" && starts.size() > 1) {
        runs.emplace_back(starts[1], n_past);
    }
    // Every row a recomputed token attends to must be there: the global layers hold every
    // row; a sliding layer holds the window before each run (inside a run the rows are
    // recomputed). CacheBlend's tokens past the check layer are a subset of their run, so
    // those layers need every row of it too.
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        const auto& m = assembled(memory, il);
        for (const auto& [b, e] : runs) {
            if (b >= e)
                continue;
            const int64_t from = li.sliding() ? std::max<int64_t>(0, b - li.attn.window + 1) : 0;
            bool ok = m.holds(static_cast<int32_t>(from), static_cast<int32_t>(b));
            if (o.selector == "cacheblend" && il > o.check_layer)
                ok = ok && m.holds(static_cast<int32_t>(b), static_cast<int32_t>(e));
            if (!ok)
                throw std::invalid_argument(
                    "selector " + o.selector + ": layer " + std::to_string(il) +
                    " lacks rows that the recomputed tokens attend to (stored states keep only "
                    "the last rows of each section in sliding-window layers; use epic or full)");
        }
    }
    std::vector<int32_t> forwarded;
    for (const auto& [b, e] : runs)
        for (int64_t p = b; p < e; ++p)
            forwarded.push_back(static_cast<int32_t>(p));
    std::vector<int64_t> before(static_cast<size_t>(info.n_layer));
    std::vector<int64_t> replaced_before(before.size());
    for (int il = 0; il < info.n_layer; ++il) {
        before[static_cast<size_t>(il)] = memory.layer(il).n_tokens();
        replaced_before[static_cast<size_t>(il)] = assembled(memory, il).rows_recomputed();
    }
    std::vector<int32_t> kept;
    if (o.selector == "cacheblend") {
        run_positions(model, tokens, forwarded, memory, o, pool, cancel, &kept);
    } else {
        run_positions(model, tokens, forwarded, memory, o, pool, cancel, nullptr);
        kept = forwarded;
    }

    AssemblyStats st;
    st.tokens = n_past;
    st.recompute_set = std::ssize(kept);
    st.tokens_forwarded = std::ssize(forwarded);
    for (int il = 0; il < info.n_layer; ++il) {
        auto& kind = info.layers[static_cast<size_t>(il)].sliding() ? st.sliding : st.global;
        const auto i = static_cast<size_t>(il);
        const int64_t replaced = assembled(memory, il).rows_recomputed() - replaced_before[i];
        const int64_t inserted = memory.layer(il).n_tokens() - before[i];
        ++kind.layers;
        kind.rows_recomputed += replaced + inserted;
        kind.rows_reused += before[i] - replaced;
    }
    if (recompute_positions)
        *recompute_positions = std::move(kept);
    return st;
}

} // namespace spanscope
