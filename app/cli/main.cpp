// spanscope-cli: the headless front end of the Spanscope engine.
#include "answering/project_answer.h"
#include "app/cli/commands.h"
#include "app/cli/finite_check.h"
#include "engine/kernels/quant.h"
#include "engine/linearkv/pic_assembly.h"
#include "engine/model/model.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>

int main(int argc, char** argv) {
    using namespace spanscope::cli;
    CLI::App app{"Spanscope: question long documents with a local language model"};
    app.set_version_flag("--version", "spanscope-cli " SPANSCOPE_VERSION);
    app.require_subcommand(1);
    app.option_defaults()->always_capture_default(); // --help shows every default
    const std::vector<std::string> lab_commands{
        "eval", "niah", "pic-eval", "state-init-eval", "qa", "zoom-record", "zoom-train"};
    app.footer("The research commands (eval, niah, pic-eval, state-init-eval, qa, zoom-record, "
               "zoom-train) are spanscope-lab's, built with -DSPANSCOPE_LAB=ON (bash "
               "scripts/setup.sh test builds it: build/lab/spanscope-lab).");

    InfoOptions info;
    auto* info_cmd = app.add_subcommand("info", "Print the model's metadata and tensor types");
    info_cmd->add_option("--model", info.model, "GGUF model file");
    info_cmd->add_option("model", info.model, "GGUF model file, as --model (give one or the other)")
        ->excludes(info_cmd->get_option("--model"));
    info_cmd->add_flag("--json", info.json, "Print one JSON object");

    AskOptions ask;
    auto* ask_cmd = app.add_subcommand(
        "ask", "Answer a question about documents (given with --doc, or stored in a project)");
    ask_cmd->footer("Without --project, the documents are read and prefilled now (nothing is "
                    "stored).");
    ask_cmd->add_option("--model", ask.model, "GGUF model file");
    ask_cmd->add_option("--doc", ask.docs,
                        "Document (text, Markdown, HTML, PDF, or .gz of these); repeat for "
                        "several. With --project it is added to the project first");
    auto* ask_project = ask_cmd->add_option(
        "--project", ask.project,
        "Project: a path (with a '/'), or a name in $XDG_DATA_HOME/spanscope/projects "
        "(\"\" = default.spanscope)");
    ask_cmd
        ->add_option("--doc-id", ask.doc_ids,
                     "With --project: only these documents (ids from project list-docs)")
        ->needs(ask_project)
        ->check(CLI::Range(int64_t{1}, INT64_MAX).description("id >= 1"));
    ask_cmd
        ->add_option("--chat", ask.chat,
                     "With --project: continue this chat (its earlier questions and answers "
                     "come before the question; its documents unless --doc-id or --doc)")
        ->needs(ask_project)
        ->check(CLI::Range(int64_t{1}, INT64_MAX).description("id >= 1"))
        ->capture_default_str()
        ->default_str("");
    std::string project_selector_list;
    for (const auto& s : spanscope::project_selectors())
        project_selector_list += (project_selector_list.empty() ? "" : "|") + s;
    ask_cmd
        ->add_option("--selector", ask.selector,
                     "With --project: tokens of each later section recomputed with the sections "
                     "before it in context (LinearKV)")
        ->needs(ask_project)
        ->check(CLI::Validator(spanscope::project_selector_problem, project_selector_list))
        ->capture_default_str();
    auto* ask_recompute =
        ask_cmd
            ->add_option("--recompute", ask.recompute,
                         "With --project and --selector epic: share of the context recomputed")
            ->needs(ask_project)
            ->check(finite_number())
            ->check(CLI::Range(0.0, 1.0))
            ->capture_default_str();
    ask_cmd
        ->add_option("--state-init", ask.state_init,
                     "With --project on a hybrid model: the recurrent layers' initial state from "
                     "the sections' states (single-block: the last section's; exact: their "
                     "composition, Mamba-2 only; zero)")
        ->needs(ask_project)
        ->check(CLI::IsMember(spanscope::state_initialiser_names()))
        ->capture_default_str();
    ask_cmd->add_option("--max-tokens", ask.max_tokens, "Most answer tokens")
        ->check(CLI::Range(1, 32768));
    ask_cmd->add_option("--temperature", ask.temperature, "0 = greedy")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 10.0));
    ask_cmd->add_option("--top-k", ask.top_k, "Top-k cut (0 = none)")
        ->check(CLI::Range(0, 1 << 20));
    ask_cmd->add_option("--top-p", ask.top_p, "Nucleus cut (1 = none)")
        ->check(finite_number())
        ->check(CLI::Range(0.01, 1.0));
    ask_cmd->add_option("--seed", ask.seed, "Sampling seed (fixed by default: runs repeat)");
    ask_cmd->add_option("--threads", ask.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    ask_cmd->add_flag("--json", ask.json, "Print one JSON object with the answer and statistics");
    add_policy_options(*ask_cmd, ask.policy);
    add_backend_option(*ask_cmd, ask.backend);
    ask_cmd->add_option("question", ask.question, "The question")->required();

    IngestOptions ingest;
    auto* ingest_cmd =
        app.add_subcommand("ingest", "Add documents to a project and store their prefilled chunks");
    ingest_cmd->add_option("--project", ingest.project,
                           "Project: a path (with a '/'), or a name in "
                           "$XDG_DATA_HOME/spanscope/projects (default: default.spanscope)");
    ingest_cmd->add_option("--model", ingest.model, "GGUF model file");
    add_backend_option(*ingest_cmd, ingest.backend);
    ingest_cmd->add_option("--threads", ingest.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    ingest_cmd
        ->add_option("--chunk-tokens", ingest.chunk_tokens,
                     "Tokens per chunk, saved as the project's setting (a new project: 1024)")
        ->check(CLI::Range(16, 8192))
        ->default_str("the project's");
    ingest_cmd->add_flag("--json", ingest.json,
                         "Print the project's documents as JSON [{id, path, tokens, chunks}]");
    ingest_cmd->add_option("documents", ingest.docs, "Files to add")->required();

    ProjectOptions proj;
    auto* project_cmd = app.add_subcommand("project", "Inspect and maintain a project");
    project_cmd->require_subcommand(1);
    auto add_project_option = [&](CLI::App* c) {
        c->add_option("--project", proj.project,
                      "Project: a path (with a '/'), or a name in "
                      "$XDG_DATA_HOME/spanscope/projects (default: default.spanscope)");
    };
    auto* p_info = project_cmd->add_subcommand("info", "Sizes: documents, chunks, chunk states");
    add_project_option(p_info);
    p_info->add_flag("--json", proj.json, "Print one JSON object");
    auto* p_list = project_cmd->add_subcommand("list-docs", "List the documents in order");
    add_project_option(p_list);
    p_list->add_option("--model", proj.model, "GGUF model file (for token counts)");
    p_list->add_flag("--json", proj.json, "Print [{id, path, tokens, chunks}]");
    auto* p_show = project_cmd->add_subcommand(
        "show-doc", "Print a document's text as the model reads it (what the loader extracted)");
    add_project_option(p_show);
    p_show->add_option("ids", proj.doc_ids, "Document id (from list-docs)")
        ->required()
        ->expected(1);
    p_show->add_option("--chars", proj.chars,
                       "Only the bytes BEGIN:END of the text (a source's start_char:end_char, "
                       "as ask --json gives them)");
    auto* p_remove = project_cmd->add_subcommand("remove-doc", "Remove documents (chats stay)");
    add_project_option(p_remove);
    p_remove->add_option("ids", proj.doc_ids, "Document ids")->required();
    auto* p_vacuum = project_cmd->add_subcommand("vacuum", "Give freed space back to the disk");
    add_project_option(p_vacuum);
    auto* p_limit = project_cmd->add_subcommand(
        "set-cache-limit", "Bound the chunk states' size (least recently used evicted first)");
    add_project_option(p_limit);
    p_limit->add_option("size", proj.cache_limit, "e.g. 500M, 2G (a new project: 8G)")->required();
    auto* p_events = project_cmd->add_subcommand(
        "events", "Show the event log (recomputed or evicted chunk states)");
    add_project_option(p_events);

    BenchOptions bench;
    auto* bench_cmd = app.add_subcommand("bench", "Measure prefill and decode speed");
    bench_cmd->add_option("--model", bench.model, "GGUF model file");
    bench_cmd->add_option("--lengths", bench.lengths, "Prompt lengths in tokens")
        ->delimiter(',')
        ->check(CLI::Range(2, 32768));
    bench_cmd
        ->add_option("--decode-tokens", bench.decode_tokens, "Tokens decoded after each prompt")
        ->check(CLI::Range(1, 4096));
    bench_cmd->add_option("--threads", bench.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    bench_cmd->add_flag("--json", bench.json, "Print one JSON object");
    bench_cmd->add_flag(
        "--ingest", bench.ingest,
        "Also time each prompt's prefill with every token's surprisal, as reading a "
        "document into a project does (in its own session)");
    bench_cmd->add_flag("--bandwidth", bench.bandwidth,
                        "Also measure the machine's read bandwidth (a 1 GiB array read on the same "
                        "threads) and the bytes per second that decode reads (weights and "
                        "key/value rows)");
    bench_cmd
        ->add_option("--products", bench.products,
                     "Prefill matrix products: integer (the engine's kernels) or float (weights "
                     "dequantised, OpenBLAS sgemm: the reference numerics)")
        ->check(CLI::IsMember({"integer", "float"}));
    std::vector<std::string> kernel_level_names{"best"};
    for (const auto l : spanscope::kernel_levels())
        kernel_level_names.emplace_back(spanscope::kernel_level_name(l));
    bench_cmd
        ->add_option("--kernel-level", bench.kernel_level,
                     "CPU kernels to run: best (the best this CPU supports, as every other "
                     "command does), or one level to compare levels on one machine: scalar, avx2, "
                     "avxvnni, avx512, amx (refused when this CPU lacks it)")
        ->check(CLI::IsMember(kernel_level_names));
    add_policy_options(*bench_cmd, bench.policy);
    add_backend_option(*bench_cmd, bench.backend);

    const auto lab_hint = [&](const CLI::ParseError&) -> std::optional<std::string> {
        if (std::find(lab_commands.begin(), lab_commands.end(), argv[1]) == lab_commands.end())
            return std::nullopt;
        return std::string(argv[1]) +
               " is a research command of spanscope-lab (build it with -DSPANSCOPE_LAB=ON: "
               "build/lab/spanscope-lab " +
               argv[1] + " ...)";
    };
    if (const auto code = parse_command_line(app, argc, argv, "spanscope-cli", lab_hint))
        return *code;
    try {
        if (*info_cmd)
            return run_info(info);
        if (*ask_cmd) {
            ask.use_project = ask_project->count() > 0;
            if (ask_recompute->count() > 0 && ask.selector != "epic") {
                std::cerr << "spanscope-cli: --recompute needs --selector epic (it sets epic's "
                             "share; the selector is "
                          << ask.selector << ", which recomputes "
                          << (ask.selector == "full" ? "everything" : "nothing")
                          << ") (see --help)\n";
                return 2;
            }
            return run_ask(ask);
        }
        if (*ingest_cmd)
            return run_ingest(ingest);
        if (*project_cmd) {
            for (auto* c : project_cmd->get_subcommands())
                proj.action = c->get_name();
            return run_project(proj);
        }
        if (*bench_cmd)
            return run_bench(bench);
    } catch (const std::exception& e) {
        std::cerr << "spanscope-cli: " << e.what() << "\n";
        return 1;
    }
    return 2;
}
