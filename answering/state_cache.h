// Chunk states of one model in one project: computing them (ingest, resumable at the first
// missing chunk), checking them, and restoring them into a session (docs/linearkv.md, §4).
//
// Per chunk the store keeps the global (full-attention) layers' K and V of the chunk's tokens,
// keys rotated at unit-local positions, and the surprisal of each row. Of the sliding-window
// layers it keeps only what a continuation can still see: the last W-1 rows at the end of the
// unit's last committed chunk (the previous chunk's tail is dropped in the same transaction).
// A blob whose checksum, fingerprint, token ids or shape does not match is never used: the
// unit is recomputed and an event is logged.
#pragma once

#include "engine/linearkv/unit_prefill.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/session/session.h"
#include "storage/chunk_state.h"
#include "storage/project.h"
#include "storage/sekv_state.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace spanscope {

struct IngestProgress {
    int64_t document_id = 0;
    std::string name;
    int unit = 0, units = 0;       ///< unit being prefilled (0-based) of the document's
    int64_t chunk = 0, chunks = 0; ///< chunks committed so far / in the document
    int64_t tokens_done = 0;       ///< tokens computed by this ingest so far
    int64_t tokens_to_do = 0;      ///< tokens this ingest computes in all
    double tokens_per_s = 0;
    double seconds_left = 0;
};

struct IngestResult {
    int64_t tokens = 0; ///< document tokens (all units)
    int64_t chunks = 0;
    int units = 0;
    int64_t tokens_computed = 0;  ///< forward passes run by this ingest (engine count)
    int64_t chunks_reused = 0;    ///< chunks whose state was already stored and valid
    int64_t recomputed_units = 0; ///< units whose stored states were unusable
    int64_t bytes_stored = 0;     ///< state bytes of the document now stored for this model
};

/// How much of a document is chunked and cached for this model.
struct DocumentCacheStatus {
    bool chunked = false;      ///< chunks exist under this model's chunking key
    int64_t tokens = 0;        ///< document tokens (all units)
    int64_t chunks = 0;        ///< chunks in the document
    int64_t chunks_stored = 0; ///< chunks with a stored state for this model (not yet checked)
    int units = 0;
};

/// One unit's states, decoded and checked, ready to restore.
struct UnitStates {
    std::vector<ChunkState> rows; ///< one per chunk
    ChunkState tail;              ///< sliding tail at the unit's end
    /// Hybrid models: every recurrent layer's state at the unit's end (the unit prefilled
    /// from a zero state), kind RecurrentStates; absent for models without recurrent layers.
    std::optional<ChunkState> recurrent;
    std::vector<int64_t> chunk_ids;
};

class StateCache {
public:
    /// chunking.max_unit_tokens must be in [1, the model's context] (else
    /// std::invalid_argument). The fingerprint is computed here (milliseconds). Hybrid models
    /// also store, per chunk, every recurrent layer's state at its end (chunk_state.h kind 3;
    /// Gated DeltaNet without its transition, so `exact` is refused on their units).
    StateCache(Project& project, const Model& model, const ChunkingOptions& chunking);

    const std::string& fingerprint() const { return fingerprint_hex_; }
    /// The model file's identity (model_identity_hex, computed here): what a chat's answers
    /// record as the model that gave them.
    const std::string& model_id() const { return model_id_; }
    const std::string& chunking_key() const { return key_; }

    /// The document's units under this model's tokenizer, chunked (and stored) now if needed.
    /// Stored chunk rows are checked (token ids inside the vocabulary, ranges inside the text,
    /// positions adding up); damaged ones are logged, dropped and cut again.
    /// chunk_ids: [unit][chunk] row ids.
    std::vector<DocumentUnit> units(int64_t document_id,
                                    std::vector<std::vector<int64_t>>* chunk_ids = nullptr);

    /// Chunks and stored states of a document for this model, from the database alone (no
    /// blob is read or checked, nothing is chunked).
    DocumentCacheStatus status(int64_t document_id);

