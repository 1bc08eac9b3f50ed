// libFuzzer target for opening a project file: the input is written to a scratch
// <name>.spanscope of this process's own, opened with Project::open(path, create = false) and
// read as a user's session reads it — the document list, each document's text and offset map,
// its chunkings (units, chunks, summary) and stored chunk states (metadata and blobs), full-text
// search, the chats with their messages, answer sources and zoom traces, the settings (the
// cache limit, the chunk size and the document list, read as answering/ reads them: a damaged
// value gives the default and a warning), the event log and the project summary. The rule: every
// step either succeeds or raises one of the store's documented errors — ProjectError (an unusable
// or damaged project; where SQLite refused underneath, with a damaged file's code), DbError
// (SQLite's own refusal of a damaged file: only the result codes a damaged or unreadable file
// produces, damage_refusal below; SQLITE_MISUSE, SQLITE_RANGE and the like are faults in
// Spanscope's statements and a finding) and, for a zoom trace blob, decode_zoom_trace's
// ZoomTraceError — never crashes, reads out of bounds, hits undefined behaviour or throws anything
// else. The scratch file and its -wal, -shm and -journal are removed after each input. Build and
// run: docs/fuzzing.md.
#include "answering/document_list.h"
#include "answering/project_settings.h"
#include "loader_fuzz_util.h" // ScratchFile
#include "storage/chunk_state.h"
#include "storage/project.h"
#include "storage/zoom_trace_blob.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace spanscope;

volatile size_t sink = 0;

/// Adds each value to the sink on its own, as size_t: a damaged row's numbers may be anything,
/// and their sum in int64_t could overflow (undefined behaviour in the harness, not the store).
void add_one(size_t x) {
    sink = sink + x;
}

template <class... T> void add(T... xs) {
    (add_one(static_cast<size_t>(xs)), ...);
}

void touch(const std::string& s) {
    for (const char c : s)
        sink = sink + static_cast<unsigned char>(c);
}

void touch(const std::vector<uint8_t>& b) {
    for (const uint8_t c : b)
        sink = sink + c;
}

void touch(const std::vector<SourceRecord>& sources) {
    for (const auto& s : sources) {
        add(s.document_id, s.start_char, s.end_char, s.page, s.line);
        touch(s.excerpt);
    }
}

/// Whether SQLite's result `code` (extended; its message `what`) is its refusal of a damaged or
/// unreadable file, by the primary code. The harness opens one connection in one process on a
/// scratch file of its own, and the reads it makes write nothing.
bool damage_refusal(int code, std::string_view what) {
    switch (code & 0xff) {
    case SQLITE_CORRUPT:  // a damaged page, record, index or FTS5 structure
    case SQLITE_NOTADB:   // a damaged header that check_project_file let pass
    case SQLITE_IOERR:    // the system failed to read or write the file: not the statements' fault
    case SQLITE_CANTOPEN: // a header that asks for a -wal or -shm SQLite cannot open
    case SQLITE_FULL:     // no room left where the scratch file lies: not the statements' fault
    case SQLITE_READONLY: // a header write version above 2: SQLite reads the file, refuses writes
    case SQLITE_TOOBIG:   // a cell that declares a payload above SQLite's 1 GB length limit
    case SQLITE_NOMEM:    // a declared payload under that limit, allocated before it is read
        return true;
    case SQLITE_ERROR:
        // A damaged schema: sqlite_master's SQL names other tables or columns than the
        // statements use ("no such column"), gives FTS5 bad arguments ("error in tokenizer
        // constructor", "unrecognized option") or renames a column of an FTS5 shadow table
        // (FTS5 passes on a bare "SQL logic error"); FTS5's own rows ("invalid fts5 file
        // format"); sum() over damaged values ("integer overflow"). A syntax error is never the
        // file's: the statements and the FTS5 queries are Spanscope's text, parsed alike
        // whatever the file holds.
        return what.find("syntax error") == std::string_view::npos;
    default:
        // SQLITE_MISUSE, SQLITE_RANGE (a bind index), SQLITE_INTERNAL: Spanscope's statements.
        // SQLITE_CONSTRAINT, SQLITE_MISMATCH: a write, and these reads write nothing.
        // SQLITE_BUSY, SQLITE_LOCKED, SQLITE_SCHEMA, SQLITE_PROTOCOL: nothing else holds a lock
        // on the scratch file or changes its schema, so these are this process's own doing.
        return false;
    }
}

