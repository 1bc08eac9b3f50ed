#include "engine/sekv/zoom_trace.h"

namespace spanscope {

double ZoomTrace::mean_expansions() const {
    double sum = 0;
    int64_t count = 0;
    for (const auto& step : steps)
        for (const auto& layer : step.layers)
            for (const auto& head : layer.heads) {
                sum += static_cast<double>(head.spans.size());
                ++count;
            }
    return count ? sum / static_cast<double>(count) : 0.0;
}

} // namespace spanscope