    /// Make every chunk state of the document present and valid: reuses what is stored,
    /// resumes at the first missing chunk of each unit, recomputes units with unusable blobs
    /// (logged). `scratch` is used for the prefill (it is reset). Commits chunk by chunk; the
    /// cache limit never evicts this document's own states while it is ingested. Throws
    /// Cancelled (what was committed stays), ContextOverflow.
    IngestResult ingest(int64_t document_id, Session& scratch,
                        const std::atomic<bool>* cancel = nullptr,
                        const std::function<void(const IngestProgress&)>& progress = {});
    /// The same for one unit (0-based, of units()) of the document: what an answer computes of
    /// a section it chose whose states are missing, leaving the sections it did not choose as
    /// they are. The result's tokens, chunks, units and bytes_stored are the whole document's;
    /// tokens_computed, chunks_reused and recomputed_units this unit's. Progress counts the
    /// document's stored chunks (chunk of chunks) and this unit's tokens (tokens_done of
    /// tokens_to_do). Throws std::out_of_range for a unit the document does not have, and what
    /// ingest() throws.
    IngestResult ingest_unit(int64_t document_id, int unit, Session& scratch,
                             const std::atomic<bool>* cancel = nullptr,
                             const std::function<void(const IngestProgress&)>& progress = {});

    /// Tokens of a unit (from units(): the unit and its chunks' row ids) that ingest_unit would
    /// compute: those after its chunks with a stored state, from the database alone (no blob
    /// is read; a stored blob found unusable then adds its chunks).
    int64_t tokens_to_compute(const DocumentUnit& unit, const std::vector<int64_t>& chunk_ids);

    /// Keep these chunks' states from eviction while this cache lives (the units an answer is
    /// being assembled from).
    void protect(const std::vector<int64_t>& chunk_ids);

    /// Decode and check the states of one unit. Throws StateError (missing or unusable blob;
    /// the message says which chunk and why).
    UnitStates load_unit(int64_t document_id, int unit);
    /// The same for a unit already in hand (from units()): unit and its chunks' row ids.
    UnitStates load_unit(const DocumentUnit& unit, const std::vector<int64_t>& chunk_ids);

    /// Store a unit's rows into `session`'s memory at positions offset + unit-local position
    /// (keys re-rotated by `offset` with each layer's own RoPE frequencies), and a hybrid model's
    /// recurrent states into its recurrent layers, standing for offset + the unit's tokens
    /// (a later unit replaces them: an assembly of several units then sets them with
    /// initialise_recurrent_layers). The caller then calls session.adopt_memory(). Returns the
    /// rows restored into each global layer (the unit's tokens), counted as they are stored.
    /// Marks the states as used.
    int64_t restore_unit(const UnitStates& states, Session& session, int64_t offset);

    /// The unit's SEKV state for these options: the stored one when it is present and valid,
    /// else built from `states` (sekv_unit.h) and stored (a damaged one is logged and
    /// replaced). *built tells which.
    SekvUnitState sekv_state(const DocumentUnit& unit, const std::vector<int64_t>& chunk_ids,
                             const UnitStates& states, const SekvOptions& options,
                             bool* built = nullptr);

    /// The unit's SEKV state for these options when one is stored and valid, else
    /// std::nullopt (nothing is built or logged; a damaged one is replaced by sekv_state()).
    /// damaged: when given, set to why a stored one could not be used ("" when none is
    /// stored). Throws std::invalid_argument for a unit without chunks.
    std::optional<SekvUnitState> stored_sekv_state(const DocumentUnit& unit,
                                                   const std::vector<int64_t>& chunk_ids,
                                                   const SekvOptions& options,
                                                   std::string* damaged = nullptr);

private:
    /// The unit's chunks, from the first, that have a stored state (chunk row ids in order).
    size_t stored_prefix(const std::vector<int64_t>& chunk_ids);
    /// ingest() of the units `only` names (all when it is empty).
    IngestResult ingest_units(int64_t document_id, const std::vector<int>& only, Session& scratch,
                              const std::atomic<bool>* cancel,
                              const std::function<void(const IngestProgress&)>& progress);
    StateExpectation expect_rows(const TextChunk& c) const;
    StateExpectation expect_tail(const DocumentUnit& u) const;
    StateExpectation expect_recurrent(const DocumentUnit& u) const;
    /// Decode rows of chunks [0, n) and the tail of chunk n - 1; throws StateError.
    UnitStates decode(const DocumentUnit& u, const std::vector<int64_t>& ids, size_t n);

    Project& project_;
    const Model& model_;
    ChunkingOptions chunking_;
    Fingerprint fingerprint_{};
    std::string fingerprint_hex_, model_id_, key_;
    std::vector<int> global_, sliding_;
    std::vector<RecurrentLayerShape> recurrent_;
    std::vector<int64_t> protected_;
    int window_ = 0;
};

} // namespace spanscope
