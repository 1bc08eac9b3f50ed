// `spanscope-lab state-init-eval`: the state initialisers of recurrent layers measured on a
// hybrid model (issue 7, LinearKV; docs/linearkv.md). Each sample is K documents of random token
// ids (each with its BOS) and a question of random ids. The reference is a joint run of the
// concatenation: its recurrent states after the documents and its next-token distributions at
// the question's positions. Each initialiser (single-block, exact, zero; state_initialiser.h)
// then builds the recurrent layers' initial states from the documents prefilled on their own
// (pic_assembly.h, selector none: attention rows moved, nothing recomputed) and the question
// runs after them. Per line: KL(reference ‖ initialiser) of the next-token distribution (nats,
// mean over the question's positions), the relative state error ‖S_init − S_joint‖_F /
// ‖S_joint‖_F per recurrent layer (Mamba-2 ssm, Gated DeltaNet S; conv tails not included),
// measured before the question, and the time of the initialiser alone and of the whole
// assembly. Random-weight tiny models say how a state error propagates, not answer quality.
#include "lab/cli/lab_commands.h"

#include "engine/linearkv/pic_assembly.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/model/model.h"
#include "lab/cli/eval_run.h"
#include "lab/evaluation/eval_fidelity.h"
#include "lab/evaluation/eval_metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <random>

namespace spanscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string result_key(const nlohmann::json& j) {
    return j.value("model", "") + "|" + std::to_string(j.value("documents", 0)) + "|" +
           std::to_string(j.value("doc_tokens", 0)) + "|" +
           std::to_string(j.value("question_tokens", 0)) + "|" +
           std::to_string(j.value("index", 0)) + "|" +
           std::to_string(j.value("seed", uint64_t{0})) + "|" + j.value("initialiser", "") + "|" +
           j.value("settings", "");
}

// n ids drawn uniformly from the vocabulary, skipping control and special tokens.
std::vector<int32_t> random_ids(const Tokenizer& tok, int n, std::mt19937_64& rng) {
    std::uniform_int_distribution<int32_t> pick(0, tok.n_vocab() - 1);
    std::vector<int32_t> out;
    while (std::ssize(out) < n) {
        const int32_t id = pick(rng);
        if (tok.is_control(id) || tok.is_end_of_generation(id) || id == tok.bos() ||
            id == tok.eos() || id == tok.unk() || id == tok.pad())
            continue;
        out.push_back(id);
    }
    return out;
}

// The recurrent state proper of layer il (Mamba-2 ssm, Gated DeltaNet S).
const std::vector<float>& state_matrix(const ModelMemory& m, int il) {
    const auto& r = m.recurrent(il);
    return r.kind() == RecurrentKind::Mamba2 ? r.mamba2().ssm : r.gated_deltanet().s;
}

// ‖a − b‖_F / ‖b‖_F (1 for a = 0; 0 when both are 0).
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += static_cast<double>(b[i]) * b[i];
    }
    if (den == 0)
        return num == 0 ? 0.0 : 1.0;
    return std::sqrt(num / den);
}

// Run `tokens` at positions [p0, p0 + n) through `memory`; with `logprobs`, the log-softmax of
// every position's next-token logits ([n][n_vocab]).
void run(const Model& model, const std::vector<int32_t>& tokens, int64_t p0, ModelMemory& memory,
         ThreadPool& pool, std::vector<std::vector<float>>* logprobs) {
    const auto n = std::ssize(tokens);
    const int64_t V = model.info().n_vocab;
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(p0));
    std::vector<int64_t> rows;
    std::vector<float> logits;
    if (logprobs) {
        rows.resize(static_cast<size_t>(n));
        std::iota(rows.begin(), rows.end(), 0);
        logits.resize(static_cast<size_t>(n * V));
    }
    model.forward(tokens.data(), pos.data(), n, memory, rows, logprobs ? logits.data() : nullptr,
                  pool);
    if (logprobs) {
        logprobs->clear();
        for (int64_t t = 0; t < n; ++t)
            logprobs->push_back(eval::log_softmax(
                std::vector<float>(logits.begin() + t * V, logits.begin() + (t + 1) * V)));
    }
}

// KL(p ‖ q) = Σ p (log p − log q) in nats, from log-probabilities.
double kl(const std::vector<float>& logp, const std::vector<float>& logq) {
    double s = 0;
    for (size_t i = 0; i < logp.size(); ++i) {
        const double p = std::exp(static_cast<double>(logp[i]));
        if (p > 0)
            s += p * (static_cast<double>(logp[i]) - logq[i]);
    }
    return std::max(0.0, s);
}

