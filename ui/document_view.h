// The document view (docs/desktop-app.md): a document's text, and under the sekv policy its spans
// in alternating light tints, its anchors underlined, and the zoom of an answer (token or whole
// answer) as a heat over the spans it expanded — or, while an answer streams, the latest
// token's spans in two tints: those that carried most of its attention and the others it
// expanded. Hovering a span tells its id, tokens, rank and summary norm. A citation of an answer
// (its source passage) is highlighted over all of these, until another is shown, the citation is
// cleared or the document changes. Everything is drawn as extra selections over the read-only
// text.
#pragma once

#include "ui/zoom_data.h"

#include <QColor>
#include <QList>
#include <QPlainTextEdit>

#include <map>

namespace spanscope::gui {

class DocumentView : public QPlainTextEdit {
    Q_OBJECT
public:
    /// A range of the shown text (UTF-16 positions, end excluded).
    struct Range {
        int begin = 0, end = 0;
        bool operator==(const Range&) const = default;
    };
    /// A span drawn in the view: its range and where it is in the document's SEKV state.
    struct SpanMark {
        Range range;
        int unit = 0, index = 0;
        SpanExtent span;
    };
    /// A span under the zoom, with how many (layer, head) pairs expanded it; under a live zoom
    /// also whether it carried most of the token's attention mass (TokenSpans).
    struct ZoomMark {
        Range range;
        int count = 0;
        bool carried = false; ///< live zoom only
        int span = 0;         ///< its index in span_marks()
    };
    /// A span of a live zoom: (layer, head) pairs that expanded it, and whether it carried the
    /// token's attention mass.
    struct LiveSpan {
        int count = 0;
        bool carried = false;
    };

    explicit DocumentView(QWidget* parent = nullptr);

    /// Show a document's text (positions: where its bytes are in `text`); spans and zoom go.
    void show_document(qint64 id, const QString& text, TextPositionsPtr positions);
    void clear_document();
    qint64 document_id() const { return document_id_; }

    /// Tint the spans and mark the anchors (spans of another document are ignored).
    void set_spans(const DocumentSpansPtr& spans);
    void clear_spans();
    bool has_spans() const { return !spans_.empty(); }

    /// Heat over the spans of the shown document: counts per (unit, span index); `of` is what
    /// a count is out of (the colour's full intensity); `what` says what was counted (a
    /// zoomed span's tooltip: "Zoom: expanded 3 times (what)").
    void set_zoom(const std::map<std::pair<int, int>, int>& counts, int of, const QString& what);
    /// While an answer streams: the spans token `token` expanded in the shown document, per
    /// (unit, span index); carried ones in a strong tint, the others in a light one (live_colour).
    /// measured: false when the attention mass was not measured (every span is then carried and
    /// the tooltips say so). Replaces any zoom; `what` names the token for the tooltips
    /// ("token 7 of the answer being written").
    void set_live_zoom(const std::map<std::pair<int, int>, LiveSpan>& spans, int token,
                       bool measured, const QString& what);
    /// The token a live zoom shows; -1 when the zoom shown is none or not live.
    int live_token() const { return live_token_; }
    void clear_zoom();
    /// Scroll so that the first zoomed span is in view; false when none is shown.
    bool scroll_to_zoom();

    /// Highlight the passage of a citation, bytes [begin, end) of the shown document's text
    /// (UTF-8; mapped like the spans, past the page markers), over the spans and the zoom, and
    /// scroll so that its start is in view (centred). False, and nothing highlighted, when the
    /// range is empty or outside the text.
    bool show_citation(int64_t begin, int64_t end);
    void clear_citation();
    /// The highlighted passage (empty: none).
    Range citation_range() const { return citation_; }
    /// The colour a citation's passage is highlighted with.
    static QColor citation_colour();

    const QList<SpanMark>& span_marks() const { return spans_; }
    const QList<Range>& anchor_ranges() const { return anchors_; }
    const QList<ZoomMark>& zoom_marks() const { return zoom_; }
    /// The tooltip at a position of the text ("" where there is no span, anchor or citation).
    QString tooltip_at(int position) const;
    /// The colour a zoom count is drawn with.
    static QColor heat_colour(int count, int of);
    /// The colour of a live zoom's span: strong where it carried the mass, light otherwise.
    static QColor live_colour(bool carried);

signals:
    /// The zoom marks were set or cleared (set_zoom, set_live_zoom, clear_zoom, new spans).
    void zoom_changed();

protected:
    bool viewportEvent(QEvent* event) override;

private:
    /// The selections of the spans and anchors, kept: a live zoom redraws at every token. A
    /// zoomed span is drawn by its own selection in the zoom's colour (not by one more on top),
    /// so that Qt redraws only the spans whose colour changed.
    void rebuild_base_selections();
    void update_selections();
    /// tooltip_at without the citation: the span's or the anchor's.
    QString marks_tooltip_at(int position) const;
    Range range_of(int64_t begin, int64_t end) const;

    qint64 document_id_ = 0;
    TextPositionsPtr positions_;
    QList<SpanMark> spans_;                 ///< ascending positions
    QList<Range> anchors_;                  ///< ascending positions
    QList<ZoomMark> zoom_;                  ///< ascending positions
    Range citation_;                        ///< the citation's passage; empty: none
    QList<QTextEdit::ExtraSelection> base_; ///< spans_ then anchors_, as drawn
    std::map<std::pair<int, int>, int> zoom_counts_;
    std::map<std::pair<int, int>, LiveSpan> live_; ///< the live zoom's spans (live_token_ >= 0)
    int live_token_ = -1;
    bool live_measured_ = false;
    int zoom_of_ = 1;
    QString zoom_what_;
};

} // namespace spanscope::gui
