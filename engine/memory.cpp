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

namespace {
void add(MemoryStats& t, const MemoryStats& s) {
    t.rows_resident += s.rows_resident;
    t.fast_tier_bytes += s.fast_tier_bytes;
    t.host_tier_bytes += s.host_tier_bytes;
    t.full_kv_bytes += s.full_kv_bytes;
    t.spans += s.spans;
}
} // namespace

MemoryStats ModelMemory::total() const {
    MemoryStats t;
    for (const auto& l : layers_)
        add(t, l->stats());
    return t;
}

MemoryStats ModelMemory::total(std::string_view policy) const {
    MemoryStats t;
    for (const auto& l : layers_)
        if (l->policy() == policy)
            add(t, l->stats());
    return t;
}

std::vector<int> ModelMemory::sealing_layers() const {
    std::vector<int> out;
    for (size_t i = 0; i < layers_.size(); ++i)
        if (layers_[i]->seals())
            out.push_back(static_cast<int>(i));
    return out;
}

bool ModelMemory::needs_segmentation() const {
    for (const auto& l : layers_)
        if (l->needs_segmentation())
            return true;
    return false;
}

void ModelMemory::replace(int il, std::unique_ptr<LayerMemory> memory) {
    layers_.at(static_cast<size_t>(il)) = std::move(memory);
}

void ModelMemory::clear() {
    for (auto& l : layers_)
        l->clear();
}

} // namespace spanscope
