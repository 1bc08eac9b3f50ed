#include "answering/state_cache.h"

#include "answering/sekv_unit.h"

#include "engine/memory/kv_rows.h"

#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace spanscope {

namespace {
using Clock = std::chrono::steady_clock;
}

StateCache::StateCache(Project& project, const Model& model, const ChunkingOptions& chunking)
    : project_(project), model_(model), chunking_(chunking), fingerprint_(model_fingerprint(model)),
      fingerprint_hex_(fingerprint_hex(fingerprint_)), model_id_(model_identity_hex(model)),
      key_(spanscope::chunking_key(model, chunking)), global_(global_layers(model.info())),
      sliding_(sliding_layers(model.info())), recurrent_(recurrent_layer_shapes(model.info())) {
    if (global_.empty())
        throw std::invalid_argument("project stores need a global attention layer");
    if (chunking.max_unit_tokens < 1 || chunking.max_unit_tokens > model.info().n_ctx_train)
        throw std::invalid_argument("a unit of " + std::to_string(chunking.max_unit_tokens) +
                                    " tokens does not fit the model's context of " +
                                    std::to_string(model.info().n_ctx_train));
    for (const int il : sliding_) {
        const int w = model.info().layers[static_cast<size_t>(il)].attn.window;
        if (window_ != 0 && w != window_)
            throw std::invalid_argument("sliding layers with different windows are not supported");
        window_ = w;
    }
}

namespace {
// Why stored chunk rows cannot be what build_document_units made, or "" when they can.
std::string damaged_chunks(const std::vector<DocumentUnit>& units, int64_t text_bytes,
                           int32_t n_vocab) {
    for (const auto& u : units) {
        int64_t pos = 0;
        for (const auto& c : u.chunks) {
            if (c.token_begin != pos || c.tokens.empty())
                return "token positions do not add up";
            pos = c.token_end();
            if (c.char_begin < 0 || c.char_begin > c.char_end || c.char_end > text_bytes)
                return "a character range lies outside the text";
            for (const auto t : c.tokens)
                if (t < 0 || t >= n_vocab)
                    return "a token id lies outside the vocabulary";
            for (const auto ch : c.token_chars)
                if (ch < -1 || ch >= text_bytes)
                    return "a token offset lies outside the text";
        }
    }
    return units.empty() ? "no chunks" : "";
}
} // namespace

DocumentCacheStatus StateCache::status(int64_t document_id) {
    DocumentCacheStatus st;
    const auto summary = project_.chunking_summary(document_id, key_);
    if (!summary)
        return st;
    st.chunked = true;
    st.tokens = summary->tokens;
    st.chunks = summary->chunks;
    st.units = summary->units;
    auto q = project_.db().prepare(
        "SELECT count(*) FROM chunks c JOIN chunk_states s ON s.chunk_id = c.id AND s.kind = ? "
        "AND s.fingerprint = ? WHERE c.document_id = ? AND c.chunking = ?");
    q.bind(1, static_cast<int64_t>(StateKind::AttentionRows))
        .bind(2, fingerprint_hex_)
        .bind(3, document_id)
        .bind(4, key_);
    q.step();
    st.chunks_stored = q.int64(0);
    return st;
}

std::vector<DocumentUnit> StateCache::units(int64_t document_id,
                                            std::vector<std::vector<int64_t>>* chunk_ids) {
    const auto doc = project_.document(document_id);
    if (!doc)
        throw ProjectError(project_.path() + ": no document " + std::to_string(document_id));
    for (int attempt = 0;; ++attempt) {
        if (!project_.has_chunks(document_id, key_))
            project_.insert_chunks(document_id, key_,
                                   build_document_units(model_.tokenizer(), doc->name,
                                                        project_.document_text(document_id),
                                                        chunking_));
        std::vector<DocumentUnit> units;
        std::string why;
        try {
            units = project_.load_units(document_id, key_, chunk_ids);
            why = damaged_chunks(units, doc->text_bytes, model_.info().n_vocab);
        } catch (const ProjectError& e) {
            if (attempt > 0)
                throw;
            why = e.what();
        }
        if (why.empty() || attempt > 0)
            return units;
        project_.log_event("rechunked", "document " + std::to_string(document_id) + ": " + why);
        project_.delete_chunks(document_id, key_);
    }
}

