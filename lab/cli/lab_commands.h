// spanscope-lab subcommands (research: evaluations, needle tests, the QA set, the router's
// recorder and trainer). Each returns the process exit code; errors are one line on stderr.
#pragma once

#include "app/cli/commands.h"
#include "lab/router/zoom_train.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace spanscope::cli {

struct NiahOptions {
    std::string model;
    std::vector<int64_t> lengths{4096, 8192, 16384}; ///< haystack tokens
    std::vector<int> depths{10, 30, 50, 70, 90};     ///< needle depth, % of the haystack
    int samples = 10;                                ///< per length (depths taken in turn)
    uint64_t seed = 1;
    int max_tokens = 16;
    int threads = 0;
    std::string out; ///< append one JSON line per sample here too
    PolicySettings policy;
};

struct EvalOptions {
    std::string model;
    std::string backend = "cpu";    ///< backend_names() (backend.h)
    std::string task;               ///< eval::task_names()
    std::string haystack = "prose"; ///< prose or noise
    std::vector<std::string> policies{"full", "sekv"};
    std::vector<double> budgets{0.35};           ///< fast-tier budgets of the compressed policies
    std::vector<int64_t> lengths{4096};          ///< context tokens
    std::vector<int> depths{0, 25, 50, 75, 100}; ///< % of the context, taken in turn
    int samples = 10;                            ///< per length
    uint64_t seed = 1;
    int max_tokens = 0; ///< 0: the task's
    int threads = 0;
    std::string qa_set; ///< the qa task's question set
    std::string out;    ///< JSON lines appended (and resumed from)
    bool json = false;
    bool quiet = false;
    bool allow_over_budget = false;
    /// sekv and chunk_summary: "surprisal" (docs/sekv.md) or "uniform" summary rows
    /// (SekvOptions::uniform_summary; training-free and oracle routers only).
    std::string summary_weights = "surprisal";
    std::string command_line; ///< recorded in --out
    PolicySettings policy;    ///< SEKV's settings
};

struct QaOptions {
    std::string model;
    std::string set;
    int max_tokens = 32;
    int threads = 0;
    int min_correct = -1;            ///< exit 1 when fewer are correct
    bool skip_missing_model = false; ///< exit 77 (CTest's skip code) without a model
    bool json = false;
};

/// `sources`: an answer's sources measured through the product's path (cmd_sources.cpp).
struct SourcesOptions {
    std::string model;
    std::vector<int64_t> lengths{4096, 8192};                            ///< haystack tokens
    std::vector<int> depths{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100}; ///< %, taken in turn
    int samples = 10;                                                    ///< per length
    uint64_t seed = 1;
    std::vector<std::string> policies{"full", "sekv"};
    int max_tokens = 0; ///< 0: the needle task's (16), or 32 for the QA set
    int threads = 0;
    std::string qa;  ///< a question set: measure it instead of the needles
    std::string out; ///< also append each JSON line here
    bool quiet = false;
    PolicySettings policy; ///< SEKV's settings (the product's defaults)
};

/// `pic-eval TASK`: position-independent caching measured (issue 7, cmd_pic_eval.cpp).
struct PicEvalOptions {
    std::string model;
    std::string task;                            ///< eval::task_names() except vt
    std::vector<int> documents{2, 4, 8};         ///< documents the context is cut into
    std::vector<int64_t> lengths{4096};          ///< context tokens (all documents)
    std::vector<int> depths{0, 25, 50, 75, 100}; ///< % of the context, taken in turn
    int samples = 10;                            ///< per length and document count
    uint64_t seed = 1;
    std::vector<std::string> selectors{"none", "epic", "cacheblend"};
    std::vector<double> ratios{0.05, 0.1, 0.2, 0.4}; ///< recompute ratios (epic, cacheblend)
    int check_layer = 1;                             ///< cacheblend's check layer
    int max_tokens = 0;                              ///< 0: the task's
    int threads = 0;
    std::string qa_set;
    std::string out;
    bool json = false;
    bool quiet = false;
    std::string command_line;
};

