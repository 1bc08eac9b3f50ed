#include "engine/memory/memory.h"

#include "engine/kernels/fp16.h"
#include "engine/memory/memory_recurrent.h"

#include <stdexcept>
#include <string>

namespace spanscope {

int64_t LayerMemory::read_rows(int32_t, int32_t, std::vector<float>&, std::vector<float>&,
                               std::vector<int32_t>&) const {
    throw std::logic_error("the '" + std::string(policy()) + "' memory cannot export its rows");
}

void LayerMemory::set_mass_sink(AttentionMass* sink) {
    if (sink && !reports_mass())
        throw std::logic_error("the '" + std::string(policy()) +
                               "' memory cannot report attention mass");
    mass_sink_ = sink;
}

void round_through_f16(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        x[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

ModelMemory::ModelMemory() = default;
ModelMemory::ModelMemory(ModelMemory&&) noexcept = default;
ModelMemory& ModelMemory::operator=(ModelMemory&&) noexcept = default;
ModelMemory::~ModelMemory() = default;

ModelMemory::ModelMemory(std::vector<std::unique_ptr<LayerMemory>> layers)
    : attention_(std::move(layers)), recurrent_(attention_.size()) {
    for (size_t i = 0; i < attention_.size(); ++i)
        if (!attention_[i])
            throw std::invalid_argument("layer " + std::to_string(i) + " has no memory");
}

ModelMemory::ModelMemory(std::vector<std::unique_ptr<LayerMemory>> attention,
                         std::vector<std::unique_ptr<RecurrentMemory>> recurrent)
    : attention_(std::move(attention)), recurrent_(std::move(recurrent)) {
    if (attention_.size() != recurrent_.size())
        throw std::invalid_argument("a model memory needs one entry per layer in both lists");
    for (size_t i = 0; i < attention_.size(); ++i)
        if (!attention_[i] == !recurrent_[i])
            throw std::invalid_argument("layer " + std::to_string(i) +
                                        " needs exactly one memory, attention or recurrent");
}

ModelMemory ModelMemory::clone() const {
    std::vector<std::unique_ptr<LayerMemory>> a(attention_.size());
    std::vector<std::unique_ptr<RecurrentMemory>> r(recurrent_.size());
    for (size_t i = 0; i < attention_.size(); ++i) {
        if (attention_[i])
            a[i] = attention_[i]->clone();
        else
            r[i] = recurrent_[i]->clone();
    }
    return ModelMemory(std::move(a), std::move(r));
}

bool ModelMemory::is_recurrent(int il) const {
    return recurrent_.at(static_cast<size_t>(il)) != nullptr;
}

bool ModelMemory::has_recurrent() const {
    for (const auto& r : recurrent_)
        if (r)
            return true;
    return false;
}

LayerMemory& ModelMemory::layer(int il) {
    auto& a = attention_.at(static_cast<size_t>(il));
    if (!a)
        throw std::logic_error("layer " + std::to_string(il) +
                               " is a recurrent layer: it has a recurrent state, not an "
                               "attention memory (use recurrent(il))");
    return *a;
}

const LayerMemory& ModelMemory::layer(int il) const {
    return const_cast<ModelMemory*>(this)->layer(il);
}

RecurrentMemory& ModelMemory::recurrent(int il) {
    auto& r = recurrent_.at(static_cast<size_t>(il));
    if (!r)
        throw std::logic_error("layer " + std::to_string(il) +
                               " is an attention layer, not a recurrent one");
    return *r;
}

const RecurrentMemory& ModelMemory::recurrent(int il) const {
    return const_cast<ModelMemory*>(this)->recurrent(il);
}

int64_t ModelMemory::n_tokens() const {
    if (attention_.empty())
        return 0;
    return attention_[0] ? attention_[0]->n_tokens() : recurrent_[0]->n_tokens();
}

MemoryStats ModelMemory::total() const {
    MemoryStats t;
    for (size_t i = 0; i < attention_.size(); ++i)
        t += attention_[i] ? attention_[i]->stats() : recurrent_[i]->stats();
    return t;
}

MemoryStats ModelMemory::total(std::string_view policy) const {
    MemoryStats t;
    for (size_t i = 0; i < attention_.size(); ++i) {
        if (attention_[i] && attention_[i]->policy() == policy)
            t += attention_[i]->stats();
        else if (recurrent_[i] && RecurrentMemory::policy() == policy)
            t += recurrent_[i]->stats();
    }
    return t;
}

std::vector<int> ModelMemory::sealing_layers() const {
    std::vector<int> out;
    for (size_t i = 0; i < attention_.size(); ++i)
        if (attention_[i] && attention_[i]->seals())
            out.push_back(static_cast<int>(i));
    return out;
}

bool ModelMemory::needs_segmentation() const {
    for (const auto& l : attention_)
        if (l && l->needs_segmentation())
            return true;
    return false;
}

void ModelMemory::replace(int il, std::unique_ptr<LayerMemory> memory) {
    if (is_recurrent(il))
        throw std::logic_error("layer " + std::to_string(il) +
                               " is recurrent; an attention memory cannot replace its state");
    if (!memory)
        throw std::invalid_argument("replace: no memory given for layer " + std::to_string(il));
    attention_[static_cast<size_t>(il)] = std::move(memory);
}

void ModelMemory::clear() {
    for (size_t i = 0; i < attention_.size(); ++i) {
        if (attention_[i])
            attention_[i]->clear();
        else
            recurrent_[i]->clear();
    }
}

} // namespace spanscope
