#include "engine/sekv/segmentation.h"

#include <cmath>
#include <stdexcept>

namespace spanscope {

Segmentation segment(const float* surprisal, int64_t n, const SegmentationOptions& o) {
    if (n < 1)
        throw std::invalid_argument("segmentation of no tokens");
    if (o.min_span < 1)
        throw std::invalid_argument("min_span must be at least 1");
    if (o.max_span > 0 && o.max_span < 2 * o.min_span - 1)
        throw std::invalid_argument("max_span must be 0 or at least 2 * min_span - 1");
    // Population mean and standard deviation of the finite surprisals, in double.
    double sum = 0, sum2 = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i)
        if (std::isfinite(surprisal[i])) {
            sum += surprisal[i];
            ++count;
        }
    const double mean = count ? sum / static_cast<double>(count) : 0;
    for (int64_t i = 0; i < n; ++i)
        if (std::isfinite(surprisal[i]))
            sum2 += (surprisal[i] - mean) * (surprisal[i] - mean);
    const double sigma = count ? std::sqrt(sum2 / static_cast<double>(count)) : 0;

    Segmentation s;
    s.threshold = mean + o.alpha * sigma;
    std::vector<bool> anchor(static_cast<size_t>(n), false);
    for (int64_t i = 0; i < n; ++i)
        anchor[i] = i == 0 || !std::isfinite(surprisal[i]) || surprisal[i] > s.threshold;
    for (int64_t i = 0; i < n; ++i)
        if (anchor[i])
            s.anchors.push_back(i);

    auto add_run = [&](int64_t b, int64_t e) {
        const int64_t len = e - b;
        if (len < o.min_span) {
            for (int64_t i = b; i < e; ++i)
                s.full_resolution.push_back(i);
            return;
        }
        const int64_t pieces = o.max_span > 0 ? (len + o.max_span - 1) / o.max_span : 1;
        for (int64_t k = 0; k < pieces; ++k) // near-equal pieces: sizes differ by at most 1
            s.spans.push_back({b + len * k / pieces, b + len * (k + 1) / pieces});
    };
    int64_t run_begin = -1;
    for (int64_t i = 0; i < n; ++i) {
        if (anchor[i]) {
            if (run_begin >= 0)
                add_run(run_begin, i);
            run_begin = -1;
            s.full_resolution.push_back(i);
        } else if (run_begin < 0) {
            run_begin = i;
        }
    }
    if (run_begin >= 0)
        add_run(run_begin, n);
    // full_resolution was filled in position order except for short runs, which precede the
    // anchor that ends them: already ascending.
    return s;
}

} // namespace spanscope
