// `spanscope-lab sources`: how well an answer's sources (answering/answer_sources.h) point at what
// it was answered from, and what measuring them costs, through the product's path: each sample's
// document goes into a throw-away project (a temporary directory, removed afterwards), is ingested
// (StateCache::ingest) and asked (ask_project) under each policy, with the session options
// spanscope-cli's ask would use (policy_setup).
//
// Needles: the "secret code" needle of `niah` in licence prose (eval_tasks.h,
// niah_single_number); an answer is correct when it contains the code, and its sources are judged
// against the needle's bytes in the document (where it was inserted): top1 when the first source
// overlaps them, top3 when one of the first three does. Each question is asked twice on the same
// project, once with sources and once without (ProjectQuestion::sources), each in a new chat, in
// alternating order, to compare the decode speed. One JSON line per sample and policy, then a
// summary per length and policy (top1 and top3 among the correct answers, with Wilson
// intervals; median decode tokens/s with and without sources and their ratio).
//
// --qa FILE: the question set (tests/qa/questions.json), one project per document; whether each
// answer is correct (qa_answer_matches) and whether its top source's text holds an accepted answer.
#include "lab/cli/lab_commands.h"

#include "answering/policy_settings.h"
#include "answering/project_answer.h"
#include "answering/project_settings.h"
#include "answering/state_cache.h"
#include "engine/model/model.h"
#include "lab/evaluation/eval_metrics.h"
#include "lab/evaluation/eval_qa.h"
#include "lab/evaluation/eval_tasks.h"
#include "storage/document_loader.h"
#include "storage/project.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>

