#include "ui/answer_citations.h"

#include "answering/answer_sources.h"
#include "storage/project.h"

#include <algorithm>

namespace spanscope::gui {

QList<Citation> citations_of(const std::vector<SourceRecord>& sources,
                             const std::vector<DocumentRecord>& documents) {
    QList<Citation> out;
    out.reserve(static_cast<qsizetype>(sources.size()));
    for (const auto& s : sources) {
        Citation c;
        c.document_id = s.document_id;
        c.start_char = s.start_char;
        c.end_char = s.end_char;
        c.page = s.page;
        c.line = s.line;
        c.share = s.share;
        c.excerpt = QString::fromStdString(s.excerpt);
        std::string name, format;
        const auto doc =
            std::find_if(documents.begin(), documents.end(),
                         [&](const DocumentRecord& d) { return d.id == s.document_id; });
        if (doc != documents.end()) {
            name = doc->name;
            format = doc->format;
        } else {
            name = "document " + std::to_string(s.document_id) + " (removed)";
            c.removed = true;
        }
        c.document = QString::fromStdString(name);
        c.place = QString::fromStdString(source_place(name, format, s.page, s.line));
        out << c;
    }
    return out;
}

QList<QList<Citation>> token_citations_of(const std::vector<std::vector<SourceRecord>>& sources,
                                          const std::vector<DocumentRecord>& documents) {
    QList<QList<Citation>> out;
    out.reserve(static_cast<qsizetype>(sources.size()));
    for (const auto& s : sources)
        out << citations_of(s, documents);
    return out;
}

QString citation_text(const Citation& c) {
    SourceRecord r;
    r.share = c.share;
    r.excerpt = c.excerpt.toStdString();
    return QString::fromStdString(source_citation(r, c.place.toStdString()));
}

} // namespace spanscope::gui