void StateCache::protect(const std::vector<int64_t>& chunk_ids) {
    protected_.insert(protected_.end(), chunk_ids.begin(), chunk_ids.end());
}

StateExpectation StateCache::expect_rows(const TextChunk& c) const {
    StateExpectation e;
    e.kind = StateKind::AttentionRows;
    e.fingerprint = fingerprint_;
    e.token_hash = token_ids_hash(c.tokens);
    e.pos_begin = static_cast<int32_t>(c.token_begin);
    e.n_rows = static_cast<int64_t>(c.tokens.size());
    e.layers = global_;
    e.n_kv_head = model_.info().n_head_kv;
    e.head_dim = model_.info().head_dim;
    return e;
}

StateExpectation StateCache::expect_tail(const DocumentUnit& u) const {
    // The tail after the unit's chunks so far: u may be a prefix of the unit.
    StateExpectation e;
    e.kind = StateKind::SlidingTail;
    e.fingerprint = fingerprint_;
    const int64_t end = u.n_tokens();
    const int64_t begin = sliding_.empty() ? end : std::max<int64_t>(0, end - (window_ - 1));
    // The tail is tied to every token id it covers and to the last chunk's ids.
    std::vector<int32_t> ids;
    for (const auto& c : u.chunks)
        ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    e.token_hash = token_ids_hash(ids);
    e.pos_begin = static_cast<int32_t>(begin);
    e.n_rows = end - begin;
    e.layers = sliding_;
    e.n_kv_head = model_.info().n_head_kv;
    e.head_dim = model_.info().head_dim;
    return e;
}

StateExpectation StateCache::expect_recurrent(const DocumentUnit& u) const {
    // The states after the unit's chunks so far, tied to every token id they absorbed.
    StateExpectation e;
    e.kind = StateKind::RecurrentStates;
    e.fingerprint = fingerprint_;
    std::vector<int32_t> ids;
    for (const auto& c : u.chunks)
        ids.insert(ids.end(), c.tokens.begin(), c.tokens.end());
    e.token_hash = token_ids_hash(ids);
    e.n_rows = u.n_tokens();
    e.recurrent = recurrent_;
    return e;
}

UnitStates StateCache::decode(const DocumentUnit& u, const std::vector<int64_t>& ids, size_t n) {
    UnitStates s;
    s.chunk_ids.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n));
    for (size_t c = 0; c < n; ++c) {
        const auto blob = project_.state_blob(ids[c], fingerprint_hex_, StateKind::AttentionRows);
        if (!blob)
            throw StateError("chunk " + std::to_string(c) + " has no stored state");
        try {
            s.rows.push_back(
                decode_chunk_state(blob->data(), blob->size(), expect_rows(u.chunks[c])));
        } catch (const StateError& e) {
            throw StateError("chunk " + std::to_string(c) + ": " + e.what());
        }
    }
    if (n > 0) {
        const auto blob = project_.state_blob(ids[n - 1], fingerprint_hex_, StateKind::SlidingTail);
        if (!blob)
            throw StateError("chunk " + std::to_string(n - 1) + " has no stored sliding tail");
        DocumentUnit prefix;
        prefix.chunks.assign(u.chunks.begin(), u.chunks.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            s.tail = decode_chunk_state(blob->data(), blob->size(), expect_tail(prefix));
        } catch (const StateError& e) {
            throw StateError("chunk " + std::to_string(n - 1) + " tail: " + e.what());
        }
        if (!recurrent_.empty()) {
            const auto rb =
                project_.state_blob(ids[n - 1], fingerprint_hex_, StateKind::RecurrentStates);
            if (!rb)
                throw StateError("chunk " + std::to_string(n - 1) +
                                 " has no stored recurrent states");
            try {
                s.recurrent = decode_chunk_state(rb->data(), rb->size(), expect_recurrent(prefix));
            } catch (const StateError& e) {
                throw StateError("chunk " + std::to_string(n - 1) +
                                 " recurrent states: " + e.what());
            }
        }
    }
    return s;
}

