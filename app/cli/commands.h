// spanscope-cli subcommands (the product's: info, ask, ingest, project, bench) and what the lab's
// spanscope-lab shares with them (open_model, the policy options). Each returns the process exit
// code; errors are one line on stderr.
#pragma once

#include "app/cli/policy_options.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spanscope {
class Model;
struct ModelLocation;
} // namespace spanscope

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
    PolicySettings policy;
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
    PolicySettings policy;
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
    std::string action; ///< info, list-docs, show-doc, remove-doc, vacuum, set-cache-limit,
                        ///< events
    std::string project;
    std::string model; ///< info: also show the sizes for this model
    std::vector<int64_t> doc_ids;
    std::string cache_limit;
    /// show-doc: the byte range "BEGIN:END" of the document's text to print (a source's
    /// start_char:end_char); empty: all of it.
    std::string chars;
    bool json = false;
};

int run_info(const InfoOptions& o);
int run_ingest(const IngestOptions& o);
int run_project(const ProjectOptions& o);
/// ask --project: answer from stored chunk states (cmd_ask_project.cpp).
int run_ask_project(const AskOptions& o);
int run_ask(const AskOptions& o);
int run_bench(const BenchOptions& o);

/// Parse argv into app's options, the same way in spanscope-cli and spanscope-lab. Returns
/// nullopt when a command is to run, else the exit code to return: 2 after printing the help when
/// no argument was given, 0 after --help or --version, 2 after one line on stderr for a parse
/// error ("<program>: <what> (see --help)", or `hint`'s line when it returns one).
std::optional<int> parse_command_line(
    CLI::App& app, int argc, char** argv, const std::string& program,
    const std::function<std::optional<std::string>(const CLI::ParseError&)>& hint = {});

/// Locate and load the model (see model_locator.h) on `backend` ("cpu" or "cuda", backend.h);
/// throws std::runtime_error with a one-line message (including how to install the default
/// model when none is found, and why a backend cannot run here).
std::unique_ptr<Model> open_model(const std::string& explicit_path,
                                  const std::string& backend = "cpu");

/// open_model's line for a model file that is refused: "unusable model PATH (from SOURCE):
/// WHY" (the source named unless it is --model).
std::string unusable_model_message(const ModelLocation& where, const std::string& why);

} // namespace spanscope::cli