/// A DbError that is not damage_refusal's is a finding: its code and message, then a trap.
void require_damage_refusal(const DbError& e) {
    if (damage_refusal(e.code(), e.what()))
        return;
    std::fprintf(stderr, "fuzz_project: DbError with result code %d, not a damaged file's: %s\n",
                 e.code(), e.what());
    __builtin_trap();
}

/// A ProjectError that SQLite raised underneath (sqlite_code() != 0: reading the schema version,
/// migrating) must be a damaged file's refusal too; a migration also writes, so a damaged row may
/// break a constraint or a column's type there. Spanscope's own refusals (code 0) all pass.
void require_damage_refusal(const ProjectError& e) {
    const int primary = e.sqlite_code() & 0xff;
    if (e.sqlite_code() == 0 || primary == SQLITE_CONSTRAINT || primary == SQLITE_MISMATCH ||
        damage_refusal(e.sqlite_code(), e.what()))
        return;
    std::fprintf(stderr,
                 "fuzz_project: ProjectError over result code %d, not a damaged file's: %s\n",
                 e.sqlite_code(), e.what());
    __builtin_trap();
}

/// Each step is tried on its own: a damaged table refuses its reads, the others still run.
template <class F> void step(F&& f) {
    try {
        f();
    } catch (const ProjectError& e) {
        require_damage_refusal(e);
    } catch (const DbError& e) {
        require_damage_refusal(e);
    }
}

// At most this many rows of each kind are read further (documents, chunkings, chunks,
// chats), so that one input's time stays bounded.
constexpr size_t kRows = 8;

