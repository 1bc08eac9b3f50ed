#include "app/cli/cli_sources.h"

#include "answering/answer_sources.h"

namespace spanscope::cli {

void print_sources(std::ostream& out, const std::vector<SourceRecord>& sources,
                   const std::function<CitedDocument(int64_t)>& document_of) {
    if (sources.empty())
        return;
    out << "\nSources:\n";
    for (size_t i = 0; i < sources.size(); ++i) {
        const auto& s = sources[i];
        const auto d = document_of(s.document_id);
        out << "  [" << i + 1 << "] "
            << source_citation(s, source_place(d.name, d.format, s.page, s.line)) << "\n";
    }
}

nlohmann::json sources_json(const std::vector<SourceRecord>& sources,
                            const std::function<CitedDocument(int64_t)>& document_of) {
    auto out = nlohmann::json::array();
    for (const auto& s : sources)
        out.push_back({{"document_id", s.document_id},
                       {"document", document_of(s.document_id).name},
                       {"start_char", s.start_char},
                       {"end_char", s.end_char},
                       {"page", s.page},
                       {"line", s.line},
                       {"share", s.share},
                       {"excerpt", s.excerpt}});
    return out;
}

} // namespace spanscope::cli
