#include "commands.h"

#include "document_loader.h"
#include "project_support.h"
#include "session.h"
#include "state_cache.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace spanscope::cli {

nlohmann::json documents_json(Project& project, const Model* model);

int run_ingest(const IngestOptions& o) {
    install_interrupt_handler();
    auto project = Project::open(resolve_project_path(o.project), /*create=*/true);
    if (o.chunk_tokens > 0)
        set_project_chunk_tokens(*project, o.chunk_tokens);
    auto model = open_model(o.model);
    StateCache cache(*project, *model, chunking_for(*project, *model));
    SessionOptions so;
    so.threads = o.threads;
    Session scratch(*model, so);

    // One bad file never blocks the others (KNOWN-FAILURES 14): each is reported and skipped.
    int failed = 0;
    for (size_t i = 0; i < o.docs.size(); ++i) {
        const auto& path = o.docs[i];
        int64_t id = 0;
        try {
            const auto doc = load_document(path);
            for (const auto& w : doc.warnings)
                std::cerr << path << ": " << w << "\n";
            bool existing = false;
            id = project->add_document(path, doc, &existing);
            if (existing)
                std::cerr << path << ": already in the project as document " << id << "\n";
            const auto r = cache.ingest(id, scratch, &g_interrupted, print_ingest_progress);
            std::cerr << (r.tokens_computed > 0 ? "\n" : "") << path << ": document " << id << ", "
                      << r.tokens << " tokens in " << r.chunks << " chunks (" << r.units
                      << (r.units == 1 ? " unit" : " units") << "), " << r.tokens_computed
                      << " tokens computed, " << r.chunks_reused << " chunks reused, "
                      << human_bytes(r.bytes_stored) << " of states ("
                      << (r.tokens ? r.bytes_stored / r.tokens : 0) << " bytes per token)\n";
        } catch (const Cancelled&) {
            std::cerr << "\ninterrupted: what was committed is kept; run the same command to "
                         "resume\n";
            return 130;
        } catch (const DocumentError& e) {
            std::cerr << "spanscope-cli: " << e.what() << " (skipped)\n";
            ++failed;
        } catch (const std::invalid_argument& e) {
            std::cerr << "spanscope-cli: " << path << ": " << e.what() << " (skipped)\n";
            ++failed;
        }
    }
    if (o.json)
        std::cout << documents_json(*project, model.get()).dump() << "\n";
    return failed ? 1 : 0;
}

} // namespace spanscope::cli
