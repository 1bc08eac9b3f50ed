// `spanscope-lab pic-eval TASK`: position-independent caching measured (issue 7). Each generated
// sample's context (lab/evaluation/eval_tasks.h) is cut into documents (eval_documents.h), each
// prefilled on its own (own BOS, positions from 0: the cache a project keeps). A cold prefill
// of the concatenation answers first: the reference for quality and for the time to first
// token. Then, per selector and recompute ratio, the documents are assembled from their
// caches (pic_assembly.h) and answer the same question. Each (sample, selector, ratio) is one
// JSON line appended to --out (a run resumes from it); a summary per (documents, selector,
// ratio) ends the run: accuracy, accuracy of the cold prefill on the same samples, quality
// recovered (their ratio), time to first token as a share of the cold prefill's.
#include "lab/cli/lab_commands.h"

#include "engine/linearkv/pic_assembly.h"
#include "engine/model/model.h"
#include "engine/text/prompt.h"
#include "lab/cli/eval_run.h"
#include "lab/evaluation/eval_documents.h"
#include "lab/evaluation/eval_fidelity.h"
#include "lab/evaluation/eval_metrics.h"
#include "lab/evaluation/eval_tasks.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

namespace spanscope::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct PicConfig {
    std::string selector;
    double ratio = 0;
    std::string label() const {
        if (selector == "none" || selector == "full" || selector == "cold")
            return selector;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s@%g", selector.c_str(), ratio);
        return buf;
    }
};

std::vector<PicConfig> configs_of(const PicEvalOptions& o) {
    std::vector<PicConfig> out{{"cold", 1.0}}; // the reference, always measured
    for (const auto& s : o.selectors) {
        if (s == "none")
            out.push_back({"none", 0.0});
        else if (s == "full")
            out.push_back({"full", 1.0});
        else
            for (const double r : o.ratios)
                out.push_back({s, r});
    }
    return out;
}

std::string result_key(const nlohmann::json& j) {
    return j.value("task", "") + "|" + std::to_string(j.value("target_length", int64_t{0})) + "|" +
           std::to_string(j.value("documents", 0)) + "|" + std::to_string(j.value("depth", 0.0)) +
           "|" + std::to_string(j.value("index", 0)) + "|" +
           std::to_string(j.value("seed", uint64_t{0})) + "|" + j.value("selector", "") + "|" +
           std::to_string(j.value("ratio", 0.0)) + "|" + j.value("settings", "") + "|" +
           j.value("question", "") + "|" + j.value("answer_prefix", "");
}

// A document as a project prefills it: its header (BOS, chat turn, name), text and trailer.
std::vector<int32_t> document_tokens(const Tokenizer& tok, ChatFormat format,
                                     const std::string& name, const std::string& text) {
    auto out = document_unit_header(tok, format, name, 1, 1);
    const auto body = tok.encode(text, false, tok.start_after(out));
    out.insert(out.end(), body.begin(), body.end());
    const auto trailer =
        document_unit_trailer(tok, !text.empty() && text.back() == '\n', tok.start_after(body));
    out.insert(out.end(), trailer.begin(), trailer.end());
    return out;
}

struct Tally {
    std::vector<double> scores, cold, ttft_ratio, recompute_share, forwarded_share, top1, kl;
};

} // namespace