namespace spanscope::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// A project in a fresh temporary directory, removed with it.
class TempProject {
public:
    TempProject() {
        std::string tmpl = (fs::temp_directory_path() / "spanscope-sources-XXXXXX").string();
        if (!mkdtemp(tmpl.data()))
            throw std::runtime_error("cannot create a temporary directory in " +
                                     fs::temp_directory_path().string());
        dir_ = tmpl;
        project_ = Project::open((dir_ / "sources.spanscope").string(), /*create=*/true);
    }
    ~TempProject() {
        project_.reset();
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    TempProject(const TempProject&) = delete;
    TempProject& operator=(const TempProject&) = delete;
    Project& operator*() { return *project_; }
    Project* operator->() { return project_.get(); }

private:
    fs::path dir_;
    std::unique_ptr<Project> project_;
};

// A policy's session options as spanscope-cli's ask gets them: full with no SEKV setting, sekv
// with the given (or default) ones.
struct PolicyRun {
    std::string name;
    PolicySetup setup;
};

std::vector<PolicyRun> policy_runs(const SourcesOptions& o, const Model& model) {
    std::vector<PolicyRun> runs;
    for (const auto& p : o.policies) {
        PolicySettings s = p == "sekv" ? o.policy : PolicySettings{};
        s.policy = p;
        s.policy_given = true;
        runs.push_back({p, policy_setup(s, model, o.threads, print_note)});
    }
    return runs;
}

ProjectAnswer ask(Project& project, const Model& model, StateCache& cache, Session& scratch,
                  const SessionOptions& options, int64_t document, const std::string& question,
                  int max_tokens, bool sources) {
    ProjectQuestion q;
    q.question = question;
    q.document_ids = {document};
    q.max_tokens = max_tokens;
    q.sampling.temperature = 0;
    q.sources = sources;
    return ask_project(project, model, cache, scratch, options, q);
}

nlohmann::json sources_json(const std::vector<SourceRecord>& sources) {
    auto out = nlohmann::json::array();
    for (const auto& s : sources)
        out.push_back({{"start_char", s.start_char},
                       {"end_char", s.end_char},
                       {"share", s.share},
                       {"excerpt", s.excerpt}});
    return out;
}

bool holds_answer(const std::string& passage, const std::vector<std::string>& accepted) {
    const std::string p = eval::collapse_lower(passage);
    for (const auto& a : accepted)
        if (!eval::collapse_lower(a).empty() &&
            p.find(eval::collapse_lower(a)) != std::string::npos)
            return true;
    return false;
}

bool overlaps(const SourceRecord& s, int64_t begin, int64_t end) {
    return s.start_char < end && begin < s.end_char;
}

double median(std::vector<double> v) {
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

nlohmann::json rate(int64_t k, int64_t n) {
    const auto ci = eval::wilson_interval(static_cast<double>(k), n);
    return {{"count", k},
            {"of", n},
            {"rate", n > 0 ? static_cast<double>(k) / static_cast<double>(n) : 0.0},
            {"interval", {ci.low, ci.high}}};
}

class Output {
public:
    explicit Output(const std::string& path) {
        if (path.empty())
            return;
        file_.open(path, std::ios::app);
        if (!file_)
            throw std::runtime_error(path + ": cannot be written");
    }
    void line(const nlohmann::json& j) {
        const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        std::cout << s << std::endl;
        if (file_) {
            file_ << s << "\n";
            file_.flush();
        }
    }

private:
    std::ofstream file_;
};

struct NeedleTally {
    int64_t n = 0, correct = 0, top1 = 0, top3 = 0, same_answer = 0;
    std::vector<double> with, without, paired;
    double ms_with = 0, ms_without = 0;
    int64_t tokens_with = 0, tokens_without = 0;
};

int run_needles(const SourcesOptions& o, const Model& model, const std::vector<PolicyRun>& runs,
                Output& out) {
    const auto corpus = eval::load_corpus();
    SessionOptions scratch_options;
    scratch_options.threads = o.threads;
    std::map<std::pair<int64_t, std::string>, NeedleTally> tally;
    for (const int64_t length : o.lengths)
        for (int i = 0; i < o.samples; ++i) {
            eval::TaskRequest req;
            req.task = "niah_single_number";
            req.haystack = "prose";
            req.target_length = length;
            req.depth = o.depths[static_cast<size_t>(i) % o.depths.size()] / 100.0;
            req.seed = o.seed;
            req.index = i;
            const auto s = eval::make_sample(model.tokenizer(), req, corpus);
            const std::string value = s.expected.at(0);
            const int64_t needle_begin = s.meta.at("needle_chars").at(0).get<int64_t>();
            const int64_t needle_end =
                needle_begin +
                static_cast<int64_t>(s.meta.at("needles").at(0).get<std::string>().size());
            const int max_tokens = o.max_tokens > 0 ? o.max_tokens : s.max_tokens;

            TempProject project;
            StateCache cache(*project, model, chunking_for(*project, model));
            Session scratch(model, scratch_options);
            LoadedDocument doc;
            doc.text = s.context;
            doc.source_encoding = "UTF-8";
            doc.offset_map = {{0, 0, 0, 1}};
            const int64_t id = project->add_document("haystack.txt", doc);
            const std::string stored = project->document_text(id);
            if (stored != s.context)
                throw std::runtime_error("the project did not keep the haystack's text as given");
            // The needle's bytes of the document as stored (what the sources' ranges index).
            const std::string needle_text = stored.substr(
                static_cast<size_t>(needle_begin), static_cast<size_t>(needle_end - needle_begin));
            const auto t0 = Clock::now();
            const auto ingested = cache.ingest(id, scratch);
            const double ingest_s = seconds_since(t0);
            for (size_t k = 0; k < runs.size(); ++k) {
                const auto& run = runs[k];
                // Alternate which goes first, over samples and policies.
                const bool with_first = (static_cast<size_t>(i) + k) % 2 == 0;
                ProjectAnswer with, without;
                if (with_first) {
                    with = ask(*project, model, cache, scratch, run.setup.options, id, s.question,
                               max_tokens, true);
                    without = ask(*project, model, cache, scratch, run.setup.options, id,
                                  s.question, max_tokens, false);
                } else {
                    without = ask(*project, model, cache, scratch, run.setup.options, id,
                                  s.question, max_tokens, false);
                    with = ask(*project, model, cache, scratch, run.setup.options, id, s.question,
                               max_tokens, true);
                }
                const auto& src = with.sources;
                const bool correct = with.answer.text.find(value) != std::string::npos;
                int rank = 0; // 1-based rank of the first source on the needle; 0: none
                for (size_t r = 0; r < src.size() && rank == 0; ++r)
                    if (overlaps(src[r], needle_begin, needle_end))
                        rank = static_cast<int>(r) + 1;
                const bool top1 = rank == 1, top3 = rank >= 1 && rank <= 3;
                const auto& sw = with.answer.stats;
                const auto& so = without.answer.stats;
                nlohmann::json j{
                    {"task", "needle"},
                    {"target_length", length},
                    {"context_tokens", s.meta.at("context_tokens")},
                    {"document_tokens", ingested.tokens},
                    {"depth", req.depth},
                    {"needle_depth", s.meta.at("needle_depths").at(0)},
                    {"index", i},
                    {"seed", o.seed},
                    {"policy", run.name},
                    {"key", s.meta.at("keys").at(0)},
                    {"value", value},
                    {"needle", {{"start_char", needle_begin}, {"end_char", needle_end}}},
                    {"needle_text", needle_text},
                    {"question", s.question},
                    {"answer", with.answer.text},
                    {"correct", correct},
                    {"sources", sources_json(src)},
                    {"needle_rank", rank},
                    {"top1", top1},
                    {"top3", top3},
                    {"top_share", src.empty() ? 0.0 : src[0].share},
                    {"first", with_first ? "with" : "without"},
                    {"same_answer", with.answer.text == without.answer.text},
                    {"decode_tokens_per_s_with", sw.decode_tokens_per_s},
                    {"decode_tokens_per_s_without", so.decode_tokens_per_s},
                    {"generated_tokens_with", sw.generated_tokens},
                    {"generated_tokens_without", so.generated_tokens},
                    {"decode_ms_with", sw.decode_ms},
                    {"decode_ms_without", so.decode_ms},
                    {"ingest_s", ingest_s}};
                if (with.stats.contains("fast_tier_fraction"))
                    j["fast_tier_fraction"] = with.stats["fast_tier_fraction"];
                if (with.stats.contains("spans"))
                    j["spans"] = with.stats["spans"];
                put_router_fields(j, run.setup.router);
                out.line(j);
                auto& t = tally[{length, run.name}];
                ++t.n;
                t.same_answer += with.answer.text == without.answer.text;
                if (correct) {
                    ++t.correct;
                    t.top1 += top1;
                    t.top3 += top3;
                }
                if (sw.decode_tokens_per_s > 0 && so.decode_tokens_per_s > 0) {
                    t.with.push_back(sw.decode_tokens_per_s);
                    t.without.push_back(so.decode_tokens_per_s);
                    t.paired.push_back(sw.decode_tokens_per_s / so.decode_tokens_per_s);
                }
                t.ms_with += sw.decode_ms;
                t.ms_without += so.decode_ms;
                t.tokens_with += sw.generated_tokens;
                t.tokens_without += so.generated_tokens;
            }
            if (!o.quiet)
                std::cerr << "sources: " << length << " tokens, sample " << i + 1 << " of "
                          << o.samples << " (ingest " << static_cast<int>(ingest_s) << " s, "
                          << static_cast<int>(seconds_since(t0)) << " s in all)\n";
        }
    for (const auto& [key, t] : tally) {
        const double with = median(t.with), without = median(t.without);
        auto per_s = [](int64_t tokens, double ms) {
            return ms > 0 ? static_cast<double>(tokens) / (ms / 1000.0) : 0.0;
        };
        const double pooled_with = per_s(t.tokens_with, t.ms_with);
        const double pooled_without = per_s(t.tokens_without, t.ms_without);
        out.line(
            {{"summary", "needles"},
             {"target_length", key.first},
             {"policy", key.second},
             {"samples", t.n},
             {"correct", t.correct},
             {"top1", rate(t.top1, t.correct)},
             {"top3", rate(t.top3, t.correct)},
             {"same_answer", t.same_answer},
             {"median_decode_tokens_per_s_with", with},
             {"median_decode_tokens_per_s_without", without},
             {"decode_ratio", without > 0 ? with / without : 0.0},
             {"median_paired_decode_ratio", median(t.paired)},
             {"pooled_decode_ratio", pooled_without > 0 ? pooled_with / pooled_without : 0.0}});
    }
    return 0;
}

struct QaTally {
    int64_t asked = 0, correct = 0, top = 0, top_correct = 0, top_excerpt = 0, top3 = 0;
};

int run_qa_sources(const SourcesOptions& o, const Model& model, const std::vector<PolicyRun>& runs,
                   Output& out) {
    const nlohmann::json set = read_qa_set(o.qa);
    std::vector<std::string> doc_order;
    auto by_doc = questions_by_document(set, doc_order);
    SessionOptions scratch_options;
    scratch_options.threads = o.threads;
    const int max_tokens = o.max_tokens > 0 ? o.max_tokens : 32;
    std::map<std::string, QaTally> tally;
    int64_t skipped = 0;
    for (const auto& path : doc_order) {
        LoadedDocument doc;
        try {
            doc = load_document(path);
        } catch (const DocumentError& e) {
            std::cerr << "skipping " << by_doc[path].size() << " questions: " << e.what() << "\n";
            skipped += static_cast<int64_t>(by_doc[path].size());
            continue;
        }
        TempProject project;
        StateCache cache(*project, model, chunking_for(*project, model));
        Session scratch(model, scratch_options);
        const int64_t id = project->add_document(path, doc);
        const std::string text = project->document_text(id);
        const auto t0 = Clock::now();
        const auto ingested = cache.ingest(id, scratch);
        const double ingest_s = seconds_since(t0);
        for (const auto& q : by_doc[path])
            for (const auto& run : runs) {
                const auto accepted = q.at("answers").get<std::vector<std::string>>();
                const auto a = ask(*project, model, cache, scratch, run.setup.options, id,
                                   q.at("question").get<std::string>(), max_tokens, true);
                const bool correct = qa_answer_matches(a.answer.text, accepted);
                auto passage = [&](const SourceRecord& s) {
                    return text.substr(static_cast<size_t>(s.start_char),
                                       static_cast<size_t>(s.end_char - s.start_char));
                };
                const auto& src = a.sources;
                const bool top = !src.empty() && holds_answer(passage(src[0]), accepted);
                const bool top_excerpt = !src.empty() && holds_answer(src[0].excerpt, accepted);
                bool top3 = false;
                for (size_t r = 0; r < src.size() && r < 3; ++r)
                    top3 = top3 || holds_answer(passage(src[r]), accepted);
                nlohmann::json j{{"task", "qa"},
                                 {"id", q.at("id")},
                                 {"doc", path},
                                 {"document_tokens", ingested.tokens},
                                 {"policy", run.name},
                                 {"question", q.at("question")},
                                 {"answer", a.answer.text},
                                 {"expected", accepted},
                                 {"correct", correct},
                                 {"sources", sources_json(src)},
                                 {"top_contains", top},
                                 {"top_excerpt_contains", top_excerpt},
                                 {"top3_contains", top3},
                                 {"top_share", src.empty() ? 0.0 : src[0].share},
                                 {"decode_tokens_per_s", a.answer.stats.decode_tokens_per_s},
                                 {"ingest_s", ingest_s}};
                put_router_fields(j, run.setup.router);
                out.line(j);
                auto& t = tally[run.name];
                ++t.asked;
                t.correct += correct;
                t.top += top;
                t.top_excerpt += top_excerpt;
                t.top3 += top3;
                t.top_correct += correct && top;
            }
        if (!o.quiet)
            std::cerr << "sources: " << path << " (" << by_doc[path].size() << " questions, "
                      << static_cast<int>(seconds_since(t0)) << " s)\n";
    }
    for (const auto& [policy, t] : tally)
        out.line({{"summary", "qa"},
                  {"policy", policy},
                  {"asked", t.asked},
                  {"skipped", skipped},
                  {"correct", t.correct},
                  {"top_contains", rate(t.top, t.asked)},
                  {"top_excerpt_contains", rate(t.top_excerpt, t.asked)},
                  {"top3_contains", rate(t.top3, t.asked)},
                  {"top_contains_when_correct", rate(t.top_correct, t.correct)}});
    if (tally.empty()) {
        std::cerr << "sources: no question could be asked (every document is missing)\n";
        return 1;
    }
    return 0;
}

} // namespace

int run_sources(const SourcesOptions& o) {
    auto model = open_model(o.model);
    const auto runs = policy_runs(o, *model);
    Output out(o.out);
    return o.qa.empty() ? run_needles(o, *model, runs, out) : run_qa_sources(o, *model, runs, out);
}

} // namespace spanscope::cli