UnitStates StateCache::load_unit(int64_t document_id, int unit) {
    std::vector<std::vector<int64_t>> ids;
    const auto us = units(document_id, &ids);
    if (unit < 0 || unit >= static_cast<int>(us.size()))
        throw std::invalid_argument("document " + std::to_string(document_id) + " has no unit " +
                                    std::to_string(unit));
    return load_unit(us[static_cast<size_t>(unit)], ids[static_cast<size_t>(unit)]);
}

UnitStates StateCache::load_unit(const DocumentUnit& unit, const std::vector<int64_t>& chunk_ids) {
    return decode(unit, chunk_ids, unit.chunks.size());
}

int64_t StateCache::restore_unit(const UnitStates& states, Session& session, int64_t offset) {
    auto& memory = session.memory();
    const auto& info = model_.info();
    const auto delta = static_cast<int32_t>(offset);
    int64_t restored = 0;
    for (const auto& chunk : states.rows)
        for (const auto& rows : chunk.layers) {
            import_rows(memory, info, rows, delta, session.ubatch());
            if (rows.layer == global_.front())
                restored += rows.n_rows;
        }
    for (const auto& rows : states.tail.layers)
        import_rows(memory, info, rows, delta, session.ubatch());
    if (states.recurrent)
        for (const auto& r : states.recurrent->recurrent) {
            auto& rm = memory.recurrent(r.layer);
            if (r.mamba2)
                rm.mamba2() = *r.mamba2;
            else
                rm.gated_deltanet() = *r.gated_deltanet;
            rm.reposition(offset + states.recurrent->n_rows);
        }
    project_.touch_states(states.chunk_ids, fingerprint_hex_);
    return restored;
}

std::optional<SekvUnitState> StateCache::stored_sekv_state(const DocumentUnit& unit,
                                                           const std::vector<int64_t>& chunk_ids,
                                                           const SekvOptions& options,
                                                           std::string* damaged) {
    if (damaged)
        damaged->clear();
    const auto layers = sekv_layers(model_.info(), options);
    const std::string key = sekv_options_key(options, layers);
    if (chunk_ids.empty())
        throw std::invalid_argument("SEKV: a unit without chunks");
    if (auto blob = project_.sekv_state_blob(chunk_ids.front(), fingerprint_hex_, key)) {
        SekvExpectation e;
        e.fingerprint = fingerprint_;
        e.options_key = key;
        e.n_tokens = unit.n_tokens();
        e.layers = layers;
        e.n_kv_head = model_.info().n_head_kv;
        e.head_dim = model_.info().head_dim;
        try {
            return decode_sekv_state(blob->data(), blob->size(), e);
        } catch (const StateError& err) {
            // Left for sekv_state() to log and replace when the unit is used.
            if (damaged)
                *damaged = err.what();
        }
    }
    return std::nullopt;
}

SekvUnitState StateCache::sekv_state(const DocumentUnit& unit,
                                     const std::vector<int64_t>& chunk_ids,
                                     const UnitStates& states, const SekvOptions& options,
                                     bool* built) {
    if (built)
        *built = false;
    std::string damaged;
    if (auto stored = stored_sekv_state(unit, chunk_ids, options, &damaged))
        return std::move(*stored);
    if (!damaged.empty())
        project_.log_event("recomputed", "SEKV state of chunk " +
                                             std::to_string(chunk_ids.front()) + ": " + damaged);
    auto st = build_sekv_unit(unit, states, model_.info(), options);
    project_.put_sekv_state(chunk_ids.front(), fingerprint_hex_,
                            sekv_options_key(options, sekv_layers(model_.info(), options)),
                            encode_sekv_state(st, fingerprint_));
    if (built)
        *built = true;
    return st;
}

