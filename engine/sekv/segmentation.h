// SEKV segmentation (docs/sekv.md): a document's tokens cut into spans at high-surprisal
// tokens. Anchors (tokens whose surprisal exceeds μ + α·σ of the document, and position 0) stay
// at full resolution; the maximal runs between anchors are spans, held at two resolutions;
// runs shorter than min_span tokens stay at full resolution too. One segmentation per
// document, shared by all layers and heads.
#pragma once

#include <cstdint>
#include <vector>

namespace spanscope {

struct SegmentationOptions {
    double alpha = 1.0;   ///< threshold = mean + alpha · population standard deviation
    int64_t min_span = 4; ///< runs shorter than this (tokens) stay at full resolution
    int64_t max_span = 0; ///< > 0: longer runs are split into near-equal spans of at most this
                          ///< (needs max_span >= 2 · min_span - 1, so no piece is short)
};

/// A span: tokens [begin, end) of the document (positions).
struct TokenSpan {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
};

struct Segmentation {
    double threshold = 0;                 ///< nats
    std::vector<int64_t> anchors;         ///< ascending positions (0 always among them)
    std::vector<TokenSpan> spans;         ///< ascending, disjoint, none containing an anchor
    std::vector<int64_t> full_resolution; ///< anchors and the tokens of short runs, ascending
};

/// Segment n tokens from their surprisals [n] (nats; NaN: unknown, e.g. a document's last
/// token, which is then an anchor). μ and σ are taken over the finite values. Every token is in
/// exactly one of spans and full_resolution. Throws std::invalid_argument for n < 1,
/// min_span < 1, or 0 < max_span < 2 · min_span - 1.
Segmentation segment(const float* surprisal, int64_t n, const SegmentationOptions& options = {});

} // namespace spanscope
