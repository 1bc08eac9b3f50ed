// spanscope-cli: the headless front end of the Spanscope engine.
#include "commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
    using namespace spanscope::cli;
    CLI::App app{"Spanscope: question long documents with a local language model"};
    app.require_subcommand(1);
    app.option_defaults()->always_capture_default(); // --help shows every default

    InfoOptions info;
    auto* info_cmd = app.add_subcommand("info", "Print the model's metadata and tensor types");
    info_cmd->add_option("--model", info.model, "GGUF model file");
    info_cmd->add_flag("--json", info.json, "Print one JSON object");

    AskOptions ask;
    auto* ask_cmd = app.add_subcommand("ask", "Answer a question about plain-text documents");
    ask_cmd->add_option("--model", ask.model, "GGUF model file");
    ask_cmd->add_option("--doc", ask.docs, "Plain-text (UTF-8) document; repeat for several")
        ->required();
    ask_cmd->add_option("--max-tokens", ask.max_tokens, "Most answer tokens")
        ->check(CLI::Range(1, 32768));
    ask_cmd->add_option("--temperature", ask.temperature, "0 = greedy")
        ->check(CLI::Range(0.0, 10.0));
    ask_cmd->add_option("--top-k", ask.top_k, "Top-k cut (0 = none)")
        ->check(CLI::Range(0, 1 << 20));
    ask_cmd->add_option("--top-p", ask.top_p, "Nucleus cut (1 = none)")
        ->check(CLI::Range(0.01, 1.0));
    ask_cmd->add_option("--seed", ask.seed, "Sampling seed (fixed by default: runs repeat)");
    ask_cmd->add_option("--threads", ask.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    ask_cmd->add_flag("--json", ask.json, "Print one JSON object with the answer and statistics");
    ask_cmd->add_option("question", ask.question, "The question")->required();

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

    QaOptions qa;
    auto* qa_cmd =
        app.add_subcommand("qa", "Run and score a question set (tests/qa/questions.json)");
    qa_cmd->add_option("--model", qa.model, "GGUF model file");
    qa_cmd->add_option("--set", qa.set, "Question set (JSON)")->required();
    qa_cmd->add_option("--max-tokens", qa.max_tokens, "Most answer tokens")
        ->check(CLI::Range(1, 4096));
    qa_cmd->add_option("--threads", qa.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    qa_cmd->add_option("--min-correct", qa.min_correct, "Exit 1 when fewer answers are correct");
    qa_cmd->add_flag("--skip-missing-model", qa.skip_missing_model,
                     "Exit 77 (test skipped) when no model is installed");
    qa_cmd->add_flag("--json", qa.json, "Print one JSON object with every answer");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::cerr << "spanscope-cli: " << e.what() << " (see --help)\n";
        return 2;
    }
    try {
        if (*info_cmd)
            return run_info(info);
        if (*ask_cmd)
            return run_ask(ask);
        if (*bench_cmd)
            return run_bench(bench);
        if (*qa_cmd)
            return run_qa(qa);
    } catch (const std::exception& e) {
        std::cerr << "spanscope-cli: " << e.what() << "\n";
        return 1;
    }
    return 2;
}
