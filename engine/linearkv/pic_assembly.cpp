#include "engine/linearkv/pic_assembly.h"

#include "engine/linearkv/memory_assembled.h"
#include "engine/memory/memory_recurrent.h"

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

// Document d's state of recurrent layer il (its kind checked against the memory's).
const RecurrentLayerState& state_of(const std::vector<RecurrentLayerState>& states, int il,
                                    RecurrentKind kind, size_t d) {
    for (const auto& st : states)
        if (st.layer == il) {
            if ((kind == RecurrentKind::Mamba2 && !st.mamba2) ||
                (kind == RecurrentKind::GatedDeltaNet && !st.gated_deltanet))
                throw std::invalid_argument("document " + std::to_string(d + 1) +
                                            ": the state of recurrent layer " + std::to_string(il) +
                                            " is of another kind");
            return st;
        }
    throw std::invalid_argument("document " + std::to_string(d + 1) +
                                " lacks the state of recurrent layer " + std::to_string(il));
}

// A hybrid model's recompute pass: each run of U on its own (a recurrent layer takes
// consecutive positions only), the recurrent layers moved to the run's first position with the
// conv tail of the policy; afterwards the layers stand for the whole context again, with the
// tail they started the pass with (the initialiser's) unless the last run ended the context.
void run_recurrent_runs(const Model& model, const std::vector<int32_t>& tokens,
                        const std::vector<std::pair<int64_t, int64_t>>& runs,
                        const std::vector<int64_t>& starts, ModelMemory& memory,
                        const RecomputeOptions& o, ThreadPool& pool,
                        const std::atomic<bool>* cancel,
                        const std::vector<const std::vector<RecurrentLayerState>*>* doc_states) {
    const auto& info = model.info();
    const auto n_past = std::ssize(tokens);
    std::vector<int> rec;
    for (int il = 0; il < info.n_layer; ++il)
        if (info.layers[static_cast<size_t>(il)].recurrent())
            rec.push_back(il);
    auto tail = [&](int il) -> std::vector<float>& {
        auto& rm = memory.recurrent(il);
        return rm.kind() == RecurrentKind::Mamba2 ? rm.mamba2().conv : rm.gated_deltanet().conv;
    };
    std::vector<std::vector<float>> initial_tail;
    for (const int il : rec)
        initial_tail.push_back(tail(il));
    if (o.selector == "full")
        for (const int il : rec)
            memory.recurrent(il).clear(); // every token from position 0: a cold prefill
    int64_t last_end = n_past;
    for (const auto& [b, e] : runs) {
        if (b >= e)
            continue;
        const auto d = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), b) -
                                           starts.begin() - 1);
        for (const int il : rec) {
            memory.recurrent(il).reposition(b);
            if (o.selector == "full" || b != starts[d])
                continue;
            if (o.conv_tail == ConvTailPolicy::Zero)
                std::fill(tail(il).begin(), tail(il).end(), 0.0f);
            else if (o.conv_tail == ConvTailPolicy::Previous && d > 0)
                tail(il) =
                    state_of(*(*doc_states)[d - 1], il, memory.recurrent(il).kind(), d - 1).conv();
        }
        std::vector<int32_t> positions(static_cast<size_t>(e - b));
        std::iota(positions.begin(), positions.end(), static_cast<int32_t>(b));
        run_positions(model, tokens, positions, memory, o, pool, cancel, nullptr);
        last_end = e;
    }
    for (size_t i = 0; i < rec.size(); ++i) {
        if (last_end != n_past)
            tail(rec[i]) = initial_tail[i];
        memory.recurrent(rec[i]).reposition(n_past);
    }
}

} // namespace

ModelMemory make_assembled_memory(const ModelInfo& info, int64_t capacity, bool track_transition) {
    const auto n = info.layers.size();
    std::vector<std::unique_ptr<LayerMemory>> attention(n);
    std::vector<std::unique_ptr<RecurrentMemory>> recurrent(n);
    for (size_t il = 0; il < n; ++il) {
        const auto& li = info.layers[il];
        if (li.kind == LayerKind::Mamba2)
            recurrent[il] = std::make_unique<RecurrentMemory>(li.mamba2);
        else if (li.kind == LayerKind::GatedDeltaNet)
            recurrent[il] = std::make_unique<RecurrentMemory>(li.gated_deltanet, track_transition);
        else
            attention[il] = std::make_unique<AssembledMemory>(li.attn, capacity);
    }
    if (!info.hybrid())
        return ModelMemory(std::move(attention));
    return ModelMemory(std::move(attention), std::move(recurrent));
}

