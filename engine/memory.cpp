#include "memory.h"

#include "fp16.h"

#include <stdexcept>

namespace spanscope {

int64_t LayerMemory::read_rows(int32_t, int32_t, std::vector<float>&, std::vector<float>&,
                               std::vector<int32_t>&) const {
    throw std::logic_error("the '" + std::string(policy()) + "' memory cannot export its rows");
}

void round_through_f16(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

ModelMemory ModelMemory::clone() const {
    std::vector<std::unique_ptr<LayerMemory>> copy;
    copy.reserve(layers_.size());
    for (const auto& l : layers_)
        copy.push_back(l->clone());
    return ModelMemory(std::move(copy));
}

MemoryStats ModelMemory::total() const {
    MemoryStats t;
    for (const auto& l : layers_) {
        const auto s = l->stats();
        t.rows_resident += s.rows_resident;
        t.fast_tier_bytes += s.fast_tier_bytes;
        t.host_tier_bytes += s.host_tier_bytes;
    }
    return t;
}

void ModelMemory::clear() {
    for (auto& l : layers_)
        l->clear();
}

} // namespace spanscope
