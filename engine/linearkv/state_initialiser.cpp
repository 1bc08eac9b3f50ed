#include "engine/linearkv/state_initialiser.h"

#include <stdexcept>
#include <string>

namespace spanscope {

namespace {
// Every document's state present and shaped for `shape` (State::check throws otherwise).
template <class Shape, class State>
void check_documents(const Shape& shape, const std::vector<const State*>& documents) {
    if (documents.empty())
        throw std::invalid_argument("state initialiser: no documents");
    for (const auto* d : documents) {
        if (!d)
            throw std::invalid_argument("state initialiser: a missing document state");
        d->check(shape);
    }
}
} // namespace

const std::vector<float>& RecurrentLayerState::conv() const {
    if (mamba2)
        return mamba2->conv;
    if (gated_deltanet)
        return gated_deltanet->conv;
    throw std::logic_error("recurrent layer " + std::to_string(layer) + ": no state");
}

const std::vector<std::string>& state_initialiser_names() {
    static const std::vector<std::string> kNames = {"single-block", "exact", "zero"};
    return kNames;
}

StateInitialiser parse_state_initialiser(const std::string& name) {
    if (name == "single-block")
        return StateInitialiser::SingleBlock;
    if (name == "exact")
        return StateInitialiser::Exact;
    if (name == "zero")
        return StateInitialiser::Zero;
    throw std::invalid_argument("unknown state initialiser '" + name +
                                "' (single-block, exact, zero)");
}

Mamba2State mamba2_initial_state(const Mamba2Shape& shape,
                                 const std::vector<const Mamba2State*>& documents,
                                 StateInitialiser initialiser) {
    check_documents(shape, documents);
    Mamba2State out(shape);
    switch (initialiser) {
    case StateInitialiser::Zero:
        break;
    case StateInitialiser::SingleBlock:
        out = *documents.back();
        break;
    case StateInitialiser::Exact:
        for (const auto* d : documents)
            mamba2_compose(shape, out, *d);
        break;
    }
    return out;
}

GatedDeltaNetState
gated_deltanet_initial_state(const GatedDeltaNetShape& shape,
                             const std::vector<const GatedDeltaNetState*>& documents,
                             StateInitialiser initialiser) {
    check_documents(shape, documents);
    for (const auto* d : documents)
        if (initialiser == StateInitialiser::Exact && !d->tracks_transition())
            throw std::invalid_argument("state initialiser exact: a document's transition "
                                        "matrix was not kept (track it when prefilling)");
    GatedDeltaNetState out(shape);
    switch (initialiser) {
    case StateInitialiser::Zero:
        break;
    case StateInitialiser::SingleBlock:
        out.s = documents.back()->s;
        out.conv = documents.back()->conv;
        break;
    case StateInitialiser::Exact:
        for (const auto* d : documents)
            gated_deltanet_compose(shape, out, *d);
        break;
    }
    return out;
}

} // namespace spanscope
