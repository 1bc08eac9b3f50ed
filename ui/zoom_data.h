// What the document view and the inspector show of SEKV (docs/sekv.md, §5), without widgets:
// where each byte of a document's text lands in the text the view shows, a document's spans
// and anchors as the engine built them, and an answer's zoom trace with the counts the views
// draw (spans per token, (layer, head) pairs per span, the layer × head × step grid).
#pragma once

#include "answering/document_spans.h"
#include "storage/zoom_trace_blob.h"
#include "ui/gui_types.h"

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace spanscope::gui {

/// UTF-16 positions in the shown text of each byte offset of a document's text (UTF-8).
class TextPositions {
public:
    TextPositions() = default;
    /// shown_of_byte: [bytes + 1] byte offset in the shown UTF-8 text of each byte of the text.
    TextPositions(const std::string& shown, const std::vector<int64_t>& shown_of_byte);
    /// The position of a byte offset (one inside a character: that character), -1 outside
    /// [0, bytes].
    int at(int64_t byte) const;
    int64_t bytes() const { return pos_.empty() ? 0 : static_cast<int64_t>(pos_.size()) - 1; }

private:
    std::vector<int32_t> pos_;
};

using TextPositionsPtr = std::shared_ptr<const TextPositions>;

/// A document's text as the view shows it: "[page N]" on a line of its own where each PDF
/// page starts, "[page N, read by OCR]" for the pages in `ocr_pages` (pages: (byte offset,
/// page), ascending; a newline is added before a marker that would not start a line), with the
/// positions of the text's bytes.
struct ShownText {
    QString text;
    TextPositions positions;
};
ShownText shown_text(const std::string& text, const std::vector<std::pair<int64_t, int>>& pages,
                     const std::vector<int32_t>& ocr_pages = {});

/// The SEKV spans of a document, per unit (section), as document_sekv_spans gives them.
struct DocumentSpans {
    qint64 document_id = 0;
    QString key;                  ///< MemorySettings::spans_key() they were built for
    std::vector<UnitSpans> units; ///< in unit order
    QString error;                ///< why there are none, in words ("" when built)
};
using DocumentSpansPtr = std::shared_ptr<const DocumentSpans>;

/// A span of the answer's context, as the document and section it comes from.
struct SpanRef {
    qint64 document_id = 0;
    int unit = 0, index = 0; ///< section and span within it
};

/// Where an answer's context span ids come from (ZoomSource: document, section, first id).
using ZoomSourcesPtr = std::shared_ptr<const std::vector<ZoomSource>>;

/// One generated token's zoom while its answer streams (EngineWorker::answer_zoom).
struct TokenZoom {
    int token = 0;          ///< index among the answer's tokens (0-based)
    ZoomStep step;          ///< its routing per SEKV layer and query head (mass may be empty)
    ZoomSourcesPtr sources; ///< the answer's context; one shared object for all its tokens
};
using TokenZoomPtr = std::shared_ptr<const TokenZoom>;

/// The spans one token expanded, and which of them carried its attention (docs/desktop-app.md,
/// "Live zoom"). Per span the attention mass (ZoomHead::mass) is summed over the SEKV layers
/// and query heads that expanded it; the spans that together hold at least half of the summed
/// mass, taken from the largest down (ties: lower id first), and at least one, "carried the
/// mass". Where the mass was not measured (a head with spans but no mass, or no mass at all)
/// every expanded span counts as carrying it: they are drawn alike.
struct TokenSpans {
    std::map<int, int> counts;  ///< span id → (layer, head) pairs that expanded it
    std::map<int, double> mass; ///< span id → Σ mass over those pairs (empty: not measured)
    std::set<int> carried;      ///< span ids that carried the mass (every expanded one when not
                                ///< measured); empty only when nothing was expanded
    bool measured = false;      ///< the mass was measured for every head that expanded spans
};
TokenSpans token_spans(const ZoomStep& step);

/// An answer's zoom trace with what the views draw.
class AnswerZoom {
public:
    /// Throws std::runtime_error when the trace's steps do not all have the same layers and
    /// heads, or a step's token text is missing. A trace without steps is one to append to
    /// while its answer streams (message_id 0: not saved yet).
    AnswerZoom(qint64 message_id, StoredZoomTrace trace);

    /// Add the next step (an answer that streams) with its token's text (UTF-8; may be empty,
    /// then the token shows no text). Throws std::runtime_error when its layers and heads are
    /// not those of the first step; the zoom is then unchanged.
    void append_step(ZoomStep step, const std::string& token_text = {});

    qint64 message_id() const { return message_id_; }
    const StoredZoomTrace& stored() const { return t_; }
    int steps() const { return static_cast<int>(t_.trace.steps.size()); }
    int n_spans() const { return t_.trace.n_spans; }
    const std::vector<int>& layers() const { return layers_; }
    int heads() const { return heads_; }
    /// Grid rows: one per (layer, head), layer-major.
    int rows() const { return static_cast<int>(layers_.size()) * heads_; }
    /// Spans expanded by grid row `row` (layer index * heads + head) at `step`.
    int cell(int row, int step) const;
    /// The span ids expanded at `step` (-1: at every step) with how many (layer, head) pairs
    /// expanded them (summed over the steps for -1).
    std::map<int, int> span_counts(int step) const;
    /// Where a span of the context comes from; false when no source holds it.
    bool locate(int span, SpanRef* ref) const;
    /// Spans expanded per generated token and query head (mean over steps, layers, heads).
    double mean_expansions() const { return t_.trace.mean_expansions(); }
    /// Each token's text (a character cut between tokens goes to the one with its first byte).
    const QStringList& token_texts() const { return texts_; }
    /// The concatenated text of the tokens, and where each starts in it ([steps + 1]).
    const QString& text() const { return text_; }
    const QList<int>& token_starts() const { return starts_; }

private:
    /// Whether a step has the layers and heads of the first (layers_, heads_).
    bool same_shape(const ZoomStep& s) const;

    qint64 message_id_;
    StoredZoomTrace t_;
    std::vector<int> layers_;
    int heads_ = 0;
    QString text_;
    QList<int> starts_;
    QStringList texts_;
};
using AnswerZoomPtr = std::shared_ptr<const AnswerZoom>;

/// Token starts in a message's shown text (`shown`, the answer trimmed) from the tokens' text
/// and starts; empty when the tokens do not spell the shown text.
QList<int> shown_token_starts(const QString& shown, const QString& tokens_text,
                              const QList<int>& starts);

/// Register the pointer types above (TokenZoomPtr included) for queued connections.
void register_zoom_types();

} // namespace spanscope::gui

Q_DECLARE_METATYPE(spanscope::gui::TextPositionsPtr)
Q_DECLARE_METATYPE(spanscope::gui::DocumentSpansPtr)
Q_DECLARE_METATYPE(spanscope::gui::AnswerZoomPtr)
Q_DECLARE_METATYPE(spanscope::gui::TokenZoomPtr)
