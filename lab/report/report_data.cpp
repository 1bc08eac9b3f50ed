// Loading and checking result lines; the aggregation is in report_aggregate.cpp.
#include "lab/report/report_data.h"
#include "lab/evaluation/eval_result_line.h" // kRouter*, kTau*, result_line_*
#include "lab/report/report_line_reader.h"
#include "lab/report/report_pic.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace spanscope::report {

using nlohmann::json;

namespace {

ResultRow parse_result(const LineReader& r) {
    ResultRow row;
    row.task = r.string("task");
    row.haystack = r.string("haystack");
    if (r.find("settings"))
        row.settings = r.string("settings");
    const long long length = r.integer("target_length");
    if (length <= 0 || length > 1'000'000'000)
        r.fail("\"target_length\" " + std::to_string(length) + " is not a positive length");
    row.target_length = static_cast<int>(length);
    row.depth = r.number("depth");
    if (row.depth < 0 || row.depth > 1)
        r.fail("\"depth\" " + key_number(row.depth) + " is outside [0, 1]");
    row.index = r.integer("index");
    row.seed = r.integer("seed");
    row.policy = r.string("policy");
    if (row.policy.empty())
        r.fail("\"policy\" is empty");
    // SEKV's trained router is its own configuration (issue 8); lines without "router" were
    // measured with the training-free one.
    const std::string router = r.find("router") ? r.string("router") : "";
    if (r.find("router") && router != kRouterTrained && router != kRouterTrainingFree &&
        router != kRouterOracle)
        r.fail("\"router\" \"" + router + "\" is not " + kRouterTrained + ", " +
               kRouterTrainingFree + " or " + kRouterOracle);
    const bool trained = router == kRouterTrained;
    // The oracle router (SekvRouterOptions::oracle) is an upper bound, never pooled with the
    // routers that answer: its own configuration, with τ per query only.
    const bool oracle = router == kRouterOracle;
    // The settings are shared by every policy of a run: only a sekv line's name its τ rule.
    const std::string tau =
        row.policy == "sekv"
            ? result_line_tau(trained, r.find("tau") ? r.string("tau") : "", row.settings)
            : "";
    if (trained) {
        // τ calibrated on the question (the default), the learned thresholds (--learned-tau) or
        // τ per query (--tau-per-query, below).
        if (tau != kTauLearned && tau != kTauCalibrated && tau != kTauPerQuery)
            r.fail("\"tau\" \"" + tau + "\" is not " + kTauLearned + ", " + kTauCalibrated +
                   " or " + kTauPerQuery);
        row.policy += tau == kTauLearned ? "-trained-learned-tau" : "-trained";
        if (r.find("zoom_digest"))
            row.zoom_digest = r.string("zoom_digest");
        // The trained router with the energy gate (--full-rank); lines measured before
        // "rank_gate" existed say so in their settings only.
        const std::string gate = r.find("rank_gate") ? r.string("rank_gate") : "";
        if (r.find("rank_gate") && gate != kRankGateEnergy)
            r.fail("\"rank_gate\" \"" + gate + "\" is not " + kRankGateEnergy);
        if (result_line_full_rank(gate, row.settings))
            row.policy += "-full-rank";
    } else if (oracle && tau != kTauPerQuery) {
        r.fail("the oracle router's \"tau\" \"" + tau + "\" is not " + kTauPerQuery);
    } else if (!tau.empty() && tau != kTauPerQuery) {
        r.fail("\"tau\" \"" + tau + "\" of the training-free router is not " + kTauPerQuery);
    }
    if (oracle && row.policy == "sekv")
        row.policy += "-oracle";
    if (tau == kTauPerQuery) // either router: another rule, not averaged into the default's
        row.policy += "-tau-per-query";
    // Plain-mean summary rows (eval --summary-weights uniform): the spans' policies only, as the
    // settings are shared by every policy of a run.
    const std::string base_policy = r.string("policy");
    if ((base_policy == "sekv" || base_policy == "chunk_summary") &&
        result_line_uniform_summary(row.settings)) {
        if (trained) // eval refuses it: the trained router was trained on the design's rows
            r.fail("a trained-router line with plain-mean summary rows (\"summary=uniform\" in "
                   "its settings)");
        row.policy += "-uniform-summary";
    }
    // Two-stage routing (eval --rerank N): its own configuration for each N.
    if (base_policy == "sekv") {
        int rerank = 0;
        try {
            rerank = result_line_rerank(row.settings);
        } catch (const std::invalid_argument& e) {
            r.fail(e.what());
        }
        if (rerank > 0 && oracle)
            r.fail("an oracle line with two-stage routing (\"rerank=\" in its settings)");
        if (rerank > 0 && tau != kTauPerQuery) // eval refuses to measure one
            r.fail("a line with two-stage routing (\"rerank=\" in its settings) whose τ is not " +
                   std::string(kTauPerQuery));
        if (rerank > 0)
            row.policy += "-rerank" + std::to_string(rerank);
    }
    if (r.find("budget") || row.policy != "full")
        row.budget = r.number("budget");
    if (!(row.budget > 0 && row.budget <= 1))
        r.fail("\"budget\" " + key_number(row.budget) + " is outside (0, 1]");
    row.score = r.number("score");
    if (row.score < 0 || row.score > 1)
        r.fail("\"score\" " + key_number(row.score) + " is outside [0, 1]");

    if (const json* f = r.find("fast_tier_fraction")) {
        row.fast_tier_fraction = r.number_of(*f, "fast_tier_fraction");
        if (*row.fast_tier_fraction < 0)
            r.fail("\"fast_tier_fraction\" is negative");
    } else if (const json* m = r.find("memory")) {
        if (!m->is_object())
            r.fail("\"memory\" is not an object");
        const auto fast = r.optional_number(m, "fast_tier_bytes", "memory.fast_tier_bytes");
        const auto full = r.optional_number(m, "full_kv_bytes", "memory.full_kv_bytes");
        if (fast && full && *full > 0)
            row.fast_tier_fraction = *fast / *full;
    }
    if (const json* w = r.find("within_budget")) {
        if (!w->is_boolean())
            r.fail("\"within_budget\" is not true or false");
        row.within_budget = w->get<bool>();
    }
    if (const json* x = r.find("expansions")) {
        row.expansions = r.number_of(*x, "expansions");
        if (*row.expansions < 0)
            r.fail("\"expansions\" is negative");
    }
    if (const json* f = r.find("fidelity")) {
        if (!f->is_object())
            r.fail("\"fidelity\" is not an object");
        row.fidelity.greedy_agreement =
            r.optional_number(f, "greedy_agreement", "fidelity.greedy_agreement");
        row.fidelity.top1_agreement =
            r.optional_number(f, "top1_agreement", "fidelity.top1_agreement");
        row.fidelity.kl = r.optional_number(f, "kl", "fidelity.kl");
    }
    return row;
}

std::string row_key(const ResultRow& r) {
    // A string of the key fields; '\x1f' cannot occur in the numbers and separates the strings.
    std::string k;
    for (const std::string* s : {&r.task, &r.haystack, &r.policy, &r.settings}) {
        k += std::to_string(s->size());
        k += ':';
        k += *s;
        k += '\x1f';
    }
    k += std::to_string(r.target_length) + '\x1f' + key_number(r.depth) + '\x1f' +
         std::to_string(r.index) + '\x1f' + std::to_string(r.seed) + '\x1f' + key_number(r.budget);
    return k;
}

/// A metadata value as text: strings as they are, anything else as JSON.
std::string meta_text(const json& obj, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null())
        return "";
    return it->is_string() ? it->get<std::string>() : it->dump();
}

} // namespace