CachedDocument prefill_document(const Model& model, const std::vector<int32_t>& tokens,
                                ThreadPool& pool, int64_t ubatch, const std::atomic<bool>* cancel,
                                bool track_transition) {
    if (tokens.empty())
        throw std::invalid_argument("a document needs at least one token");
    if (ubatch < 1)
        throw std::invalid_argument("ubatch must be at least 1");
    const auto n = static_cast<int64_t>(tokens.size());
    if (n > model.info().n_ctx_train)
        throw std::length_error("the document's " + std::to_string(n) +
                                " tokens exceed the context window of " +
                                std::to_string(model.info().n_ctx_train));
    const auto& info = model.info();
    ModelMemory memory = make_assembled_memory(info, n, track_transition);
    std::vector<int32_t> pos(tokens.size());
    std::iota(pos.begin(), pos.end(), 0);
    for (int64_t b = 0; b < n; b += ubatch) {
        const int64_t m = std::min(ubatch, n - b);
        model.forward(tokens.data() + b, pos.data() + b, m, memory, {}, nullptr, pool, nullptr,
                      cancel);
    }
    CachedDocument d;
    d.tokens = tokens;
    std::vector<int> layers;
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        if (!li.recurrent()) {
            layers.push_back(il);
            continue;
        }
        RecurrentLayerState st;
        st.layer = il;
        const auto& rm = memory.recurrent(il);
        if (rm.kind() == RecurrentKind::Mamba2)
            st.mamba2 = rm.mamba2();
        else
            st.gated_deltanet = rm.gated_deltanet();
        d.states.push_back(std::move(st));
    }
    d.rows = export_rows(memory, layers, 0, static_cast<int32_t>(n));
    return d;
}

const std::vector<std::string>& conv_tail_policy_names() {
    static const std::vector<std::string> kNames = {"same", "previous", "zero"};
    return kNames;
}

ConvTailPolicy parse_conv_tail_policy(const std::string& name) {
    const auto& names = conv_tail_policy_names();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
        throw std::invalid_argument("unknown conv-tail policy '" + name +
                                    "' (same, previous, zero)");
    return static_cast<ConvTailPolicy>(it - names.begin());
}

const std::string& conv_tail_policy_name(ConvTailPolicy policy) {
    const auto i = static_cast<size_t>(policy);
    if (i >= conv_tail_policy_names().size())
        throw std::invalid_argument("conv-tail policy out of range");
    return conv_tail_policy_names()[i];
}

const std::string& state_initialiser_name(StateInitialiser initialiser) {
    const auto i = static_cast<size_t>(initialiser);
    if (i >= state_initialiser_names().size())
        throw std::invalid_argument("state initialiser out of range");
    return state_initialiser_names()[i];
}