/// `state-init-eval`: the recurrent layers' state initialisers against a joint run on a hybrid
/// model (cmd_state_init_eval.cpp).
struct StateInitEvalOptions {
    std::string model;
    std::vector<int> documents{2, 4, 8, 16}; ///< K, documents per sample
    int doc_tokens = 24;                     ///< tokens per document, its BOS included
    int question_tokens = 8;                 ///< random tokens after the documents
    int samples = 20;                        ///< per K
    uint64_t seed = 1;
    std::vector<std::string> initialisers{"single-block", "exact", "zero"};
    int threads = 0;
    std::string out; ///< one JSON line per sample × K × initialiser (a run resumes from it)
    bool json = false;
    bool quiet = false;
    std::string command_line;
};

/// `zoom-record`: recordings of full attention for SEKV's trained zoom-in (issue 8,
/// cmd_zoom_record.cpp, lab/router/zoom_recorder.h).
struct ZoomRecordOptions {
    std::string model;
    std::string out; ///< DIR: one file per document, held-out ones in DIR/held-out
    std::vector<std::string> documents; ///< empty: the vim user manual but usr_01 and usr_02
    int64_t max_tokens = 4096;
    int queries = 32;
    int tail = 64;
    double budget = 0.35;
    int first_query = 512;           ///< candidates every 8 tokens from here
    int recall_probes = 0;           ///< runs of the document copied after it (zoom_recorder.h)
    int probe_tokens = 24;           ///< tokens per recall probe
    std::string probe_form = "copy"; ///< copy | question | fact (zoom_*_probes.h)
    int threads = 0;
    int held_out = 4; ///< the last N documents go to DIR/held-out
    std::string command_line;
};

/// `zoom-train`: SEKV's trained zoom-in from recordings (cmd_zoom_train.cpp, issue 8).
struct ZoomTrainCliOptions {
    std::string model;
    std::string records;  ///< directory of *.zoom-record.gguf
    std::string held_out; ///< default: records/held-out
    std::string out;      ///< the parameter file
    std::string checkpoint;
    std::string curves;
    int d_out = 32;
    /// m of the router's key sketch (span_sketch.h; fitted on the training queries); 0: none.
    int sketch_dim = 0;
    int hidden = 16;
    int max_rank = 32;
    int threads = 0;
    bool quiet = false;
    bool compare = false; ///< evaluate OUT against the training-free router, do not train
    /// With compare: also both routers with τ calibrated on the held-out examples so that each
    /// head expands these fractions of its visible spans (the trained router's learned θ set
    /// aside), to compare them at equal expansions.
    std::vector<double> compare_rates;
    ZoomTrainOptions train;
    std::string command_line;
};

int run_qa(const QaOptions& o);
int run_eval(const EvalOptions& o);
int run_niah(const NiahOptions& o);
int run_pic_eval(const PicEvalOptions& o);
int run_sources(const SourcesOptions& o);
int run_state_init_eval(const StateInitEvalOptions& o);
int run_zoom_record(const ZoomRecordOptions& o);
int run_zoom_train(const ZoomTrainCliOptions& o);

/// The QA scoring rule: case-insensitive substring match of any accepted answer in the first
/// line of `answer`, cut to 200 characters.
bool qa_answer_matches(const std::string& answer, const std::vector<std::string>& accepted);
/// A question set (tests/qa/questions.json) parsed. Throws std::runtime_error naming the file
/// when it cannot be read or is not JSON.
nlohmann::json read_qa_set(const std::string& path);
/// The questions of a set grouped by their "doc", and the documents in the order they first
/// appear (appended to doc_order). Throws nlohmann::json's errors for a set without them.
std::map<std::string, std::vector<nlohmann::json>>
questions_by_document(const nlohmann::json& set, std::vector<std::string>& doc_order);
/// Register `zoom-train` and its options on app.
CLI::App* add_zoom_train_command(CLI::App& app, ZoomTrainCliOptions& o);

} // namespace spanscope::cli
