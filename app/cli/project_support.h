// What the project subcommands of spanscope-cli share: Ctrl-C handling, the chunking options of
// a project and model, progress lines, and the choice of units for a question.
#pragma once

#include "chunking.h"
#include "model.h"
#include "project.h"
#include "state_cache.h"

#include <atomic>
#include <string>
#include <vector>

namespace spanscope::cli {

/// Set by SIGINT/SIGTERM once install_interrupt_handler() ran; the engine checks it between
/// ubatches, so Ctrl-C stops at the next ubatch and what was committed stays.
extern std::atomic<bool> g_interrupted;
void install_interrupt_handler();
/// 128 + the signal that interrupted (130 for SIGINT, 143 for SIGTERM).
int interrupted_exit_code();

/// Chunk size (tokens) of a project: its "chunk_tokens" setting, 1024 by default.
int64_t project_chunk_tokens(Project& project);
void set_project_chunk_tokens(Project& project, int64_t tokens);

/// Chunking for `model` in `project`: the project's chunk size; units up to the model's context
/// minus what a question and its answer need (min(1024, context / 4) tokens).
ChunkingOptions chunking_for(Project& project, const Model& model);

/// One line on stderr (rewritten in place on a terminal): document, chunk, rate, time left.
void print_ingest_progress(const IngestProgress& p);
/// End the progress line (a newline on a terminal) before other output.
void end_progress_line();

/// "1.5 GiB"-style size.
std::string human_bytes(int64_t bytes);
/// Parse "500M", "2G", "1.5GiB", "123456" into bytes; throws std::invalid_argument.
int64_t parse_bytes(const std::string& text);

/// A unit of a document chosen to answer a question, in project order.
struct ChosenUnit {
    int64_t document_id = 0;
    int unit = 0;
    int64_t tokens = 0;
};

/// Every unit of `docs` when they fit `budget` tokens; otherwise the units sharing the most
/// words (4+ letters, case-folded) with the question, as many as fit, returned in project
/// order. *skipped receives how many units were left out.
std::vector<ChosenUnit>
choose_units(const std::vector<std::pair<int64_t, std::vector<DocumentUnit>>>& docs,
             const std::vector<std::string>& texts, const std::string& question, int64_t budget,
             int* skipped);

} // namespace spanscope::cli
