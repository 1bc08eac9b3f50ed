// The sources of an answer as spanscope-cli prints them: numbered lines under the answer, and
// the "sources" array of ask --json (answering/answer_sources.h).
#pragma once

#include "storage/project.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace spanscope::cli {

/// A cited document as the user knows it: its name and format ("docx", "pdf", …).
struct CitedDocument {
    std::string name, format;
};

/// "\nSources:\n  [1] PLACE (42%): EXCERPT\n…" (source_citation); nothing for no sources.
void print_sources(std::ostream& out, const std::vector<SourceRecord>& sources,
                   const std::function<CitedDocument(int64_t)>& document_of);

/// [{document_id, document, start_char, end_char, page, line, share, excerpt}], top first.
nlohmann::json sources_json(const std::vector<SourceRecord>& sources,
                            const std::function<CitedDocument(int64_t)>& document_of);

} // namespace spanscope::cli
