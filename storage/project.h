// A Spanscope project: one SQLite file (*.spanscope) holding documents (source path, content
// hash, extracted text, offset map), their chunks per tokenizer, chunk states per model
// (chunk_state.h blobs), chats with their messages, settings, an event log, and room for the
// SEKV segmentation and zoom traces (docs/architecture.md, Storage).
//
// WAL journal, foreign keys on, a busy timeout; every write is a short transaction, so a killed
// process leaves a database that opens and holds every committed chunk. The schema carries a
// version and is upgraded by numbered migrations (schema.cpp).
#pragma once

#include "engine/text/chunking.h"
#include "storage/chunk_state.h"
#include "storage/document_loader.h"
#include "storage/sqlite_db.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spanscope {

/// A project file that cannot be used (empty, truncated, not SQLite, not a Spanscope project,
/// from a newer version, damaged). The message names the file and says that nothing was
/// changed. sqlite_code(): SQLite's extended result code where SQLite refused it (reading its
/// schema version or migrating it), 0 where Spanscope's own checks did.
class ProjectError : public std::runtime_error {
public:
    explicit ProjectError(const std::string& what, int sqlite_code = 0)
        : std::runtime_error(what), sqlite_code_(sqlite_code) {}
    int sqlite_code() const { return sqlite_code_; }

private:
    int sqlite_code_;
};

struct DocumentRecord {
    int64_t id = 0;
    int64_t position = 0; ///< project order
    std::string path, name, format, encoding, content_hash, added_at;
    int64_t text_bytes = 0;
    std::vector<std::string> warnings;
    std::vector<int32_t> ocr_pages; ///< PDF pages read by OCR (1-based, ascending)
};

/// Tokens and chunks of a document under one chunking key (model_fingerprint.h).
struct ChunkingSummary {
    int64_t tokens = 0;
    int64_t chunks = 0;
    int units = 0;
};

/// A unit (section) of a document that matched a full-text query.
struct UnitMatch {
    int64_t document_id = 0;
    int unit = 0;    ///< 0-based, as stored in chunks.unit
    double bm25 = 0; ///< Okapi BM25, negated (search_units): lower is more relevant
};

/// Per-token sources are read for answer tokens 0 .. kMaxSourceTokenIndex - 1 only (a row of a
/// later token, which no answer has, is not read: a damaged file cannot make the reader
/// allocate for it).
inline constexpr int64_t kMaxSourceTokenIndex = 1 << 16;

/// A passage an answer drew on (its source), as saved with the message.
struct SourceRecord {
    int64_t document_id = 0;
    int64_t start_char = 0, end_char = 0; ///< bytes [start, end) of the document's text
    int32_t page = 0;                     ///< 1-based PDF page of start_char; 0: none
    int32_t line = 0;                     ///< the anchor's line (paragraph for DOCX, ODT)
    double share = 0; ///< of the answer's attention over its documents' passages, in [0, 1]
    std::string excerpt;
};

struct MessageRecord {
    int64_t id = 0;
    std::string role; ///< "user" or "assistant"
    std::string text;
    std::string stats_json; ///< assistant messages: the answer's statistics
    std::string created_at;
    std::vector<SourceRecord> sources; ///< assistant messages: top source first
    /// assistant messages: each answer token's own top sources ([tokens][top first]; empty
    /// when none were saved; tokens after the last one with sources are not there).
    std::vector<std::vector<SourceRecord>> token_sources;
};

struct ChatRecord {
    int64_t id = 0;
    std::string title, created_at;
    int64_t messages = 0;
};

struct ProjectInfo {
    std::string path;
    int schema_version = 0;
    int64_t file_bytes = 0; ///< database file (without the WAL)
    int64_t documents = 0, chats = 0, messages = 0;
    /// chunks: rows of every chunking (one per tokenizer: a document read by two models
    /// counts twice; PerModel::chunks splits them)
    int64_t chunks = 0, states = 0;
    int64_t state_bytes = 0; ///< all chunk state blobs
    int64_t cache_limit_bytes = 0;
    struct PerModel {
        std::string fingerprint;
        std::string name; ///< the model's name (name_model), "" when not recorded
        int64_t states = 0, bytes = 0, tokens = 0; ///< tokens: rows of attention-row states
        int64_t chunks = 0;                        ///< chunks with a state for this model
    };
    std::vector<PerModel> models; ///< in the order their first stored state was written
};