int ResultRow::depth_percent() const {
    return static_cast<int>(std::lround(depth * 100.0));
}

void ResultLoader::add_file(const std::string& path) {
    std::ifstream in = open_lines(path);
    loaded_.files.push_back(path);
    add_stream(in, path);
}

void ResultLoader::add_stream(std::istream& in, const std::string& name) {
    for_each_line(in, name,
                  [&](const std::string& line, int line_no) { add_line(line, name, line_no); });
}

void ResultLoader::add_line(const std::string& raw, const std::string& name, int line_no) {
    const std::optional<json> parsed = parse_object_line(raw, name, line_no);
    if (!parsed)
        return;
    const json& obj = *parsed;
    if (obj.contains("selector")) {
        PicRow row = parse_pic_row(LineReader(obj, name, line_no));
        row.source = name + ":" + std::to_string(line_no);
        ++loaded_.result_lines;
        const std::string key = pic_row_key(row);
        const auto found = pic_row_of_key_.find(key);
        if (found != pic_row_of_key_.end()) {
            ++loaded_.duplicates;
            loaded_.pic_rows[found->second] = std::move(row);
            return;
        }
        pic_row_of_key_.emplace(key, loaded_.pic_rows.size());
        loaded_.pic_rows.push_back(std::move(row));
        return;
    }
    const bool is_result = obj.contains("policy");
    if (!is_result) {
        if (!obj.contains("command"))
            bad_line(name, line_no,
                     "neither a result (no \"policy\" or \"selector\") nor a run's metadata "
                     "(no \"command\")");
        if (!obj["command"].is_string())
            bad_line(name, line_no, "\"command\" is not a string");
        RunInfo run;
        run.command = obj["command"].get<std::string>();
        const auto found = run_of_command_.find(run.command);
        if (found != run_of_command_.end()) {
            ++loaded_.runs[found->second].occurrences;
            return;
        }
        run.started = meta_text(obj, "started");
        run.machine = meta_text(obj, "machine");
        run.threads = meta_text(obj, "threads");
        run.commit = meta_text(obj, "commit");
        run_of_command_.emplace(run.command, loaded_.runs.size());
        loaded_.runs.push_back(std::move(run));
        return;
    }
    ResultRow row = parse_result(LineReader(obj, name, line_no));
    row.source = name + ":" + std::to_string(line_no);
    if (!row.zoom_digest.empty()) {
        if (zoom_digest_.empty()) {
            zoom_digest_ = row.zoom_digest;
            zoom_digest_source_ = row.source;
        } else if (row.zoom_digest != zoom_digest_) {
            bad_line(name, line_no,
                     "sekv with the trained router of another parameter file (zoom_digest " +
                         row.zoom_digest + ", " + zoom_digest_source_ + " has " + zoom_digest_ +
                         "): report one parameter file's results at a time");
        }
    }
    // One configuration is one set of settings (model, answer length, SEKV's knobs): lines
    // measured otherwise would be pooled with it and counted as more samples.
    const std::string config = row.policy + "@" + key_number(row.budget);
    const auto [seen, first] = settings_of_config_.try_emplace(config, row.settings, row.source);
    if (!first && seen->second.first != row.settings)
        bad_line(name, line_no,
                 Config{row.policy, row.budget}.label() + " measured with other settings (\"" +
                     row.settings + "\", " + seen->second.second + " has \"" + seen->second.first +
                     "\"): report one setting's results at a time");
    ++loaded_.result_lines;
    const std::string key = row_key(row);
    const auto found = row_of_key_.find(key);
    if (found != row_of_key_.end()) {
        ++loaded_.duplicates;
        loaded_.rows[found->second] = std::move(row);
        return;
    }
    row_of_key_.emplace(key, loaded_.rows.size());
    loaded_.rows.push_back(std::move(row));
}

LoadedResults ResultLoader::finish() const {
    if (loaded_.rows.empty() && loaded_.pic_rows.empty()) {
        std::string files;
        for (const auto& f : loaded_.files)
            files += (files.empty() ? "" : ", ") + f;
        throw InputError("no result rows in " + (files.empty() ? std::string("the input") : files));
    }
    return loaded_;
}

LoadedResults load_results(const std::vector<std::string>& paths) {
    ResultLoader loader;
    for (const auto& p : paths)
        loader.add_file(p);
    return loader.finish();
}

} // namespace spanscope::report