size_t StateCache::stored_prefix(const std::vector<int64_t>& chunk_ids) {
    size_t r = 0;
    while (r < chunk_ids.size() &&
           project_.has_state(chunk_ids[r], fingerprint_hex_, StateKind::AttentionRows))
        ++r;
    return r;
}

int64_t StateCache::tokens_to_compute(const DocumentUnit& unit,
                                      const std::vector<int64_t>& chunk_ids) {
    const size_t r = stored_prefix(chunk_ids);
    return r < unit.chunks.size() ? unit.n_tokens() - unit.chunks[r].token_begin : 0;
}

IngestResult StateCache::ingest(int64_t document_id, Session& scratch,
                                const std::atomic<bool>* cancel,
                                const std::function<void(const IngestProgress&)>& progress) {
    return ingest_units(document_id, {}, scratch, cancel, progress);
}

IngestResult StateCache::ingest_unit(int64_t document_id, int unit, Session& scratch,
                                     const std::atomic<bool>* cancel,
                                     const std::function<void(const IngestProgress&)>& progress) {
    return ingest_units(document_id, {unit}, scratch, cancel, progress);
}

IngestResult StateCache::ingest_units(int64_t document_id, const std::vector<int>& only,
                                      Session& scratch, const std::atomic<bool>* cancel,
                                      const std::function<void(const IngestProgress&)>& progress) {
    std::vector<std::vector<int64_t>> ids;
    const auto us = units(document_id, &ids);
    for (const int u : only)
        if (u < 0 || u >= std::ssize(us))
            throw std::out_of_range("document " + std::to_string(document_id) +
                                    " has no unit index " + std::to_string(u) +
                                    " (0-based; it has " + std::to_string(us.size()) + " units)");
    auto wanted = [&](size_t ui) {
        return only.empty() ||
               std::find(only.begin(), only.end(), static_cast<int>(ui)) != only.end();
    };
    const auto doc = project_.document(document_id);
    IngestResult res;
    res.units = static_cast<int>(us.size());
    std::vector<int64_t> keep = protected_;
    for (size_t ui = 0; ui < us.size(); ++ui) {
        res.tokens += us[ui].n_tokens();
        res.chunks += static_cast<int64_t>(us[ui].chunks.size());
        keep.insert(keep.end(), ids[ui].begin(), ids[ui].end());
    }

    // Where each unit resumes: after its chunks with stored states (checked when the unit's
    // turn comes, one unit in memory at a time).
    std::vector<size_t> resume(us.size());
    int64_t to_do = 0;
    for (size_t ui = 0; ui < us.size(); ++ui) {
        const size_t r = stored_prefix(ids[ui]);
        resume[ui] = r; // a unit not wanted: its chunks stored, for the progress count
        if (wanted(ui) && r < us[ui].chunks.size()) {
            to_do += us[ui].n_tokens() - us[ui].chunks[r].token_begin;
            if (project_.has_state_of_other_fingerprint(ids[ui][r], fingerprint_hex_,
                                                        StateKind::AttentionRows))
                project_.log_event(
                    "recomputed",
                    "document " + std::to_string(document_id) + " section " +
                        std::to_string(ui + 1) +
                        ": its stored states were computed under another model fingerprint "
                        "(another "
                        "model file, or an earlier version of the engine's numerics) and are "
                        "computed again");
        }
    }

    const auto t0 = Clock::now();
    const int64_t processed0 = scratch.tokens_processed();
    int64_t committed = 0;
    for (size_t ui = 0; ui < us.size(); ++ui)
        committed += static_cast<int64_t>(resume[ui]);
    for (size_t ui = 0; ui < us.size(); ++ui) {
        if (!wanted(ui))
            continue;
        const auto& u = us[ui];
        size_t first = resume[ui];
        UnitStates loaded;
        if (first > 0) {
            try {
                loaded = decode(u, ids[ui], first);
            } catch (const StateError& e) {
                project_.log_event("recomputed", "document " + std::to_string(document_id) +
                                                     " section " + std::to_string(ui + 1) + ": " +
                                                     e.what());
                project_.delete_states(ids[ui], fingerprint_hex_);
                committed -= static_cast<int64_t>(first);
                to_do += first < u.chunks.size() ? u.chunks[first].token_begin : u.n_tokens();
                first = 0;
                ++res.recomputed_units;
            }
        }
        res.chunks_reused += static_cast<int64_t>(first);
        if (first == u.chunks.size())
            continue;
        project_.name_model(fingerprint_hex_,
                            model_.info().name.empty()
                                ? std::filesystem::path(model_.path()).filename().string()
                                : model_.info().name);
        scratch.reset();
        if (first > 0) {
            restore_unit(loaded, scratch, 0);
            scratch.adopt_memory(u.chunks[first].token_begin);
        }
        loaded = UnitStates{};
        auto report = [&](int64_t, int64_t) {
            if (!progress)
                return;
            IngestProgress p;
            p.document_id = document_id;
            p.name = doc ? doc->name : "";
            p.unit = static_cast<int>(ui);
            p.units = res.units;
            p.chunk = committed;
            p.chunks = res.chunks;
            p.tokens_done = scratch.tokens_processed() - processed0;
            p.tokens_to_do = to_do;
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            p.tokens_per_s = s > 0 ? p.tokens_done / s : 0;
            p.seconds_left = p.tokens_per_s > 0 ? (to_do - p.tokens_done) / p.tokens_per_s : 0;
            progress(p);
        };
        auto on_chunk = [&](size_t c, const std::vector<float>& surprisal,
                            const std::vector<float>&) {
            const auto& chunk = u.chunks[c];
            ChunkState rows = state_header(expect_rows(chunk));
            rows.layers = export_rows(scratch.memory(), global_, rows.pos_begin,
                                      static_cast<int32_t>(chunk.token_end()));
            rows.surprisal = surprisal;
            DocumentUnit prefix;
            prefix.chunks.assign(u.chunks.begin(),
                                 u.chunks.begin() + static_cast<std::ptrdiff_t>(c) + 1);
            ChunkState tail = state_header(expect_tail(prefix));
            tail.layers = export_rows(scratch.memory(), sliding_, tail.pos_begin,
                                      static_cast<int32_t>(chunk.token_end()));
            std::vector<uint8_t> recurrent;
            if (!recurrent_.empty()) {
                ChunkState r = state_header(expect_recurrent(prefix));
                for (const auto& shape : recurrent_) {
                    RecurrentLayerState st;
                    st.layer = shape.layer;
                    const auto& rm = scratch.memory().recurrent(shape.layer);
                    if (shape.mamba2)
                        st.mamba2 = rm.mamba2();
                    else
                        st.gated_deltanet = rm.gated_deltanet();
                    r.recurrent.push_back(std::move(st));
                }
                recurrent = encode_chunk_state(r);
            }
            project_.commit_chunk_state(ids[ui][c], fingerprint_hex_, encode_chunk_state(rows),
                                        encode_chunk_state(tail), c > 0 ? ids[ui][c - 1] : 0,
                                        recurrent_.empty() ? nullptr : &recurrent);
            ++committed;
            project_.evict_to_limit(keep);
            report(0, 0);
        };
        report(0, 0); // the unit starts: a progress bar shows at once
        prefill_unit(scratch, u, first, 0, on_chunk, cancel, report);
    }
    res.tokens_computed = scratch.tokens_processed() - processed0;
    for (size_t ui = 0; ui < us.size(); ++ui)
        res.bytes_stored += project_.state_bytes(ids[ui], fingerprint_hex_);
    return res;
}

} // namespace spanscope
