#include "app/cli/commands.h"

#include "answering/state_cache.h"
#include "app/cli/project_support.h"
#include "engine/session/session.h"
#include "storage/document_loader.h"

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <filesystem>
#include <iostream>

namespace spanscope::cli {

nlohmann::json documents_json(Project& project, const Model* model);

namespace {
// The project file itself failed (a full disk, an I/O error, no permission to write, another
// program holding it): every further document would fail the same way.
bool project_fault(const DbError& e) {
    switch (e.code() & 0xff) {
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return true;
    default:
        return false;
    }
}

std::string plural(int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A project file this command created, removed when the command ends armed: once the project
// is closed (declared before it, it is destroyed after it), with SQLite's side files.
struct CreatedProject {
    std::string path;
    bool armed = false;
    ~CreatedProject() {
        if (!armed)
            return;
        std::error_code ec;
        for (const char* suffix : {"", "-wal", "-shm", "-journal"})
            std::filesystem::remove(path + suffix, ec);
    }
};
} // namespace

int run_ingest(const IngestOptions& o) {
    install_interrupt_handler();
    // The model first: a command that cannot run creates no project.
    auto model = open_model(o.model, o.backend);
    std::error_code ec;
    CreatedProject created{resolve_project_path(o.project)};
    const bool existed = std::filesystem::exists(created.path, ec);
    auto project = Project::open(created.path, /*create=*/true);
    std::string warning;
    const int64_t chunk_tokens = project_chunk_tokens(*project, &warning);
    if (!warning.empty())
        std::cerr << "note: " << warning << "\n";
    if (o.chunk_tokens > 0 && o.chunk_tokens != chunk_tokens) {
        if (!project->documents().empty())
            std::cerr << "note: chunks of " << o.chunk_tokens << " tokens from now on; the "
                      << "documents already in the project are cut again and recomputed when "
                         "next asked about\n";
        set_project_chunk_tokens(*project, o.chunk_tokens);
    }
    const auto chunking = chunking_for(*project, *model);
    StateCache cache(*project, *model, chunking);
    SessionOptions so;
    so.threads = o.threads;
    Session scratch(*model, so);

    // One bad file never blocks the others (tests/README.md, failure mode 14): each is reported and
    // skipped.
    int failed = 0;
    for (const auto& given : o.docs) {
        const std::string path = std::filesystem::absolute(given).lexically_normal().string();
        try {
            const auto doc = load_document(given, cli_load_options(given));
            clear_progress_line();
            for (const auto& w : doc.warnings)
                std::cerr << given << ": " << w << "\n";
            // Cut it before adding it: a document that cannot be chunked is never stored.
            build_document_units(model->tokenizer(),
                                 std::filesystem::path(path).filename().string(), doc.text,
                                 chunking);
            Project::AddOutcome outcome{};
            const int64_t id = project->add_document(path, doc, &outcome);
            if (outcome == Project::AddOutcome::Unchanged)
                std::cerr << given << ": already in the project as document " << id
                          << " (completing its chunk states if any are missing)\n";
            else if (outcome == Project::AddOutcome::Updated)
                std::cerr << given << ": its text differs from the one stored (the file changed, "
                          << "or this version of Spanscope reads it differently); document " << id
                          << " now holds the new text\n";
            const auto r = cache.ingest(id, scratch, &g_interrupted, print_ingest_progress);
            end_progress_line();
            std::cerr << given << ": document " << id << ", " << plural(r.tokens, "token", "tokens")
                      << " in " << plural(r.chunks, "chunk", "chunks")
                      << (r.units > 1 ? " (" + plural(r.units, "section", "sections") + ")" : "")
                      << "; " << r.tokens_computed << " computed now, "
                      << plural(r.chunks_reused, "chunk", "chunks") << " already stored"
                      << (r.recomputed_units
                              ? "; " + plural(r.recomputed_units, "section", "sections") +
                                    " recomputed (unusable states, see project events)"
                              : "")
                      << "; " << human_bytes(r.bytes_stored) << " of states ("
                      << (r.tokens ? r.bytes_stored / r.tokens : 0) << " bytes per token)\n";
        } catch (const Cancelled&) {
            end_progress_line();
            std::cerr << "interrupted: what was committed is kept; run the same command to "
                         "resume\n";
            return interrupted_exit_code();
        } catch (const DbError& e) {
            clear_progress_line();
            if (!project_fault(e)) {
                std::cerr << "spanscope-cli: " << given << ": " << e.what() << " (skipped)\n";
                ++failed;
                continue;
            }
            // The message names the file and the cause; the documents after it are not tried.
            // A fault that passes (space freed, the other program done) is resumed by the same
            // command; a file that cannot be written or was moved away is not.
            const int code = e.code() & 0xff;
            std::cerr << "spanscope-cli: " << e.what();
            if (code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_BUSY ||
                code == SQLITE_LOCKED)
                std::cerr << "; run the same command again to resume";
            std::cerr << " (" << given << " and the documents after it were not completed)\n";
            return 1;
        } catch (const DocumentError& e) {
            clear_progress_line();
            std::cerr << "spanscope-cli: " << e.what() << " (skipped)\n";
            ++failed;
        } catch (const std::exception& e) {
            clear_progress_line();
            std::cerr << "spanscope-cli: " << given << ": " << e.what() << " (skipped)\n";
            ++failed;
        }
    }
    if (o.json)
        std::cout << documents_json(*project, model.get()).dump() << "\n";
    // Every file refused: a project this command created would hold nothing; it is not kept.
    if (!existed && failed == static_cast<int>(o.docs.size())) {
        created.armed = true;
        std::cerr << "spanscope-cli: no document could be added; " << created.path
                  << " was not created\n";
    }
    return failed ? 1 : 0;
}

} // namespace spanscope::cli
