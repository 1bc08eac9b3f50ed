// What the project subcommands of spanscope-cli share: Ctrl-C handling, the chunking options of
// a project and model, and progress lines.
#pragma once

#include "answering/project_settings.h"
#include "answering/state_cache.h"
#include "answering/unit_choice.h"
#include "engine/model/model.h"
#include "engine/text/chunking.h"
#include "storage/document_loader.h"
#include "storage/project.h"

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

/// One line on stderr (rewritten in place on a terminal): document, chunk, rate, time left.
void print_ingest_progress(const IngestProgress& p);
/// End the progress line (a newline on a terminal) before other output.
void end_progress_line();
/// Write `line` as the progress line on a terminal (rewritten in place; end_progress_line or
/// clear_progress_line ends it).
void show_progress_line(const std::string& line);
/// Erase the progress line on a terminal (nothing of it stays), before the output it stood for.
void clear_progress_line();

/// How spanscope-cli loads the document it was given as `name`: OCR of scanned pages announced
/// on stderr ("name: reading page 2 of 5 by OCR (pages without a text layer)", rewritten in
/// place on a terminal) and stopped by Ctrl-C (g_interrupted: load_document throws Cancelled).
LoadOptions cli_load_options(const std::string& name);

/// "1.5 GiB"-style size.
std::string human_bytes(int64_t bytes);
/// Parse "500M", "2G", "1.5GiB", "123456" into bytes; throws std::invalid_argument.
int64_t parse_bytes(const std::string& text);

} // namespace spanscope::cli
