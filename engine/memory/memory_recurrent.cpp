#include "engine/memory/memory_recurrent.h"

#include <stdexcept>
#include <string>

namespace spanscope {

RecurrentMemory::RecurrentMemory(const Mamba2Shape& shape)
    : kind_(RecurrentKind::Mamba2), mamba2_shape_(shape) {
    shape.validate();
    state_ = Mamba2State(shape);
}

RecurrentMemory::RecurrentMemory(const GatedDeltaNetShape& shape, bool track_transition)
    : kind_(RecurrentKind::GatedDeltaNet), gdn_shape_(shape) {
    shape.validate();
    state_ = GatedDeltaNetState(shape, track_transition);
}

Mamba2State& RecurrentMemory::mamba2() {
    if (kind_ != RecurrentKind::Mamba2)
        throw std::logic_error("this recurrent memory holds a Gated DeltaNet state, not Mamba-2");
    return std::get<Mamba2State>(state_);
}

const Mamba2State& RecurrentMemory::mamba2() const {
    return const_cast<RecurrentMemory*>(this)->mamba2();
}

GatedDeltaNetState& RecurrentMemory::gated_deltanet() {
    if (kind_ != RecurrentKind::GatedDeltaNet)
        throw std::logic_error("this recurrent memory holds a Mamba-2 state, not Gated DeltaNet");
    return std::get<GatedDeltaNetState>(state_);
}

const GatedDeltaNetState& RecurrentMemory::gated_deltanet() const {
    return const_cast<RecurrentMemory*>(this)->gated_deltanet();
}

void RecurrentMemory::advance(int64_t n) {
    if (n < 0)
        throw std::invalid_argument("a recurrent memory cannot go back by " + std::to_string(-n) +
                                    " tokens");
    n_tokens_ += n;
}

void RecurrentMemory::reposition(int64_t n) {
    if (n < 0)
        throw std::invalid_argument("a recurrent memory cannot stand for " + std::to_string(n) +
                                    " tokens");
    n_tokens_ = n;
}

int64_t RecurrentMemory::bytes() const {
    size_t floats = 0;
    if (kind_ == RecurrentKind::Mamba2) {
        const auto& s = std::get<Mamba2State>(state_);
        floats = s.ssm.size() + s.conv.size() + s.log_decay.size();
    } else {
        const auto& s = std::get<GatedDeltaNetState>(state_);
        floats = s.s.size() + s.conv.size() + s.transition.size();
    }
    return static_cast<int64_t>(floats * sizeof(float));
}

MemoryStats RecurrentMemory::stats() const {
    MemoryStats s;
    s.fast_tier_bytes = bytes();
    s.full_kv_bytes = s.fast_tier_bytes;
    return s;
}

std::unique_ptr<RecurrentMemory> RecurrentMemory::clone() const {
    return std::make_unique<RecurrentMemory>(*this);
}

void RecurrentMemory::clear() {
    if (kind_ == RecurrentKind::Mamba2)
        std::get<Mamba2State>(state_).reset();
    else
        std::get<GatedDeltaNetState>(state_).reset(gdn_shape_);
    n_tokens_ = 0;
}

} // namespace spanscope