class Project {
public:
    /// Open `path`; create: make a new project when the file does not exist (parent
    /// directories included). Throws ProjectError with a clear message for a 0-byte, truncated,
    /// damaged, foreign or newer file — never writes to such a file — and DbError
    /// (SQLITE_BUSY) when another connection holds the file locked for 5 s.
    static std::unique_ptr<Project> open(const std::string& path, bool create);
    ~Project();

    const std::string& path() const { return db_->path(); }
    int schema_version();
    Db& db() { return *db_; }

    // Documents ------------------------------------------------------------------------------
    enum class AddOutcome { Added, Unchanged, Updated };
    /// Add a loaded document (in one transaction); returns its id. Content already in the
    /// project is not added again (Unchanged: that document's id). A document from the same
    /// source path with other content is updated in place: new text, its chunks and states
    /// dropped (Updated). The name shown to the model is the file name, non-UTF-8 bytes as '?'.
    int64_t add_document(const std::string& source_path, const LoadedDocument& doc,
                         AddOutcome* outcome = nullptr);
    std::vector<DocumentRecord> documents();
    std::optional<DocumentRecord> document(int64_t id);
    /// The extracted text, checked against its content hash. Throws ProjectError for an
    /// unknown id or damaged text (the message says how to replace it).
    std::string document_text(int64_t id);
    std::vector<SourceAnchor> document_offset_map(int64_t id);
    /// Delete a document with its chunks and states (chats keep their messages).
    /// Returns false when there is no such document.
    bool remove_document(int64_t id);

    // Chunks ---------------------------------------------------------------------------------
    bool has_chunks(int64_t document_id, const std::string& key);
    /// Store the chunks of every unit and each unit's text in the full-text index (one
    /// transaction); false (and nothing written) when the document already has chunks under
    /// this key. Throws std::invalid_argument (nothing written) for a unit without chunks or
    /// whose chunks' byte ranges lie outside the document's text.
    bool insert_chunks(int64_t document_id, const std::string& key,
                       const std::vector<DocumentUnit>& units);
    /// The units as stored (tokens, offsets, ranges); chunk_ids receives [unit][chunk] row ids.
    /// Throws ProjectError when a row is damaged (checksum, sequence, sizes).
    std::vector<DocumentUnit> load_units(int64_t document_id, const std::string& key,
                                         std::vector<std::vector<int64_t>>* chunk_ids = nullptr);
    std::optional<ChunkingSummary> chunking_summary(int64_t document_id, const std::string& key);

    // Full-text search -----------------------------------------------------------------------
    /// The units of `document_ids` chunked under `key` whose text contains any word of
    /// `question` (fts_match_expression), most relevant first: ascending Okapi BM25 (Robertson &
    /// Zaragoza 2009) with FTS5's bm25() constants (k1 = 1.2, b = 0.75, negated) and Lucene's
    /// idf, ln(1 + (N - n + 0.5) / (n + 0.5)) (FTS5's gives a word held by half the units or
    /// more no weight), with the collection statistics (units N, mean length, units n holding
    /// each word) of this chunking's units alone — a document chunked for two models is one
    /// document, not two — ties by document id and unit. The index holds each unit's text under the
    /// porter stemmer and unicode61 folding (case, diacritics). A question without words (English
    /// function words, NLTK's stop-word list, do not count) returns nothing; no question raises an
    /// SQL error. Throws DbError when SQLite's FTS5 cannot take the ranking function, ProjectError
    /// when the index's row sizes are damaged.
    std::vector<UnitMatch> search_units(const std::vector<int64_t>& document_ids,
                                        const std::string& key, const std::string& question);