double
initialise_recurrent_layers(const ModelInfo& info, ModelMemory& memory,
                            const std::vector<const std::vector<RecurrentLayerState>*>& doc_states,
                            StateInitialiser initialiser, int64_t n_past) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto* d : doc_states)
        if (!d)
            throw std::invalid_argument("initialise_recurrent_layers: a missing document");
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        if (!li.recurrent())
            continue;
        auto& rm = memory.recurrent(il);
        if (rm.kind() == RecurrentKind::Mamba2) {
            std::vector<const Mamba2State*> docs;
            for (size_t d = 0; d < doc_states.size(); ++d)
                docs.push_back(&*state_of(*doc_states[d], il, rm.kind(), d).mamba2);
            rm.mamba2() = mamba2_initial_state(li.mamba2, docs, initialiser);
        } else {
            std::vector<const GatedDeltaNetState*> docs;
            for (size_t d = 0; d < doc_states.size(); ++d)
                docs.push_back(&*state_of(*doc_states[d], il, rm.kind(), d).gated_deltanet);
            rm.gated_deltanet() =
                gated_deltanet_initial_state(li.gated_deltanet, docs, initialiser);
        }
        rm.reposition(n_past);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
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
    if (o.selector == "cacheblend" && info.hybrid())
        throw std::invalid_argument(
            "cacheblend on a hybrid model: its token filter drops most tokens after the check "
            "layer, and a recurrent layer absorbs every token in order (use none, epic or full)");
    if (static_cast<size_t>(o.state_init) >= state_initialiser_names().size())
        throw std::invalid_argument("state initialiser out of range");
    if (static_cast<size_t>(o.conv_tail) >= conv_tail_policy_names().size())
        throw std::invalid_argument("conv-tail policy out of range");
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
                info.layers[static_cast<size_t>(r.layer)].recurrent() || r.pos_begin != 0 ||
                r.n_rows != n)
                throw std::invalid_argument("document " + std::to_string(d + 1) +
                                            ": its rows must cover its " + std::to_string(n) +
                                            " tokens once in every attention layer");
            seen[static_cast<size_t>(r.layer)] = 1;
        }
        if (std::count(seen.begin(), seen.end(), 1) !=
            std::ssize(global_layers(info)) + std::ssize(sliding_layers(info)))
            throw std::invalid_argument("document " + std::to_string(d + 1) +
                                        " lacks the rows of some attention layers");
        for (int il = 0; il < info.n_layer; ++il) {
            const auto& li = info.layers[static_cast<size_t>(il)];
            if (li.recurrent())
                (void)state_of(docs[d]->states, il,
                               li.kind == LayerKind::Mamba2 ? RecurrentKind::Mamba2
                                                            : RecurrentKind::GatedDeltaNet,
                               d);
        }
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
    // Recurrent layers: the initialiser over the documents' states, in context order (`full`
    // restarts them from zero in the pass).
    std::vector<const std::vector<RecurrentLayerState>*> states;
    for (const auto* d : docs)
        states.push_back(&d->states);
    double init_ms = 0;
    if (info.hybrid() && o.selector != "full")
        init_ms = initialise_recurrent_layers(info, a.memory, states, o.state_init, a.n_past);

    a.stats = recompute_documents(model, a.memory, a.tokens, a.starts, o, pool,
                                  &a.recompute_positions, cancel, &states);
    a.stats.init_ms = init_ms;
    a.stats.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return a;
}

AssemblyStats
recompute_documents(const Model& model, ModelMemory& memory, const std::vector<int32_t>& tokens,
                    const std::vector<int64_t>& starts, const RecomputeOptions& o, ThreadPool& pool,
                    std::vector<int32_t>* recompute_positions, const std::atomic<bool>* cancel,
                    const std::vector<const std::vector<RecurrentLayerState>*>* doc_states) {
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
    const bool hybrid = info.hybrid();
    if (hybrid && o.selector == "epic" && o.conv_tail == ConvTailPolicy::Previous &&
        (!doc_states || doc_states->size() != starts.size()))
        throw std::invalid_argument("conv-tail policy previous: the documents' recurrent states "
                                    "are needed");
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        if (li.recurrent())
            continue;
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
        if (info.layers[static_cast<size_t>(il)].recurrent())
            continue;
        before[static_cast<size_t>(il)] = memory.layer(il).n_tokens();
        replaced_before[static_cast<size_t>(il)] = assembled(memory, il).rows_recomputed();
    }
    std::vector<int32_t> kept;
    if (o.selector == "cacheblend") {
        run_positions(model, tokens, forwarded, memory, o, pool, cancel, &kept);
    } else if (!hybrid) {
        run_positions(model, tokens, forwarded, memory, o, pool, cancel, nullptr);
        kept = forwarded;
    } else {
        run_recurrent_runs(model, tokens, runs, starts, memory, o, pool, cancel, doc_states);
        kept = forwarded;
    }

    AssemblyStats st;
    st.tokens = n_past;
    st.recompute_set = std::ssize(kept);
    st.tokens_forwarded = std::ssize(forwarded);
    for (int il = 0; il < info.n_layer; ++il) {
        if (info.layers[static_cast<size_t>(il)].recurrent()) {
            ++st.recurrent.layers;
            st.recurrent.rows_recomputed += std::ssize(forwarded);
            st.recurrent.rows_reused += o.selector == "full" ? 0 : n_past;
            continue;
        }
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