int run_pic_eval(const PicEvalOptions& o) {
    auto model = open_model(o.model);
    const auto& info = model->info();
    const auto& tok = model->tokenizer();
    const auto corpus = eval::load_corpus(o.qa_set);
    const auto configs = configs_of(o);
    const std::string settings = std::filesystem::path(model->path()).filename().string() +
                                 " max_tokens=" + std::to_string(o.max_tokens) +
                                 " check_layer=" + std::to_string(o.check_layer) +
                                 " pic=1"; // bump when the selectors' meaning changes
    const ChatFormat format = chat_format_of(info, model->tokenizer());
    for (const auto& c : configs) // refused before anything is computed or written
        if (c.selector != "cold") {
            RecomputeOptions ro;
            ro.selector = c.selector;
            ro.ratio = c.selector == "cacheblend" ? c.ratio : 1.0;
            ro.check_layer = o.check_layer;
            check_recompute_options(info, ro);
        }
    ResultLog log(o.out, o.command_line, o.threads, result_key);
    ThreadPool pool(o.threads > 0 ? o.threads : 0);
    SessionOptions so;
    so.threads = o.threads;
    SamplingParams greedy;
    greedy.temperature = 0;

    std::map<std::string, Tally> tally; // by "documents|label"
    nlohmann::json results = nlohmann::json::array();
    for (const int64_t length : o.lengths)
        for (const int n_docs : o.documents)
            for (int i = 0; i < o.samples; ++i) {
                eval::TaskRequest req;
                req.task = o.task;
                req.target_length = length;
                req.depth = o.depths[static_cast<size_t>(i) % o.depths.size()] / 100.0;
                req.seed = o.seed;
                req.index = i;
                const auto s = eval::make_sample(tok, req, corpus);
                const auto pieces = eval::split_into_documents(tok, s.context, n_docs);
                // The document the question is about: the first needle's, or the answer's.
                std::string marker = s.expected.front();
                if (s.meta.contains("needles") && !s.meta["needles"].empty())
                    marker = s.meta["needles"][0].get<std::string>();
                nlohmann::json head{{"task", s.task},
                                    {"target_length", length},
                                    {"documents", n_docs},
                                    {"depth", req.depth},
                                    {"index", i},
                                    {"seed", o.seed},
                                    {"settings", settings},
                                    {"question", s.question},
                                    {"answer_prefix", s.answer_prefix},
                                    {"answer_document", eval::document_holding(pieces, marker)},
                                    {"meta", s.meta}};
                std::vector<nlohmann::json> lines;
                for (const auto& c : configs) {
                    auto probe = head;
                    probe["selector"] = c.selector;
                    probe["ratio"] = c.ratio;
                    if (const auto* found = log.find(probe))
                        lines.push_back(*found);
                }
                if (lines.size() != configs.size()) {
                    lines.clear();
                    std::vector<std::vector<int32_t>> doc_tokens;
                    for (size_t d = 0; d < pieces.size(); ++d)
                        doc_tokens.push_back(document_tokens(
                            tok, format, "part-" + std::to_string(d + 1) + ".txt", pieces[d]));
                    const auto question = sample_question(tok, format, s);
                    const int max_tokens = o.max_tokens > 0 ? o.max_tokens : s.max_tokens;
                    int64_t n_past = 0;
                    for (const auto& d : doc_tokens)
                        n_past += std::ssize(d);
                    so.n_ctx = std::min<int64_t>(info.n_ctx_train,
                                                 n_past + std::ssize(question) + max_tokens);
                    head["length"] = n_past;

                    // The documents' caches, each prefilled on its own.
                    const auto tc = Clock::now();
                    std::vector<CachedDocument> cached;
                    for (const auto& d : doc_tokens)
                        cached.push_back(prefill_document(*model, d, pool));
                    head["cache_ms"] = ms_since(tc);
                    std::vector<const CachedDocument*> ptrs;
                    for (const auto& d : cached)
                        ptrs.push_back(&d);

                    std::vector<int32_t> ref_tokens;
                    std::vector<std::vector<float>> ref;
                    double cold_ttft = 0, cold_score = 0;
                    for (const auto& c : configs) {
                        nlohmann::json j = head;
                        j["selector"] = c.selector;
                        j["ratio"] = c.ratio;
                        std::vector<std::vector<float>> steps;
                        auto on_logits = [&](const std::vector<float>& l) {
                            steps.push_back(eval::log_softmax(l));
                        };
                        const auto t0 = Clock::now();
                        Session session(*model, so);
                        ModelMemory before;
                        double assembly_ms = 0;
                        if (c.selector == "cold") {
                            std::vector<int32_t> all;
                            for (const auto& d : doc_tokens)
                                all.insert(all.end(), d.begin(), d.end());
                            session.prefill(all);
                            assembly_ms = ms_since(t0);
                        } else {
                            RecomputeOptions ro;
                            ro.selector = c.selector;
                            // The ratio is a share of the context's tokens for every
                            // selector; CacheBlend's applies to the tokens it forwards (the
                            // documents after the first), so it is scaled to them.
                            const auto later = n_past - std::ssize(doc_tokens.front());
                            ro.ratio = c.selector == "cacheblend" && later > 0
                                           ? std::min(1.0, c.ratio * static_cast<double>(n_past) /
                                                               static_cast<double>(later))
                                           : 1.0;
                            ro.check_layer = o.check_layer;
                            ro.ubatch = so.ubatch;
                            // EPIC's k: the ratio's share of the context over the later
                            // documents.
                            ro.epic_tokens = epic_tokens_for(c.ratio, n_past, std::ssize(ptrs));
                            auto a = assemble_documents(*model, ptrs, ro, pool, so.n_ctx);
                            assembly_ms = ms_since(t0);
                            j["recompute_set"] = a.stats.recompute_set;
                            j["recompute_share"] = static_cast<double>(a.stats.recompute_set) /
                                                   static_cast<double>(a.n_past);
                            j["tokens_forwarded"] = a.stats.tokens_forwarded;
                            // CacheBlend runs every forwarded token through the layers up to
                            // its check layer: that share of the context is also paid for.
                            j["forwarded_share"] = static_cast<double>(a.stats.tokens_forwarded) /
                                                   static_cast<double>(a.n_past);
                            if (c.selector == "epic")
                                j["epic_tokens"] = ro.epic_tokens;
                            auto kind = [](const LayerKindCount& k) {
                                return nlohmann::json{{"layers", k.layers},
                                                      {"rows_recomputed", k.rows_recomputed},
                                                      {"rows_reused", k.rows_reused}};
                            };
                            j["layer_rows"] = {{"global", kind(a.stats.global)},
                                               {"sliding", kind(a.stats.sliding)}};
                            session.memory() = std::move(a.memory);
                            session.adopt_memory(a.n_past);
                            before = session.memory().clone();
                        }
                        const auto ans = session.answer_after_context(
                            question, format, max_tokens, greedy, {}, nullptr, on_logits);
                        const double ttft = assembly_ms + ans.stats.ttft_ms;
                        const double score = eval::score(s.metric, ans.text, s.expected);
                        j.update({{"answer", ans.text},
                                  {"expected", s.expected},
                                  {"metric", s.metric},
                                  {"score", score},
                                  {"assembly_ms", assembly_ms},
                                  {"ttft_ms", ttft}});
                        if (c.selector == "cold") {
                            cold_ttft = ttft;
                            cold_score = score;
                            ref_tokens = ans.tokens;
                            steps.resize(
                                std::min(steps.size(), std::max<size_t>(1, ans.tokens.size())));
                            ref = std::move(steps);
                        } else {
                            steps = fidelity_steps(session, before, n_past, question, ans.tokens,
                                                   std::move(steps), ref_tokens);
                            j["fidelity"] = eval::fidelity(ans.tokens, steps, ref_tokens, ref);
                        }
                        j["score_cold"] = cold_score;
                        j["ttft_cold_ms"] = cold_ttft;
                        j["ttft_ratio"] = cold_ttft > 0 ? ttft / cold_ttft : 1.0;
                        log.append(j);
                        lines.push_back(j);
                    }
                }
                for (const auto& j : lines) {
                    const PicConfig c{j["selector"], j["ratio"]};
                    const std::string k =
                        std::to_string(length) + "|" + std::to_string(n_docs) + "|" + c.label();
                    auto& t = tally[k];
                    t.scores.push_back(j["score"]);
                    t.cold.push_back(j["score_cold"]);
                    t.ttft_ratio.push_back(j["ttft_ratio"]);
                    t.recompute_share.push_back(j.value("recompute_share", 1.0));
                    t.forwarded_share.push_back(j.value("forwarded_share", 1.0));
                    if (j.contains("fidelity")) {
                        t.top1.push_back(j["fidelity"]["top1_agreement"]);
                        t.kl.push_back(j["fidelity"]["kl"]);
                    }
                    if (o.json)
                        results.push_back(j);
                    if (!o.quiet)
                        std::cerr << length << " tokens, " << n_docs << " documents #" << i << " "
                                  << c.label() << ": " << j["score"].get<double>() << " \""
                                  << j.value("answer", std::string()) << "\" (ttft "
                                  << j["ttft_ratio"].get<double>() << " of cold)\n";
                }
            }

    auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (const double x : v)
            s += x;
        return v.empty() ? 0.0 : s / static_cast<double>(v.size());
    };
    nlohmann::json summaries = nlohmann::json::array();
    for (const int64_t length : o.lengths)
        for (const int n_docs : o.documents)
            for (const auto& c : configs) {
                const std::string k =
                    std::to_string(length) + "|" + std::to_string(n_docs) + "|" + c.label();
                if (!tally.count(k))
                    continue;
                const auto& t = tally[k];
                const auto ci = eval::mean_interval(t.scores);
                const double acc = mean(t.scores), cold = mean(t.cold);
                nlohmann::json sj{
                    {"task", o.task},
                    {"target_length", length},
                    {"documents", n_docs},
                    {"selector", c.selector},
                    {"ratio", c.ratio},
                    {"label", c.label()},
                    {"accuracy", acc},
                    {"ci95", {ci.low, ci.high}},
                    {"accuracy_cold", cold},
                    {"quality_recovered", cold > 0 ? nlohmann::json(acc / cold) : nlohmann::json()},
                    {"ttft_ratio", mean(t.ttft_ratio)},
                    {"recompute_share", mean(t.recompute_share)},
                    {"forwarded_share", mean(t.forwarded_share)},
                    {"samples", t.scores.size()}};
                if (!t.top1.empty())
                    sj["fidelity"] = {{"top1_agreement", mean(t.top1)}, {"kl", mean(t.kl)}};
                summaries.push_back(sj);
            }
    if (o.json) {
        std::cout << nlohmann::json{{"task", o.task},
                                    {"results", results},
                                    {"summaries", summaries}}
                         .dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << "\n";
    } else {
        for (const auto& sj : summaries) {
            // No quality to recover when the cold prefill scored 0.
            char recovered[16] = "   -";
            if (!sj["quality_recovered"].is_null())
                std::snprintf(recovered, sizeof recovered, "%5.1f",
                              100 * sj["quality_recovered"].get<double>());
            std::printf(
                "%lld tokens, %d documents  %-16s accuracy %5.1f %% [%5.1f, %5.1f] (cold %5.1f %%, "
                "recovered %s %%)  ttft %.2f of cold  recomputed %4.1f %%  (n %d)\n",
                sj["target_length"].get<long long>(), sj["documents"].get<int>(),
                sj["label"].get<std::string>().c_str(), 100 * sj["accuracy"].get<double>(),
                100 * sj["ci95"][0].get<double>(), 100 * sj["ci95"][1].get<double>(),
                100 * sj["accuracy_cold"].get<double>(), recovered, sj["ttft_ratio"].get<double>(),
                100 * sj["recompute_share"].get<double>(), sj["samples"].get<int>());
        }
    }
    return 0;
}

} // namespace spanscope::cli