    // Chunk states ---------------------------------------------------------------------------
    /// Delete the document's chunks under this key (their states go with them).
    void delete_chunks(int64_t document_id, const std::string& key);
    /// Record the name of the model whose states carry `fingerprint` (its general.name, else
    /// the file's name), so that project summaries can name it; written once per name.
    void name_model(const std::string& fingerprint, const std::string& name);
    bool has_state(int64_t chunk_id, const std::string& fingerprint, StateKind kind);
    /// Whether the chunk has a state of this kind under a fingerprint other than `fingerprint`
    /// (another model file, or states computed before the engine's numerics changed).
    bool has_state_of_other_fingerprint(int64_t chunk_id, const std::string& fingerprint,
                                        StateKind kind);
    std::optional<std::vector<uint8_t>> state_blob(int64_t chunk_id, const std::string& fingerprint,
                                                   StateKind kind);
    /// Commit a chunk's attention-row state and its sliding tail (and, for a hybrid model, its
    /// recurrent states: recurrent_blob, or nullptr), and drop the tail and recurrent states of
    /// the unit's previous chunk (drop_tail_of, or 0) — one transaction.
    void commit_chunk_state(int64_t chunk_id, const std::string& fingerprint,
                            const std::vector<uint8_t>& rows_blob,
                            const std::vector<uint8_t>& tail_blob, int64_t drop_tail_of,
                            const std::vector<uint8_t>* recurrent_blob = nullptr);
    /// Bytes of the stored states of these chunks for this model.
    int64_t state_bytes(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint);
    /// Delete every state of these chunks for this model (before recomputing them).
    void delete_states(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint);
    /// Mark states as used now (least-recently-used eviction).
    void touch_states(const std::vector<int64_t>& chunk_ids, const std::string& fingerprint);
    /// The SEKV state (sekv_state.h) of the unit whose first chunk is chunk_id, built for this
    /// model with these options; std::nullopt when none is stored.
    std::optional<std::vector<uint8_t>> sekv_state_blob(int64_t chunk_id,
                                                        const std::string& fingerprint,
                                                        const std::string& options_key);
    /// Store (or replace) that SEKV state. It goes with the unit's chunk states: deleting or
    /// evicting them deletes it.
    void put_sekv_state(int64_t chunk_id, const std::string& fingerprint,
                        const std::string& options_key, const std::vector<uint8_t>& blob);
    /// Evict whole units' states, least recently used first, until the states fit the cache
    /// limit; never the chunks in `keep`. Returns the bytes evicted.
    int64_t evict_to_limit(const std::vector<int64_t>& keep = {});

    // Chats ----------------------------------------------------------------------------------
    int64_t create_chat(const std::string& title);
    bool has_chat(int64_t chat_id);
    int64_t add_message(int64_t chat_id, const std::string& role, const std::string& text,
                        const std::string& stats_json = "");
    /// The same with the answer's zoom trace (zoom_trace_blob.h), its sources (top first) and
    /// each of its tokens' ([tokens][top first]), in one transaction; an empty trace stores
    /// none. Throws std::invalid_argument for a source whose range is empty or negative or
    /// whose share lies outside [0, 1] (nothing is written).
    int64_t add_message(int64_t chat_id, const std::string& role, const std::string& text,
                        const std::string& stats_json, const std::vector<uint8_t>& zoom_trace,
                        const std::vector<SourceRecord>& sources = {},
                        const std::vector<std::vector<SourceRecord>>& token_sources = {});
    /// The zoom trace kept with a message, std::nullopt when it has none.
    std::optional<std::vector<uint8_t>> zoom_trace(int64_t message_id);
    std::vector<MessageRecord> messages(int64_t chat_id);
    /// Every chat, oldest first, with its number of messages.
    std::vector<ChatRecord> chats();
    /// False when there is no such chat. Throws std::invalid_argument for a blank title.
    bool rename_chat(int64_t chat_id, const std::string& title);
    /// Delete a chat with its messages (and their zoom traces); false when there is none.
    bool delete_chat(int64_t chat_id);

    // Settings, events, maintenance ------------------------------------------------------------
    int64_t cache_limit_bytes();
    void set_cache_limit_bytes(int64_t bytes);
    void log_event(const std::string& kind, const std::string& message);
    std::vector<std::pair<std::string, std::string>> events(); ///< (kind, message), oldest first
    ProjectInfo info();
    void vacuum();

private:
    explicit Project(std::unique_ptr<Db> db);
    std::unique_ptr<Db> db_;
    bool ranking_registered_ = false; ///< search_units' FTS5 functions are on db_
};

/// The FTS5 query for the words of `question` (UTF-8): each word (a run of ASCII letters and
/// digits or non-ASCII bytes) once, case-folded duplicates and English function words (NLTK's
/// stop-word list) dropped, as a quoted FTS5 string, joined by OR — e.g. `"NEAR" OR "x"` for
/// `what NEAR(x*)?`. Quoting makes operators, column filters, '*', '^' and quotes plain text.
/// Empty when the question has no other word.
std::string fts_match_expression(const std::string& question);

/// The default cache limit for chunk states: 8 GiB.
constexpr int64_t kDefaultCacheLimitBytes = int64_t{8} << 30;

/// The default project file: $XDG_DATA_HOME/spanscope/projects/default.spanscope (XDG_DATA_HOME
/// defaults to ~/.local/share). A --project value without a '/' names a project in that
/// directory (".spanscope" is added when missing); a value with a '/' is a path, used as given.
std::string resolve_project_path(const std::string& value);

} // namespace spanscope
