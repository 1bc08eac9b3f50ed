#include "answering/sekv_relevance.h"

#include "engine/kernels/ops.h"
#include "engine/kernels/rope.h"
#include "engine/memory/memory.h"
#include "engine/memory/memory_full.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

// A full-attention layer memory that keeps a copy of every query it attends with.
class QueryRecorder final : public LayerMemory {
public:
    QueryRecorder(const AttentionShape& shape, int64_t capacity, std::vector<float>* out)
        : inner_(shape, capacity), out_(out) {}
    std::string_view policy() const override { return inner_.policy(); }
    const AttentionShape& shape() const override { return inner_.shape(); }
    void store(const float* k, const float* v, const int32_t* pos, int64_t n) override {
        inner_.store(k, v, pos, n);
    }
    void attend(const float* q, const int32_t* qpos, int64_t n_q, float* out,
                ThreadPool& pool) override {
        const auto& s = inner_.shape();
        out_->insert(out_->end(), q, q + n_q * s.n_head * s.head_dim);
        inner_.attend(q, qpos, n_q, out, pool);
    }
    MemoryStats stats() const override { return inner_.stats(); }
    int64_t n_tokens() const override { return inner_.n_tokens(); }
    std::unique_ptr<LayerMemory> clone() const override { return inner_.clone(); }
    void clear() override {
        inner_.clear();
        out_->clear();
    }

private:
    FullMemory inner_;
    std::vector<float>* out_;
};

} // namespace

QuestionQueries question_queries(const Model& model, const std::vector<int32_t>& question,
                                 const std::vector<int>& layers, ThreadPool& pool,
                                 const std::atomic<bool>* cancel) {
    const auto& info = model.info();
    if (question.empty())
        throw std::invalid_argument("question_queries: an empty question");
    const auto& tok = model.tokenizer();
    if (tok.add_bos() && tok.bos() < 0)
        throw std::invalid_argument("question_queries: the vocabulary asks for a BOS but has none");
    std::vector<int32_t> tokens;
    if (tok.add_bos())
        tokens.push_back(tok.bos());
    tokens.insert(tokens.end(), question.begin(), question.end());
    const auto n = static_cast<int64_t>(tokens.size());
    QuestionQueries out;
    out.first_pos = tok.add_bos() ? 1 : 0;
    out.n_tokens = n - out.first_pos;
    out.layers = layers;
    std::sort(out.layers.begin(), out.layers.end());
    out.q.resize(out.layers.size());
    auto memory = make_memory(info, n, n, "full");
    for (size_t i = 0; i < out.layers.size(); ++i) {
        const int il = out.layers[i];
        if (il < 0 || il >= static_cast<int>(info.layers.size()) ||
            !info.layers[static_cast<size_t>(il)].global() ||
            !info.layers[static_cast<size_t>(il)].full_rope())
            throw std::invalid_argument("question_queries: layer " + std::to_string(il) +
                                        " is not a global-attention layer with full-head RoPE");
        memory.replace(il, std::make_unique<QueryRecorder>(
                               info.layers[static_cast<size_t>(il)].attn, n, &out.q[i]));
    }
    std::vector<int32_t> pos(tokens.size());
    for (size_t i = 0; i < pos.size(); ++i)
        pos[i] = static_cast<int32_t>(i);
    model.forward(tokens.data(), pos.data(), n, memory, {}, nullptr, pool, nullptr, cancel);
    // Drop the BOS row's queries: it is not part of the question.
    for (size_t i = 0; i < out.layers.size() && out.first_pos > 0; ++i) {
        const auto& s = info.layers[static_cast<size_t>(out.layers[i])].attn;
        const auto row = static_cast<size_t>(s.n_head) * static_cast<size_t>(s.head_dim);
        if (out.q[i].size() != static_cast<size_t>(n) * row)
            throw std::logic_error("question_queries: layer " + std::to_string(out.layers[i]) +
                                   " attended " + std::to_string(out.q[i].size() / row) +
                                   " queries, not " + std::to_string(n));
        out.q[i].erase(out.q[i].begin(), out.q[i].begin() + static_cast<std::ptrdiff_t>(row));
    }
    return out;
}

std::optional<double> sekv_relevance(const QuestionQueries& q, const SekvUnitState& state,
                                     const ModelInfo& info) {
    double sum = 0;
    int64_t terms = 0;
    for (size_t i = 0; i < q.layers.size(); ++i) {
        const int il = q.layers[i];
        const auto it = std::find_if(state.layers.begin(), state.layers.end(),
                                     [&](const SekvLayerState& l) { return l.layer == il; });
        if (it == state.layers.end() || it->spans.empty() || q.n_tokens < 1)
            continue;
        const auto& li = info.layers[static_cast<size_t>(il)];
        const auto& s = li.attn;
        const int group = s.n_head / s.n_kv_head;
        const auto d = static_cast<size_t>(s.head_dim);
        // Queries at positions first_pos.. move to n_tokens..: right after the section.
        std::vector<float> qs = q.q[i];
        rope_shift_neox(qs.data(), q.n_tokens, s.n_head, s.head_dim,
                        static_cast<int32_t>(state.n_tokens - q.first_pos), li.rope);
        double log_rows = 0;
        {
            double rows = 0;
            for (const auto& sp : it->spans)
                rows += static_cast<double>(sp.size);
            log_rows = std::log(rows);
        }
        std::vector<double> logits(it->spans.size());
        for (int64_t t = 0; t < q.n_tokens; ++t)
            for (int h = 0; h < s.n_head; ++h) {
                const float* qv =
                    qs.data() + (static_cast<size_t>(t) * static_cast<size_t>(s.n_head) +
                                 static_cast<size_t>(h)) *
                                    d;
                const auto g = static_cast<size_t>(h / group);
                double top = -std::numeric_limits<double>::infinity();
                for (size_t j = 0; j < it->spans.size(); ++j) {
                    const float* k = it->spans[j].summary_k.data() + g * d;
                    double dot = 0;
                    for (size_t e = 0; e < d; ++e)
                        dot += static_cast<double>(qv[e]) * static_cast<double>(k[e]);
                    logits[j] = static_cast<double>(s.scale) * dot +
                                std::log(static_cast<double>(it->spans[j].size));
                    top = std::max(top, logits[j]);
                }
                double z = 0;
                for (const double l : logits)
                    z += std::exp(l - top);
                sum += top + std::log(z) - log_rows;
                ++terms;
            }
    }
    if (terms == 0)
        return std::nullopt;
    return sum / static_cast<double>(terms);
}

} // namespace spanscope