void read_project(Project& p) {
    std::vector<int64_t> doc_ids;
    std::vector<std::string> chunkings, fingerprints;
    step([&] {
        for (const auto& d : p.documents()) {
            touch(d.path), touch(d.name), touch(d.format), touch(d.encoding);
            touch(d.content_hash), touch(d.added_at);
            for (const auto& w : d.warnings)
                touch(w);
            sink = sink + d.ocr_pages.size() + static_cast<size_t>(d.text_bytes);
            if (doc_ids.size() < kRows)
                doc_ids.push_back(d.id);
        }
    });
    step([&] {
        // The keys the stored chunkings are under (a session knows its own from its model).
        auto q = p.db().prepare("SELECT DISTINCT chunking FROM chunks LIMIT 8");
        while (q.step())
            chunkings.push_back(q.text(0));
    });
    step([&] {
        const ProjectInfo info = p.info();
        add(info.schema_version, info.documents, info.chats, info.messages, info.chunks,
            info.states, info.state_bytes, info.cache_limit_bytes);
        for (const auto& m : info.models) {
            touch(m.name);
            if (fingerprints.size() < kRows)
                fingerprints.push_back(m.fingerprint);
        }
    });
    for (const int64_t id : doc_ids) {
        step([&] {
            if (const auto d = p.document(id))
                touch(d->path);
        });
        step([&] { touch(p.document_text(id)); });
        step([&] {
            for (const auto& a : p.document_offset_map(id))
                add(a.text_offset, a.source_offset, a.page, a.line);
        });
        for (const auto& key : chunkings) {
            step([&] {
                if (const auto s = p.chunking_summary(id, key))
                    add(s->tokens, s->chunks, s->units);
            });
            std::vector<int64_t> chunk_ids;
            step([&] {
                std::vector<std::vector<int64_t>> ids;
                for (const auto& u : p.load_units(id, key, &ids))
                    for (const auto& c : u.chunks) {
                        add(u.index, c.char_begin, c.char_end, c.token_begin);
                        if (c.token_chars.size() != c.tokens.size())
                            __builtin_trap(); // chunking.h: one text offset per token
                        for (size_t i = 0; i < c.tokens.size(); ++i)
                            add(c.tokens[i], c.token_chars[i]);
                    }
                for (const auto& unit : ids)
                    for (const int64_t c : unit)
                        if (chunk_ids.size() < kRows)
                            chunk_ids.push_back(c);
            });
            for (const auto& fp : fingerprints) {
                step([&] { add(p.state_bytes(chunk_ids, fp)); });
                for (const int64_t c : chunk_ids)
                    for (const auto kind : {StateKind::AttentionRows, StateKind::SlidingTail,
                                            StateKind::RecurrentStates})
                        step([&] {
                            sink = sink + p.has_state(c, fp, kind) +
                                   p.has_state_of_other_fingerprint(c, fp, kind);
                            if (const auto blob = p.state_blob(c, fp, kind)) {
                                touch(*blob);
                                add(chunk_state_rows(*blob));
                            }
                        });
            }
        }
    }
    for (const auto& key : chunkings)
        for (const char* question : {"what is the text about", "document \"quote\" NEAR(x*)"})
            step([&] {
                for (const auto& m : p.search_units(doc_ids, key, question))
                    add(m.document_id, m.unit);
            });
    std::vector<int64_t> chat_ids;
    step([&] {
        for (const auto& c : p.chats()) {
            touch(c.title), touch(c.created_at);
            if (chat_ids.size() < kRows)
                chat_ids.push_back(c.id);
        }
    });
    for (const int64_t chat : chat_ids) {
        std::vector<int64_t> message_ids;
        step([&] {
            sink = sink + p.has_chat(chat);
            for (const auto& m : p.messages(chat)) {
                touch(m.role), touch(m.text), touch(m.stats_json), touch(m.created_at);
                touch(m.sources);
                for (const auto& t : m.token_sources)
                    touch(t);
                if (message_ids.size() < kRows)
                    message_ids.push_back(m.id);
            }
        });
        for (const int64_t m : message_ids)
            step([&] {
                if (const auto blob = p.zoom_trace(m)) {
                    try {
                        const StoredZoomTrace t = decode_zoom_trace(*blob);
                        sink = sink + t.sources.size() + t.tokens.size() + t.token_texts.size();
                    } catch (const ZoomTraceError&) {
                        // decode_zoom_trace's refusal of a damaged trace
                    }
                }
            });
    }
    step([&] { add(p.cache_limit_bytes()); });
    step([&] {
        std::string warning;
        const int64_t tokens = project_chunk_tokens(p, &warning);
        if (tokens < 16 || tokens > 8192)
            __builtin_trap(); // project_settings.h: in [16, 8192], 1024 for a damaged value
        touch(warning);
    });
    step([&] {
        std::string warning;
        const DocumentListState list = project_document_list(p, &warning);
        touch(warning);
        // document_list.h: every document of the project once, the excluded ones among them.
        std::set<int64_t> ids;
        for (const auto& d : p.documents())
            ids.insert(d.id);
        const std::set<int64_t> order(list.order.begin(), list.order.end());
        if (order.size() != list.order.size() || order != ids)
            __builtin_trap();
        const std::set<int64_t> excluded(list.excluded.begin(), list.excluded.end());
        if (excluded.size() != list.excluded.size())
            __builtin_trap();
        for (const int64_t id : excluded)
            if (!order.count(id))
                __builtin_trap();
    });
    step([&] {
        for (const auto& [kind, message] : p.events())
            touch(kind), touch(message);
    });
    step([&] { add(p.schema_version()); });
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path;
    {
        const spanscope::fuzz::ScratchFile file("project.spanscope", data, size);
        path = file.path();
        try {
            auto project = Project::open(path, /*create=*/false);
            read_project(*project);
        } catch (const ProjectError& e) {
            // Refused: empty, truncated, not SQLite, not a project, newer, damaged.
            require_damage_refusal(e);
        } catch (const DbError& e) {
            // SQLite's refusal (a damaged page met while opening or migrating).
            require_damage_refusal(e);
        }
    }
    for (const char* suffix : {"-wal", "-shm", "-journal"})
        std::remove((path + suffix).c_str());
    return 0;
}
