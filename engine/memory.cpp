#include "memory.h"

namespace spanscope {

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
