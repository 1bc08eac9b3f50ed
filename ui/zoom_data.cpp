#include "ui/zoom_data.h"

#include <algorithm>
#include <stdexcept>

namespace spanscope::gui {

namespace {
size_t utf8_length(unsigned char c) {
    if (c < 0x80)
        return 1;
    if ((c >> 5) == 0x6)
        return 2;
    if ((c >> 4) == 0xe)
        return 3;
    if ((c >> 3) == 0x1e)
        return 4;
    return 1; // a stray continuation byte: one replacement character
}

// [bytes + 1] UTF-16 positions of each byte of `s`: `ceil` false, where the character holding
// it starts; true, where the first character starting at or after it starts.
std::vector<int32_t> utf16_positions(const std::string& s, bool ceil) {
    std::vector<int32_t> out(s.size() + 1);
    size_t i = 0;
    int32_t pos = 0;
    while (i < s.size()) {
        const size_t len = std::min(utf8_length(static_cast<unsigned char>(s[i])), s.size() - i);
        const int32_t width = len == 4 ? 2 : 1;
        for (size_t k = 0; k < len; ++k)
            out[i + k] = ceil && k > 0 ? pos + width : pos;
        pos += width;
        i += len;
    }
    out[s.size()] = pos;
    return out;
}
} // namespace

TextPositions::TextPositions(const std::string& shown, const std::vector<int64_t>& shown_of_byte) {
    const auto u16 = utf16_positions(shown, false);
    pos_.resize(shown_of_byte.size());
    for (size_t b = 0; b < shown_of_byte.size(); ++b)
        pos_[b] = u16[static_cast<size_t>(
            std::clamp<int64_t>(shown_of_byte[b], 0, static_cast<int64_t>(shown.size())))];
}

int TextPositions::at(int64_t byte) const {
    if (byte < 0 || byte >= static_cast<int64_t>(pos_.size()))
        return -1;
    return pos_[static_cast<size_t>(byte)];
}

ShownText shown_text(const std::string& text, const std::vector<std::pair<int64_t, int>>& pages,
                     const std::vector<int32_t>& ocr_pages) {
    std::string shown;
    shown.reserve(text.size() + pages.size() * 12);
    std::vector<int64_t> shown_of_byte(text.size() + 1);
    size_t at = 0;
    int page = 0;
    const auto copy_to = [&](size_t end) {
        for (size_t b = at; b < end; ++b)
            shown_of_byte[b] = static_cast<int64_t>(shown.size() + (b - at));
        shown.append(text, at, end - at);
        at = end;
    };
    for (const auto& [offset, p] : pages) {
        if (p <= page || offset < 0 || static_cast<size_t>(offset) > text.size() ||
            static_cast<size_t>(offset) < at)
            continue;
        copy_to(static_cast<size_t>(offset));
        page = p;
        if (!shown.empty() && shown.back() != '\n')
            shown += '\n';
        const bool ocr = std::find(ocr_pages.begin(), ocr_pages.end(), page) != ocr_pages.end();
        shown += "[page " + std::to_string(page) + (ocr ? ", read by OCR]\n" : "]\n");
    }
    copy_to(text.size());
    shown_of_byte[text.size()] = static_cast<int64_t>(shown.size());
    ShownText out;
    out.text = QString::fromStdString(shown);
    out.positions = TextPositions(shown, shown_of_byte);
    return out;
}

AnswerZoom::AnswerZoom(qint64 message_id, StoredZoomTrace trace)
    : message_id_(message_id), t_(std::move(trace)) {
    const auto& steps = t_.trace.steps;
    if (t_.token_texts.size() != steps.size())
        throw std::runtime_error("the trace has " + std::to_string(steps.size()) +
                                 " steps but the text of " + std::to_string(t_.token_texts.size()) +
                                 " tokens");
    if (!steps.empty()) {
        for (const auto& l : steps.front().layers) {
            layers_.push_back(l.layer);
            heads_ = std::max(heads_, static_cast<int>(l.heads.size()));
        }
        for (const auto& s : steps)
            if (!same_shape(s))
                throw std::runtime_error("the steps of the trace differ in their layers or heads");
    }
    std::string all;
    std::vector<size_t> byte_starts;
    for (const auto& piece : t_.token_texts) {
        byte_starts.push_back(all.size());
        all += piece;
    }
    byte_starts.push_back(all.size());
    text_ = QString::fromStdString(all);
    const auto ceil = utf16_positions(all, true);
    for (const auto b : byte_starts)
        starts_ << std::min<int>(ceil[b], static_cast<int>(text_.size()));
    for (int i = 0; i + 1 < starts_.size(); ++i)
        texts_ << text_.mid(starts_[i], starts_[i + 1] - starts_[i]);
}

bool AnswerZoom::same_shape(const ZoomStep& s) const {
    bool same = s.layers.size() == layers_.size();
    for (size_t l = 0; same && l < s.layers.size(); ++l)
        same =
            s.layers[l].layer == layers_[l] && static_cast<int>(s.layers[l].heads.size()) == heads_;
    return same;
}

void AnswerZoom::append_step(ZoomStep step, const std::string& token_text) {
    if (t_.trace.steps.empty()) {
        layers_.clear();
        heads_ = 0;
        for (const auto& l : step.layers) {
            layers_.push_back(l.layer);
            heads_ = std::max(heads_, static_cast<int>(l.heads.size()));
        }
    }
    if (!same_shape(step))
        throw std::runtime_error("the step differs from the first in its layers or heads");
    t_.trace.steps.push_back(std::move(step));
    t_.token_texts.push_back(token_text);
    const QString text = QString::fromStdString(token_text);
    text_ += text;
    texts_ << text;
    starts_ << static_cast<int>(text_.size());
}

int AnswerZoom::cell(int row, int step) const {
    if (heads_ <= 0 || row < 0 || row >= rows() || step < 0 || step >= steps())
        return 0;
    const auto& l =
        t_.trace.steps[static_cast<size_t>(step)].layers[static_cast<size_t>(row / heads_)];
    return static_cast<int>(l.heads[static_cast<size_t>(row % heads_)].spans.size());
}

std::map<int, int> AnswerZoom::span_counts(int step) const {
    std::map<int, int> counts;
    const auto add = [&](const ZoomStep& s) {
        for (const auto& l : s.layers)
            for (const auto& h : l.heads)
                for (const auto id : h.spans)
                    ++counts[id];
    };
    if (step < 0) {
        for (const auto& s : t_.trace.steps)
            add(s);
    } else if (step < steps()) {
        add(t_.trace.steps[static_cast<size_t>(step)]);
    }
    return counts;
}

bool AnswerZoom::locate(int span, SpanRef* ref) const {
    for (const auto& s : t_.sources)
        if (span >= s.first_span && span < s.first_span + s.n_spans) {
            ref->document_id = s.document_id;
            ref->unit = s.unit;
            ref->index = span - s.first_span;
            return true;
        }
    return false;
}

TokenSpans token_spans(const ZoomStep& step) {
    TokenSpans out;
    bool measured = true;
    for (const auto& l : step.layers)
        for (const auto& h : l.heads) {
            const bool has_mass = !h.spans.empty() && h.mass.size() == h.spans.size();
            measured = measured && (h.spans.empty() || has_mass);
            for (size_t i = 0; i < h.spans.size(); ++i) {
                ++out.counts[h.spans[i]];
                if (has_mass)
                    out.mass[h.spans[i]] += std::max(0.0, static_cast<double>(h.mass[i]));
            }
        }
    double total = 0;
    for (const auto& [span, m] : out.mass)
        total += m;
    out.measured = measured && !out.counts.empty() && total > 0;
    if (!out.measured) {
        out.mass.clear();
        for (const auto& [span, n] : out.counts)
            out.carried.insert(span);
        return out;
    }
    // From the largest mass down (ties: lower id first) until half of the total is held.
    std::vector<std::pair<double, int>> order;
    for (const auto& [span, m] : out.mass)
        order.emplace_back(m, span);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    double held = 0;
    for (const auto& [m, span] : order) {
        out.carried.insert(span);
        held += m;
        if (held >= 0.5 * total)
            break;
    }
    return out;
}

QList<int> shown_token_starts(const QString& shown, const QString& tokens_text,
                              const QList<int>& starts) {
    const auto lead = tokens_text.indexOf(shown);
    if (shown.isEmpty() || lead < 0)
        return {};
    QList<int> out;
    for (const int s : starts)
        out << static_cast<int>(std::clamp<qsizetype>(s - lead, 0, shown.size()));
    return out;
}

void register_zoom_types() {
    qRegisterMetaType<TextPositionsPtr>();
    qRegisterMetaType<DocumentSpansPtr>();
    qRegisterMetaType<AnswerZoomPtr>();
    qRegisterMetaType<TokenZoomPtr>();
}

} // namespace spanscope::gui
