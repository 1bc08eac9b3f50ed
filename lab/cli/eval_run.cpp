#include "lab/cli/eval_run.h"

#include "spanscope_git_commit.h"  // SPANSCOPE_GIT_COMMIT, generated at build time
#include "storage/project_clock.h" // now_iso

#include "engine/linearkv/unit_prefill.h"
#include "engine/memory/memory_eviction.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "lab/evaluation/eval_fidelity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <thread>

#include <unistd.h> // access

namespace spanscope::cli {

std::string EvalConfig::label() const {
    if (policy == "full")
        return policy;
    char pct[32];
    std::snprintf(pct, sizeof pct, "@%g%%", std::round(budget * 1000.0) / 10.0);
    return policy + pct;
}

SessionOptions config_options(const SessionOptions& base, const EvalConfig& c) {
    SessionOptions so = base;
    so.global_policy = c.policy;
    so.sekv.budget = c.budget;
    so.eviction.budget = c.budget;
    return so;
}

SharedPrefill prefill_shared(const Model& model, const SessionOptions& base,
                             const std::vector<DocumentUnit>& units, bool surprisal) {
    SessionOptions so = base;
    so.global_policy = "h2o"; // records what the eviction rules select by; exact until sealed
    Session session(model, so);
    SharedPrefill p;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& u : units)
        prefill_unit(
            session, u, 0, session.n_past(),
            [&](size_t, const std::vector<float>& r, const std::vector<float>&) {
                if (surprisal)
                    p.row_surprisal.insert(p.row_surprisal.end(), r.begin(), r.end());
            },
            nullptr, {}, surprisal);
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    p.n_past = session.n_past();
    p.memory = session.memory().clone();
    return p;
}

std::vector<int> served_layers(const SharedPrefill& p) {
    std::vector<int> out;
    for (int il = 0; il < p.memory.n_layers(); ++il)
        if (!p.memory.is_recurrent(il) &&
            dynamic_cast<const EvictionMemory*>(&p.memory.layer(il)) != nullptr)
            out.push_back(il);
    return out;
}

MemoryStats memory_of_layers(const ModelMemory& memory, const std::vector<int>& layers) {
    MemoryStats t;
    for (const int il : layers)
        t += memory.layer(il).stats();
    return t;
}

std::unique_ptr<Session> session_for(const Model& model, const SessionOptions& options,
                                     const SharedPrefill& p, SealInfo* seal) {
    auto session = std::make_unique<Session>(model, options);
    ModelMemory& target = session->memory();
    EvictionRule rule{};
    const bool evicts = eviction_rule_from_name(options.global_policy, rule);
    for (int il = 0; il < target.n_layers(); ++il) {
        if (target.is_recurrent(il)) { // one policy: the state itself
            target.recurrent(il) = p.memory.recurrent(il);
            continue;
        }
        const LayerMemory& src = p.memory.layer(il);
        LayerMemory& dst = target.layer(il);
        const auto* recorded = dynamic_cast<const EvictionMemory*>(&src);
        if (evicts && recorded) {
            target.replace(il, recorded->with_rule(rule, options.eviction));
        } else if (src.policy() == dst.policy()) {
            target.replace(il, src.clone()); // sliding layers, and global layers kept `full`
        } else {
            // full, sekv, chunk_summary: the same rows, stored as the policy stores them.
            std::vector<float> k, v;
            std::vector<int32_t> pos;
            const int64_t n = src.read_rows(0, std::numeric_limits<int32_t>::max(), k, v, pos);
            dst.store(k.data(), v.data(), pos.data(), n);
        }
    }
    session->adopt_memory(p.n_past);
    if (!target.sealing_layers().empty()) {
        const bool segments = target.needs_segmentation();
        auto info = session->seal_context(segments ? p.row_surprisal.data() : nullptr, 0, p.n_past);
        if (seal)
            *seal = std::move(info);
    }
    return session;
}

std::vector<std::vector<float>> teacher_forced(Session& session, const ModelMemory& before,
                                               int64_t n_past, const std::vector<int32_t>& question,
                                               const std::vector<int32_t>& tokens) {
    session.memory() = before.clone();
    session.adopt_memory(n_past);
    std::vector<std::vector<float>> out;
    auto logits = session.prefill(question);
    out.push_back(eval::log_softmax(logits));
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        logits = session.decode(tokens[i]);
        out.push_back(eval::log_softmax(logits));
    }
    return out;
}

std::vector<int32_t> sample_question(const Tokenizer& tok, ChatFormat format,
                                     const eval::EvalSample& s) {
    auto question = question_tokens(tok, format, s.question);
    if (!s.answer_prefix.empty()) {
        // A completion prompt ends in "Answer:"; RULER puts a space before its prefix there.
        const auto prefix =
            tok.encode((format != ChatFormat::Completion ? "" : " ") + s.answer_prefix, false,
                       tok.start_after(question));
        question.insert(question.end(), prefix.begin(), prefix.end());
    }
    return question;
}

std::vector<std::vector<float>> fidelity_steps(Session& session, const ModelMemory& before,
                                               int64_t n_past, const std::vector<int32_t>& question,
                                               const std::vector<int32_t>& tokens,
                                               std::vector<std::vector<float>> steps,
                                               const std::vector<int32_t>& ref_tokens) {
    const size_t positions = std::max<size_t>(1, ref_tokens.size());
    size_t same = 0;
    while (same < tokens.size() && same < ref_tokens.size() && tokens[same] == ref_tokens[same])
        ++same;
    if (steps.size() >= positions && same + 1 >= positions) {
        steps.resize(positions);
        return steps;
    }
    return teacher_forced(session, before, n_past, question, ref_tokens);
}

std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0)
            return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

ResultLog::ResultLog(const std::string& path, const std::string& command_line, int threads,
                     std::function<std::string(const nlohmann::json&)> key)
    : path_(path), key_(std::move(key)) {
    if (path.empty())
        return;
    // Refused now rather than after the first sample's minutes of work.
    namespace fs = std::filesystem;
    const fs::path file(path);
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    if (fs::is_directory(file) ||
        (fs::exists(file) ? access(path.c_str(), W_OK) : access(dir.c_str(), W_OK)) != 0)
        throw std::runtime_error(path + ": cannot be written");
    std::ifstream in(path);
    std::string line;
    int64_t no = 0;
    while (std::getline(in, line)) {
        ++no;
        if (line.empty())
            continue;
        const auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded())
            throw std::runtime_error(path + ":" + std::to_string(no) +
                                     ": not a JSON line (fix or remove it to resume)");
        if (j.contains("policy") || j.contains("selector"))
            done_[key_(j)] = j;
    }
    run_line_ = {{"command", command_line},
                 {"started", now_iso()},
                 {"machine", cpu_name() + ", " +
                                 std::to_string(std::thread::hardware_concurrency()) + " threads"},
                 {"threads", threads},
                 {"version", SPANSCOPE_VERSION},
                 {"commit", SPANSCOPE_GIT_COMMIT}};
}

const nlohmann::json* ResultLog::find(const nlohmann::json& probe) const {
    const auto it = done_.find(key_(probe));
    return it == done_.end() ? nullptr : &it->second;
}

void ResultLog::append(const nlohmann::json& line) {
    if (path_.empty())
        return;
    if (!out_.is_open()) {
        out_.open(path_, std::ios::app);
        if (!out_)
            throw std::runtime_error(path_ + ": cannot be written");
        out_ << run_line_.dump() << "\n";
    }
    out_ << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out_.flush();
    if (!out_)
        throw std::runtime_error(path_ + ": cannot be written");
}

} // namespace spanscope::cli
