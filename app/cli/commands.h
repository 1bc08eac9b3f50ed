// spanscope-cli subcommands. Each returns the process exit code; errors are one line on stderr.
#pragma once

#include "lab/router/zoom_train.h"
#include "policy_options.h"

#include <memory>
#include <string>
#include <vector>

namespace spanscope {
class Model;
}

namespace spanscope::cli {

struct InfoOptions {
    std::string model;
    bool json = false;
};

struct AskOptions {
    std::string model;
    std::string backend = "cpu"; ///< backend_names() (backend.h)
    std::vector<std::string> docs;
    std::string project;          ///< answer from this project's stored chunk states
    bool use_project = false;     ///< --project given
    std::vector<int64_t> doc_ids; ///< with --project: only these documents
    int64_t chat = 0;             ///< with --project: continue this chat (0: a new chat)
    std::string question;
    int max_tokens = 128;
    float temperature = 0.0f;
    int top_k = 40;
    float top_p = 0.95f;
    unsigned long long seed = 0;
    int threads = 0;
    bool json = false;
    std::string selector = "none"; ///< --project: LinearKV selector (none, epic, full)
    double recompute = 0.15;       ///< --project, epic: recompute ratio (share of the context)
    std::string state_init = "single-block"; ///< --project, hybrid models: the recurrent
                                             ///< layers' initialiser (single-block, exact, zero)
    PolicyOptions policy;
};

struct NiahOptions {
    std::string model;
    std::vector<int64_t> lengths{4096, 8192, 16384}; ///< haystack tokens
    std::vector<int> depths{10, 30, 50, 70, 90};     ///< needle depth, % of the haystack
    int samples = 10;                                ///< per length (depths taken in turn)
    uint64_t seed = 1;
    int max_tokens = 16;
    int threads = 0;
    std::string out; ///< append one JSON line per sample here too
    PolicyOptions policy;
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
    /// sekv and chunk_summary: "surprisal" (DESIGN.md §3.4) or "uniform" summary rows
    /// (SekvOptions::uniform_summary; training-free and oracle routers only).
    std::string summary_weights = "surprisal";
    std::string command_line; ///< recorded in --out
    PolicyOptions policy;     ///< SEKV's settings
};

struct BenchOptions {
    std::string model;
    std::string backend = "cpu"; ///< backend_names() (backend.h)
    std::vector<int> lengths{512, 2048, 8192};
    int decode_tokens = 32;
    int threads = 0;
    bool json = false;
    bool ingest = false;    ///< also time prefill with every token's surprisal (as ingest does)
    bool bandwidth = false; ///< also measure the read bandwidth and what decode reaches of it
    std::string products = "integer";  ///< matmul.h PrefillProducts: integer or float
    std::string kernel_level = "best"; ///< best, or a quant.h KernelLevel by its name
    PolicyOptions policy;
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

struct IngestOptions {
    std::string model;
    std::string backend = "cpu"; ///< backend_names() (backend.h)
    std::string project;
    std::vector<std::string> docs;
    int threads = 0;
    int64_t chunk_tokens = 0; ///< 0: the project's setting (1024 by default)
    bool json = false;
};

struct ProjectOptions {
    std::string action; ///< info, list-docs, remove-doc, vacuum, set-cache-limit, events
    std::string project;
    std::string model; ///< info: also show the sizes for this model
    std::vector<int64_t> doc_ids;
    std::string cache_limit;
    bool json = false;
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

int run_info(const InfoOptions& o);
int run_ingest(const IngestOptions& o);
int run_project(const ProjectOptions& o);
/// ask --project: answer from stored chunk states (cmd_ask_project.cpp).
int run_ask_project(const AskOptions& o);
int run_ask(const AskOptions& o);
int run_bench(const BenchOptions& o);
int run_qa(const QaOptions& o);
int run_eval(const EvalOptions& o);
int run_niah(const NiahOptions& o);
int run_pic_eval(const PicEvalOptions& o);
int run_state_init_eval(const StateInitEvalOptions& o);
int run_zoom_record(const ZoomRecordOptions& o);
int run_zoom_train(const ZoomTrainCliOptions& o);
/// Register `zoom-train` and its options on app.
CLI::App* add_zoom_train_command(CLI::App& app, ZoomTrainCliOptions& o);

/// The QA scoring rule: case-insensitive substring match of any accepted answer in the first
/// line of `answer`, cut to 200 characters.
bool qa_answer_matches(const std::string& answer, const std::vector<std::string>& accepted);

/// Locate and load the model (see model_locator.h) on `backend` ("cpu" or "cuda", backend.h);
/// throws std::runtime_error with a one-line message (including how to install the default
/// model when none is found, and why a backend cannot run here).
std::unique_ptr<Model> open_model(const std::string& explicit_path,
                                  const std::string& backend = "cpu");

} // namespace spanscope::cli
