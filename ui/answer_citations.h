// An answer's sources as the chat shows them (docs/desktop-app.md, "Sources"): each passage its
// tokens attended to most (answering/answer_sources.h, SourceRecord) with the document it is in
// named, as one citation line ("a.pdf, page 3 (42%): EXCERPT") that a click shows in the
// document view.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>

#include <vector>

namespace spanscope {
struct DocumentRecord;
struct SourceRecord;
} // namespace spanscope

namespace spanscope::gui {

/// One source of an answer, placed in its document.
struct Citation {
    qint64 document_id = 0;
    qint64 start_char = 0, end_char = 0; ///< bytes [start, end) of the document's UTF-8 text
    int page = 0;                        ///< 1-based PDF page of start_char; 0: none
    int line = 0;                        ///< its line (paragraph for DOCX, ODT); 0: none
    double share = 0; ///< of the answer's attention over its documents' passages, in [0, 1]
    QString excerpt;  ///< the passage's text, whitespace runs as one space, maybe cut ("…")
    /// The document's name, or "document N (removed)" when it is no longer in the project (a
    /// removed document's sources keep their excerpt and range).
    QString document;
    bool removed = false; ///< the document was not in the project when the citation was made
    QString place;        ///< where it is in words (source_place): "a.txt, line 40"
    bool operator==(const Citation&) const = default;
};

/// The citations of `sources` (top first, kept in their order), each placed in the document of
/// `documents` with its id (name and format); a source whose document is not among them is
/// named "document N (removed)" and marked removed.
QList<Citation> citations_of(const std::vector<SourceRecord>& sources,
                             const std::vector<DocumentRecord>& documents);

/// citations_of for each answer token's sources ([tokens][top first]).
QList<QList<Citation>> token_citations_of(const std::vector<std::vector<SourceRecord>>& sources,
                                          const std::vector<DocumentRecord>& documents);

/// The citation's line: "PLACE (42%): EXCERPT" (source_citation; the share rounded to a whole
/// percent, "<1%" below half a percent).
QString citation_text(const Citation& c);

} // namespace spanscope::gui

Q_DECLARE_METATYPE(spanscope::gui::Citation)
