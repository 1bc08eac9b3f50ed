// `spanscope-lab eval TASK`: the evaluation harness (issue 6). For each length and sample, one
// generated prompt (lab/evaluation/eval_tasks.h) is prefilled once and answered by every policy and
// budget asked for, from that one prefill (eval_run.h). Each (sample, policy) gives one JSON
// line — prompt length, answer, expected, score, memory per tier, whether the budget was kept,
// fidelity to `full`, seconds, the sekv router and what its zoom trace says (eval_zoom_measures.h)
// — appended to --out (a run resumes: samples whose lines are all there are not computed again),
// and a summary per configuration ends the run.
// `spanscope-report` turns the lines into tables and plots (docs/results.md names the result sets).
#include "lab/cli/lab_commands.h"

#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "lab/cli/eval_run.h"
#include "lab/evaluation/eval_fidelity.h"
#include "lab/evaluation/eval_metrics.h"
#include "lab/evaluation/eval_needle_positions.h"
#include "lab/evaluation/eval_result_line.h"
#include "lab/evaluation/eval_tasks.h"
#include "lab/evaluation/eval_zoom_measures.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

namespace spanscope::cli {

namespace {

// The router that answered a sekv line: "" for training-free (the lines measured before the
// trained router existed have no "router" and were training-free), "trained:<digest>:<tau>"
// for the trained one (router_params.h RouterParams::digest; τ as result_line_tau, so that a line
// measured before "tau" said per_query resumes), "oracle" for the oracle, so that a file resumes
// with the same router only.
std::string router_key(const nlohmann::json& j) {
    if (j.value("router", "") == kRouterOracle)
        return kRouterOracle;
    if (j.value("router", "") != kRouterTrained)
        return "";
    return "trained:" + j.value("zoom_digest", "") + ":" +
           result_line_tau(true, j.value("tau", ""), j.value("settings", ""));
}

std::string result_key(const nlohmann::json& j) {
    return j.value("task", "") + "|" + j.value("haystack", "") + "|" +
           std::to_string(j.value("target_length", int64_t{0})) + "|" +
           std::to_string(j.value("depth", 0.0)) + "|" + std::to_string(j.value("index", 0)) + "|" +
           std::to_string(j.value("seed", uint64_t{0})) + "|" + j.value("policy", "") + "|" +
           std::to_string(j.value("budget", 1.0)) + "|" + j.value("settings", "") + "|" +
           j.value("question", "") + "|" + j.value("answer_prefix", "") + "|" + router_key(j);
}

// The router fields of a sekv line (none for the other policies).
void put_router(nlohmann::json& j, const EvalConfig& c, const RouterChoice& router) {
    if (c.policy != "sekv")
        return;
    put_router_fields(j, router);
}

// What else decides a result: the model file, the answer length and SEKV's settings. A line
// measured with other settings is never taken for this run's.
std::string settings_of(const EvalOptions& o, const std::string& model_path) {
    const auto& p = o.policy;
    std::string layers;
    for (const int l : p.layers)
        layers += (layers.empty() ? "" : ",") + std::to_string(l);
    return std::filesystem::path(model_path).filename().string() +
           " max_tokens=" + std::to_string(o.max_tokens) +
           " expand_rate=" + std::to_string(p.expand_rate) +
           " expand_rows=" + std::to_string(p.expand_rows) + " alpha=" + std::to_string(p.alpha) +
           " max_span=" + std::to_string(p.max_span) + " layers=" + layers +
           (p.tau_per_query ? kSettingsTauPerQuery : "") + (p.full_rank ? kSettingsFullRank : "") +
           (o.summary_weights == "uniform" ? kSettingsUniformSummary : "") +
           (p.rerank > 0 ? kSettingsRerank + std::to_string(p.rerank) : std::string()) +
           // The energy gate's fraction where it is not the one lines before it was an option
           // ran with; factors in f16 since SEKV state format 2 (lines before held fp32).
           (p.rank_energy != 0.999 ? " rank_energy=" + std::to_string(p.rank_energy)
                                   : std::string()) +
           " factors=" + p.factors +
           // Another backend gives other roundings: its lines are another configuration.
           (o.backend == "cpu" ? std::string() : " backend=" + o.backend);
}

// Each (policy, budget) once, full first; two budgets with one label ("35%") are refused, as
// their results could not be told apart.
std::vector<EvalConfig> configs_of(const EvalOptions& o) {
    std::vector<EvalConfig> out;
    std::set<std::string> labels;
    auto add = [&](const EvalConfig& c) {
        const bool same = std::any_of(out.begin(), out.end(), [&](const EvalConfig& x) {
            return x.policy == c.policy && x.budget == c.budget;
        });
        if (same)
            return;
        if (!labels.insert(c.label()).second)
            throw std::invalid_argument("--budget: two budgets are both " + c.label() +
                                        "; give budgets that differ by at least 0.001");
        out.push_back(c);
    };
    for (const auto& p : o.policies)
        if (p == "full")
            add({"full", 1.0});
    for (const double b : o.budgets)
        for (const auto& p : o.policies)
            if (p != "full")
                add({p, b});
    return out;
}

// One policy's answer to one sample, as a result line. m: the memory of the layers the
// compressed policies serve (full's too, measured the same way), after the answer.
nlohmann::json answer_line(const eval::EvalSample& s, const EvalConfig& c, const Answer& ans,
                           const MemoryStats& m, double seconds) {
    nlohmann::json j{{"policy", c.policy},
                     {"budget", c.budget},
                     {"answer", ans.text},
                     {"expected", s.expected},
                     {"metric", s.metric},
                     {"score", eval::score(s.metric, ans.text, s.expected)},
                     {"answer_tokens", ans.tokens.size()},
                     {"answer_s", seconds}};
    j["memory"] = {{"fast_tier_bytes", m.fast_tier_bytes},
                   {"host_tier_bytes", m.host_tier_bytes},
                   {"full_kv_bytes", m.full_kv_bytes}};
    if (m.full_kv_bytes <= 0)
        throw std::logic_error(c.label() + ": no memory in the layers the policies serve");
    const double fraction =
        static_cast<double>(m.fast_tier_bytes) / static_cast<double>(m.full_kv_bytes);
    j["fast_tier_fraction"] = fraction;
    j["cache_fraction"] = whole_cache_fraction(ans.stats); // every layer, both tiers
    // The budget is checked on what the memory held after the answer, for every sample: a
    // compressor that silently ran with a full cache fails here (tests/README.md, failure mode 13).
    j["within_budget"] = fraction <= c.budget + 1e-9;
    if (c.policy == "sekv")
        j["expansions"] = ans.stats.expansions;
    if (m.spans > 0)
        j["spans"] = m.spans / std::max<int64_t>(1, std::ssize(ans.stats.sekv_layers));
    return j;
}

struct Tally {
    std::vector<double> scores, fraction, top1, kl, greedy;
    std::vector<double> expanded_share; ///< the sekv lines' expanded_share_median
    int over_budget = 0;
    int needle_top3 = 0, needle_lines = 0; ///< needle lines with top3 true, with top3 not null
};

} // namespace

int run_eval(const EvalOptions& o) {
    auto model = open_model(o.model, o.backend);
    // The settings as they run: defaults that the given ones rule out have given way.
    EvalOptions as_run = o;
    as_run.policy = with_defaults_resolved(o.policy, model->backend());
    const std::string settings = settings_of(as_run, model->path());
    const auto& info = model->info();
    const auto& tok = model->tokenizer();
    const auto corpus = eval::load_corpus(o.qa_set);
    const auto configs = configs_of(o);
    if (configs.empty())
        throw std::invalid_argument("no policy to evaluate");
    const bool segments = std::any_of(configs.begin(), configs.end(), [](const EvalConfig& c) {
        return c.policy == "sekv" || c.policy == "chunk_summary";
    });
    const ChatFormat format = chat_format_of(info, model->tokenizer());
    ChunkingOptions co;
    co.chat_format = format;
    co.max_unit_tokens = INT64_MAX / 4; // one unit: the whole context in one sealed stretch

    // The sekv router, chosen before anything is written (trained without a file is refused).
    const bool routes = std::any_of(configs.begin(), configs.end(),
                                    [](const EvalConfig& c) { return c.policy == "sekv"; });
    const auto setup = policy_setup_for_runs(o.policy, *model, o.threads, routes, print_note);
    const auto& router = setup.router;
    if (o.summary_weights != "surprisal" && o.summary_weights != "uniform")
        throw std::invalid_argument("--summary-weights must be surprisal or uniform, not '" +
                                    o.summary_weights + "'");
    const bool uniform_summary = o.summary_weights == "uniform";
    if (uniform_summary && !segments)
        throw std::invalid_argument("--summary-weights uniform applies to the sekv and "
                                    "chunk_summary policies");
    if (uniform_summary && router.mode == kRouterTrained)
        throw std::invalid_argument("--summary-weights uniform: the trained router was trained "
                                    "on surprisal-weighted summary rows; give --router "
                                    "training-free or oracle");

    // Resume: results already in --out are read back and not computed again.
    ResultLog log(o.out, o.command_line, o.threads, result_key);
    SessionOptions base = setup.options; // SEKV's knobs (expand rate, α, layers) for sekv runs
    base.sekv.uniform_summary = uniform_summary;

    std::map<std::string, Tally> tally;
    nlohmann::json results = nlohmann::json::array();
    auto record = [&](const nlohmann::json& j) {
        auto& t = tally[EvalConfig{j["policy"], j["budget"]}.label()];
        t.scores.push_back(j["score"].get<double>());
        // A resumed line without them is refused, never taken for a full cache within budget.
        if (!j.contains("fast_tier_fraction") || !j["fast_tier_fraction"].is_number() ||
            !j.contains("within_budget") || !j["within_budget"].is_boolean())
            throw std::runtime_error(o.out + ": a result line of " +
                                     EvalConfig{j["policy"], j["budget"]}.label() + " (sample " +
                                     std::to_string(j.value("index", 0)) +
                                     ") lacks fast_tier_fraction or within_budget; remove it to "
                                     "measure that sample again");
        t.fraction.push_back(j["fast_tier_fraction"].get<double>());
        t.over_budget += !j["within_budget"].get<bool>();
        if (j.contains("fidelity")) {
            t.top1.push_back(j["fidelity"]["top1_agreement"].get<double>());
            t.kl.push_back(j["fidelity"]["kl"].get<double>());
            t.greedy.push_back(j["fidelity"]["greedy_agreement"].get<double>());
        }
        if (j.contains("expanded_share_median"))
            t.expanded_share.push_back(j["expanded_share_median"].get<double>());
        if (j.contains("needle_mass") && j["needle_mass"]["top3"].is_boolean()) {
            ++t.needle_lines;
            t.needle_top3 += j["needle_mass"]["top3"].get<bool>();
        }
        if (o.json)
            results.push_back(j);
    };
    for (const int64_t length : o.lengths)
        for (int i = 0; i < o.samples; ++i) {
            eval::TaskRequest req;
            req.task = o.task;
            req.haystack = o.haystack;
            req.target_length = length;
            req.depth = o.depths[static_cast<size_t>(i) % o.depths.size()] / 100.0;
            req.seed = o.seed;
            req.index = i;
            const auto s = eval::make_sample(tok, req, corpus);
            nlohmann::json head{
                {"task", s.task},     {"haystack", s.haystack}, {"target_length", length},
                {"depth", req.depth}, {"settings", settings},   {"index", i},
                {"seed", o.seed},     {"question", s.question}, {"meta", s.meta}};
            if (!s.answer_prefix.empty())
                head["answer_prefix"] = s.answer_prefix;
            std::vector<nlohmann::json> lines;
            bool all_done = true;
            for (const auto& c : configs) {
                auto probe = head;
                probe["policy"] = c.policy;
                probe["budget"] = c.budget;
                put_router(probe, c, router);
                const auto* found = log.find(probe);
                if (!found) {
                    all_done = false;
                    break;
                }
                lines.push_back(*found);
                if (c.policy == "sekv" && !found->contains("router"))
                    lines.back()["router"] = kRouterTrainingFree; // measured before the field
            }
            if (!all_done) {
                lines.clear();
                const auto units = build_document_units(tok, "notes.txt", s.context, co);
                // The asked needle's positions in the sessions (needle tasks only).
                std::optional<TokenSpan> needle;
                if (const auto bytes = eval::asked_needle_bytes(s))
                    needle = eval::text_positions(units, *bytes);
                const auto question = sample_question(tok, format, s);
                const int max_tokens = o.max_tokens > 0 ? o.max_tokens : s.max_tokens;
                int64_t n = 0;
                for (const auto& u : units)
                    n += u.n_tokens();
                base.n_ctx = std::min<int64_t>(
                    info.n_ctx_train, n + static_cast<int64_t>(question.size()) + max_tokens);
                const auto shared = prefill_shared(*model, base, units, segments);
                const auto served = served_layers(shared);
                if (served.empty())
                    throw std::runtime_error(
                        model->path() +
                        ": no global-attention layer for the memory policies to serve");
                head["length"] = n;
                head["prefill_s"] = shared.seconds;
                SamplingParams greedy;
                greedy.temperature = 0;
                std::vector<int32_t> ref_tokens;
                std::vector<std::vector<float>> ref;
                // full first: the others' fidelity is measured against its answer.
                std::vector<EvalConfig> order = configs;
                std::stable_partition(order.begin(), order.end(),
                                      [](const EvalConfig& c) { return c.policy == "full"; });
                const bool has_full = order.front().policy == "full";
                if (!has_full)
                    order.insert(order.begin(), EvalConfig{"full", 1.0});
                for (const auto& c : order) {
                    const auto t0 = std::chrono::steady_clock::now();
                    SealInfo seal;
                    auto session = session_for(*model, config_options(base, c), shared, &seal);
                    const ModelMemory before = session->memory().clone();
                    std::vector<std::vector<float>> steps; // log-softmax at each answer position
                    const auto ans =
                        session->answer_after_context(question, format, max_tokens, greedy, {},
                                                      nullptr, [&](const std::vector<float>& l) {
                                                          steps.push_back(eval::log_softmax(l));
                                                      });
                    const double secs =
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                            .count();
                    // Measured on the layers the compressed policies serve, for full too.
                    const MemoryStats held = memory_of_layers(session->memory(), served);
                    if (c.policy != "full") {
                        std::vector<int> sealed;
                        for (const auto& [il, m] : ans.stats.sekv_layers)
                            sealed.push_back(il);
                        if (sealed != served)
                            throw std::logic_error(c.label() +
                                                   " held other layers than the ones it serves");
                    }
                    if (c.policy == "full") {
                        ref_tokens = ans.tokens;
                        steps.resize(
                            std::min(steps.size(), std::max<size_t>(1, ans.tokens.size())));
                        ref = std::move(steps);
                        if (!has_full)
                            continue; // only the reference for the others' fidelity
                    }
                    nlohmann::json j = head;
                    j.update(answer_line(s, c, ans, held, secs));
                    put_router(j, c, router);
                    if (c.policy == "sekv")
                        eval::put_zoom_measures(j, ans.zoom, seal.segmentation.spans, needle);
                    if (c.policy != "full") {
                        steps = fidelity_steps(*session, before, shared.n_past, question,
                                               ans.tokens, std::move(steps), ref_tokens);
                        j["fidelity"] = eval::fidelity(ans.tokens, steps, ref_tokens, ref);
                    }
                    lines.push_back(j);
                    log.append(j);
                }
            }
            for (const auto& j : lines) {
                record(j);
                if (!o.quiet)
                    std::cerr << j.value("target_length", int64_t{0}) << " #" << i << " depth "
                              << j.value("depth", 0.0) << " "
                              << EvalConfig{j["policy"], j["budget"]}.label() << ": "
                              << j.value("score", 0.0) << " \"" << j.value("answer", std::string())
                              << "\" (fast tier " << j.value("fast_tier_fraction", 1.0) << ")\n";
            }
        }

    nlohmann::json summaries = nlohmann::json::array();
    int over = 0;
    for (const auto& c : configs) {
        const auto& t = tally[c.label()];
        auto mean = [](const std::vector<double>& v) {
            double s = 0;
            for (const double x : v)
                s += x;
            return v.empty() ? 0.0 : s / static_cast<double>(v.size());
        };
        const auto ci = eval::mean_interval(t.scores);
        nlohmann::json sj{{"policy", c.policy},
                          {"budget", c.budget},
                          {"label", c.label()},
                          {"task", o.task},
                          {"accuracy", mean(t.scores)},
                          {"ci95", {ci.low, ci.high}},
                          {"samples", t.scores.size()},
                          {"mean_fast_tier_fraction", mean(t.fraction)},
                          {"samples_over_budget", t.over_budget}};
        put_router(sj, c, router);
        if (!t.top1.empty())
            sj["fidelity"] = {{"greedy_agreement", mean(t.greedy)},
                              {"top1_agreement", mean(t.top1)},
                              {"kl", mean(t.kl)}};
        // The zoom measures: the median of the lines' medians, and how often the asked
        // needle's best span was among the 3 of most attention mass (lines where it is defined).
        if (const auto share = eval::median(t.expanded_share))
            sj["expanded_share_median"] = *share;
        if (t.needle_lines > 0) {
            sj["needle_top3"] = static_cast<double>(t.needle_top3) / t.needle_lines;
            sj["needle_top3_samples"] = t.needle_lines;
        }
        over += t.over_budget;
        summaries.push_back(sj);
    }
    if (o.json) {
        nlohmann::json j{{"task", o.task}, {"results", results}, {"summaries", summaries}};
        if (summaries.size() == 1)
            j["summary"] = summaries[0];
        std::cout << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        for (const auto& sj : summaries) {
            std::printf("%-22s accuracy %5.1f %% [%5.1f, %5.1f] (n %d)  fast tier %5.1f %%  over "
                        "budget %d",
                        sj["label"].get<std::string>().c_str(), 100 * sj["accuracy"].get<double>(),
                        100 * sj["ci95"][0].get<double>(), 100 * sj["ci95"][1].get<double>(),
                        sj["samples"].get<int>(), 100 * sj["mean_fast_tier_fraction"].get<double>(),
                        sj["samples_over_budget"].get<int>());
            if (sj.contains("expanded_share_median"))
                std::printf("  expanded %5.1f %%", 100 * sj["expanded_share_median"].get<double>());
            if (sj.contains("needle_top3"))
                std::printf("  needle in top 3 %d/%d",
                            static_cast<int>(std::lround(sj["needle_top3"].get<double>() *
                                                         sj["needle_top3_samples"].get<int>())),
                            sj["needle_top3_samples"].get<int>());
            std::printf("\n");
        }
    }
    if (over > 0 && !o.allow_over_budget) {
        std::cerr << "spanscope-lab: " << over
                  << " compressed answers held more than their budget (see within_budget)\n";
        return 1;
    }
    return 0;
}

} // namespace spanscope::cli
