// Router parameter files for the tiny test models (tests of the trained router, issue 8): every
// SEKV layer's W drawn at random, θ and the rank a gate keeps chosen by the test; and an
// environment variable set for a scope (ScopedEnv). No test framework: the Qt Test GUI tests
// include it too. The GoogleTest check of refusals: router_params_refusal.h.
#pragma once

#include "engine/model/model.h"
#include "engine/sekv/memory_sekv.h"
#include "engine/sekv/router_params.h"
#include "storage/model_fingerprint.h"

#include <cstdlib>
#include <optional>
#include <random>
#include <string>

namespace spanscope::test {

/// Parameters for every SEKV layer of `model` (sekv_layers with default options), trained "for"
/// it (its fingerprint and file name): W [n_head][d_out][head_dim] ~ N(0, 0.1²), θ = theta for
/// every head, and a rank gate of 32 components whose weights are 0 and biases b2_i = +8 for
/// i < keep_rank, −8 past it: h = tanh(0) = 0, m_i = σ(±8), so it keeps keep_rank components
/// (at least 1) of every span, whatever the span.
inline RouterParams tiny_router_params(const Model& model, float theta, int keep_rank,
                                       int d_out = 8, uint32_t seed = 1) {
    RouterParams p;
    p.model_fingerprint = fingerprint_hex(model_fingerprint(model));
    p.model_name = model.path().substr(model.path().find_last_of('/') + 1);
    p.provenance = {"tests", "tiny_router_params", "none", "2026-01-01T00:00:00Z"};
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 0.1f);
    for (const int il : sekv_layers(model.info(), SekvOptions{})) {
        const auto& shape = model.info().layers[static_cast<size_t>(il)].attn;
        RouterLayerParams l;
        l.layer = il;
        l.n_head = shape.n_head;
        l.head_dim = shape.head_dim;
        l.d_out = d_out;
        l.w.resize(static_cast<size_t>(l.n_head * d_out * l.head_dim));
        for (auto& x : l.w)
            x = g(rng);
        l.theta.assign(static_cast<size_t>(l.n_head), theta);
        l.gate.n_rank = 32;
        l.gate.head_dim = l.head_dim;
        l.gate.n_hidden = 4;
        l.gate.w1.assign(static_cast<size_t>(l.gate.n_hidden * l.gate.n_in()), 0.0f);
        l.gate.b1.assign(static_cast<size_t>(l.gate.n_hidden), 0.0f);
        l.gate.w2.assign(static_cast<size_t>(l.gate.n_rank * l.gate.n_hidden), 0.0f);
        for (int i = 0; i < l.gate.n_rank; ++i)
            l.gate.b2.push_back(i < keep_rank ? 8.0f : -8.0f);
        p.layers.push_back(std::move(l));
    }
    return p;
}

/// Sets an environment variable for the life of the object, then restores it.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : name_(name) {
        if (const char* old = std::getenv(name))
            old_ = std::string(old);
        setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_)
            setenv(name_, old_->c_str(), 1);
        else
            unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

} // namespace spanscope::test