struct Tally {
    std::vector<double> kl, err_mean, err_max, init_ms, assembly_ms;
};

} // namespace

int run_state_init_eval(const StateInitEvalOptions& o) {
    auto model = open_model(o.model);
    const auto& info = model->info();
    if (!info.hybrid())
        throw std::invalid_argument("state-init-eval needs a hybrid model (recurrent layers: "
                                    "granitehybrid, qwen3next); " +
                                    info.architecture + " has none");
    std::vector<StateInitialiser> inits;
    for (const auto& name : o.initialisers)
        inits.push_back(parse_state_initialiser(name));
    const int max_k = *std::max_element(o.documents.begin(), o.documents.end());
    const int64_t need = int64_t{max_k} * o.doc_tokens + o.question_tokens;
    if (need > info.n_ctx_train)
        throw std::invalid_argument(std::to_string(max_k) + " documents of " +
                                    std::to_string(o.doc_tokens) + " tokens and a question of " +
                                    std::to_string(o.question_tokens) + " exceed the context of " +
                                    std::to_string(info.n_ctx_train) + " tokens");
    const auto& tok = model->tokenizer();
    std::vector<int> recurrent_layers;
    for (int il = 0; il < info.n_layer; ++il)
        if (info.layers[static_cast<size_t>(il)].recurrent())
            recurrent_layers.push_back(il);
    const std::string model_name = std::filesystem::path(model->path()).filename().string();
    const std::string settings = "state_init=1"; // bump when the measurement's meaning changes
    ResultLog log(o.out, o.command_line, o.threads, result_key);
    ThreadPool pool(o.threads > 0 ? o.threads : 0);

    std::map<std::string, Tally> tally; // by "K|initialiser"
    nlohmann::json results = nlohmann::json::array();
    for (const int K : o.documents)
        for (int i = 0; i < o.samples; ++i) {
            nlohmann::json head{{"model", model_name},
                                {"architecture", info.architecture},
                                {"documents", K},
                                {"doc_tokens", o.doc_tokens},
                                {"question_tokens", o.question_tokens},
                                {"index", i},
                                {"seed", o.seed},
                                {"settings", settings},
                                {"selector", "none"}};
            std::vector<nlohmann::json> lines;
            for (const auto init : inits) {
                auto probe = head;
                probe["initialiser"] = state_initialiser_name(init);
                if (const auto* found = log.find(probe))
                    lines.push_back(*found);
            }
            if (lines.size() != inits.size()) {
                lines.clear();
                // Sample i's documents are the first K of one sequence (nested as K grows).
                std::mt19937_64 rng(o.seed * 1000003ULL + static_cast<uint64_t>(i));
                std::vector<std::vector<int32_t>> docs;
                for (int d = 0; d < K; ++d) {
                    // Each document starts as a prompt does: BOS where the model wants one.
                    std::vector<int32_t> t;
                    if (tok.add_bos())
                        t.push_back(tok.bos());
                    const auto body =
                        random_ids(tok, o.doc_tokens - static_cast<int>(t.size()), rng);
                    t.insert(t.end(), body.begin(), body.end());
                    docs.push_back(std::move(t));
                }
                std::mt19937_64 qrng(o.seed * 7919ULL + static_cast<uint64_t>(i) + 17);
                const auto question = random_ids(tok, o.question_tokens, qrng);
                std::vector<int32_t> all;
                for (const auto& d : docs)
                    all.insert(all.end(), d.begin(), d.end());
                const auto n_past = std::ssize(all);
                const int64_t capacity = n_past + std::ssize(question);

                // The reference: a joint run of the concatenation, then the question.
                ModelMemory joint = make_memory(info, capacity, capacity);
                run(*model, all, 0, joint, pool, nullptr);
                std::vector<std::vector<float>> joint_states;
                for (const int il : recurrent_layers)
                    joint_states.push_back(state_matrix(joint, il));
                std::vector<std::vector<float>> ref;
                run(*model, question, n_past, joint, pool, &ref);

                // The documents on their own (transitions tracked: exact on Gated DeltaNet).
                std::vector<CachedDocument> cached;
                for (const auto& d : docs)
                    cached.push_back(prefill_document(*model, d, pool, 512, nullptr, true));
                std::vector<const CachedDocument*> ptrs;
                for (const auto& d : cached)
                    ptrs.push_back(&d);

                for (const auto init : inits) {
                    nlohmann::json j = head;
                    j["initialiser"] = state_initialiser_name(init);
                    RecomputeOptions ro;
                    ro.state_init = init;
                    const auto t0 = Clock::now();
                    auto a = assemble_documents(*model, ptrs, ro, pool, capacity);
                    const double assembly_ms = ms_since(t0);
                    std::vector<double> errs;
                    for (size_t r = 0; r < recurrent_layers.size(); ++r)
                        errs.push_back(relative_error(state_matrix(a.memory, recurrent_layers[r]),
                                                      joint_states[r]));
                    std::vector<std::vector<float>> got;
                    run(*model, question, n_past, a.memory, pool, &got);
                    double kl_sum = 0, kl_max = 0;
                    for (size_t t = 0; t < got.size(); ++t) {
                        const double k = kl(ref[t], got[t]);
                        kl_sum += k;
                        kl_max = std::max(kl_max, k);
                    }
                    j.update({{"n_past", n_past},
                              {"kl", kl_sum / static_cast<double>(got.size())},
                              {"kl_max", kl_max},
                              {"recurrent_layers", recurrent_layers},
                              {"state_error", errs},
                              {"state_error_mean", std::accumulate(errs.begin(), errs.end(), 0.0) /
                                                       static_cast<double>(errs.size())},
                              {"state_error_max", *std::max_element(errs.begin(), errs.end())},
                              {"init_ms", a.stats.init_ms},
                              {"assembly_ms", assembly_ms}});
                    log.append(j);
                    lines.push_back(j);
                }
            }
            for (const auto& j : lines) {
                auto& t = tally[std::to_string(K) + "|" + j["initialiser"].get<std::string>()];
                t.kl.push_back(j["kl"]);
                t.err_mean.push_back(j["state_error_mean"]);
                t.err_max.push_back(j["state_error_max"]);
                t.init_ms.push_back(j["init_ms"]);
                t.assembly_ms.push_back(j["assembly_ms"]);
                if (o.json)
                    results.push_back(j);
                if (!o.quiet)
                    std::cerr << K << " documents #" << i << " "
                              << j["initialiser"].get<std::string>() << ": KL "
                              << j["kl"].get<double>() << " nats, state error "
                              << j["state_error_mean"].get<double>() << "\n";
            }
        }

    nlohmann::json summaries = nlohmann::json::array();
    auto stat = [](const std::vector<double>& v) {
        const auto ci = eval::mean_interval_unbounded(v);
        return nlohmann::json{{"mean", std::accumulate(v.begin(), v.end(), 0.0) /
                                           static_cast<double>(std::max<size_t>(1, v.size()))},
                              {"ci95", {ci.low, ci.high}}};
    };
    for (const int K : o.documents)
        for (const auto init : inits) {
            const auto& name = state_initialiser_name(init);
            const auto it = tally.find(std::to_string(K) + "|" + name);
            if (it == tally.end())
                continue;
            const auto& t = it->second;
            summaries.push_back({{"model", model_name},
                                 {"documents", K},
                                 {"initialiser", name},
                                 {"kl", stat(t.kl)},
                                 {"state_error_mean", stat(t.err_mean)},
                                 {"state_error_max", stat(t.err_max)},
                                 {"init_ms", stat(t.init_ms)},
                                 {"assembly_ms", stat(t.assembly_ms)},
                                 {"samples", t.kl.size()}});
        }
    if (o.json) {
        std::cout << nlohmann::json{{"model", model_name},
                                    {"results", results},
                                    {"summaries", summaries}}
                         .dump(1)
                  << "\n";
    } else {
        std::printf("%-3s %-13s %-28s %-28s %-10s %-10s %-10s %s\n", "K", "initialiser",
                    "KL nats [95% CI]", "state error [95% CI]", "err max", "init ms", "assembly ms",
                    "n");
        for (const auto& s : summaries) {
            char kl[64], err[64];
            std::snprintf(kl, sizeof kl, "%.3g [%.3g, %.3g]", s["kl"]["mean"].get<double>(),
                          s["kl"]["ci95"][0].get<double>(), s["kl"]["ci95"][1].get<double>());
            std::snprintf(err, sizeof err, "%.3g [%.3g, %.3g]",
                          s["state_error_mean"]["mean"].get<double>(),
                          s["state_error_mean"]["ci95"][0].get<double>(),
                          s["state_error_mean"]["ci95"][1].get<double>());
            std::printf("%-3d %-13s %-28s %-28s %-10.3g %-10.3g %-10.3g %d\n",
                        s["documents"].get<int>(), s["initialiser"].get<std::string>().c_str(), kl,
                        err, s["state_error_max"]["mean"].get<double>(),
                        s["init_ms"]["mean"].get<double>(), s["assembly_ms"]["mean"].get<double>(),
                        s["samples"].get<int>());
        }
    }
    return 0;
}

} // namespace spanscope::cli
