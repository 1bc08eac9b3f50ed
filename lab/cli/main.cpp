// spanscope-lab: the research commands (evaluations, needle tests, the QA set, the router's
// recorder and trainer); never packaged. The product's commands are spanscope-cli's.
#include "answering/project_answer.h"
#include "app/cli/finite_check.h"
#include "engine/kernels/quant.h"
#include "engine/linearkv/pic_assembly.h"
#include "engine/model/model.h"
#include "lab/cli/lab_commands.h"
#include "lab/evaluation/eval_tasks.h"

#include <CLI/CLI.hpp>

#include <iostream>

int main(int argc, char** argv) {
    using namespace spanscope::cli;
    CLI::App app{
        "Spanscope's lab: evaluations and the router's training, on the engine of spanscope-cli"};
    app.set_version_flag("--version", "spanscope-lab " SPANSCOPE_VERSION);
    app.require_subcommand(1);
    app.option_defaults()->always_capture_default(); // --help shows every default

    NiahOptions niah;
    auto* niah_cmd = app.add_subcommand(
        "niah", "Needle-in-a-haystack prompts over real prose, answered with full and sekv");
    niah_cmd->add_option("--model", niah.model, "GGUF model file");
    niah_cmd->add_option("--lengths", niah.lengths, "Haystack lengths in tokens")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{64}, int64_t{32000}))
        ->capture_default_str();
    niah_cmd->add_option("--depths", niah.depths, "Needle depths, percent of the haystack")
        ->delimiter(',')
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    niah_cmd->add_option("--samples", niah.samples, "Samples per length")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    niah_cmd->add_option("--seed", niah.seed, "Seed of the haystacks and needles")
        ->capture_default_str();
    niah_cmd->add_option("--max-tokens", niah.max_tokens, "Most answer tokens")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    niah_cmd->add_option("--threads", niah.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    niah_cmd->add_option("--out", niah.out, "Also append each sample's JSON line to this file");
    add_policy_options(*niah_cmd, niah.policy);
    // niah always answers with both policies; the SEKV settings apply to the sekv answers.
    niah_cmd->remove_option(niah_cmd->get_option("--policy"));

    EvalOptions ev;
    auto* eval_cmd = app.add_subcommand(
        "eval", "Evaluate memory policies on generated tasks from one shared prefill per sample "
                "(needles, variable tracking, document QA); JSON lines for spanscope-report");
    eval_cmd->add_option("task", ev.task, "Task")
        ->required()
        ->check(CLI::IsMember(spanscope::eval::task_names()));
    eval_cmd->add_option("--model", ev.model, "GGUF model file");
    eval_cmd->add_option("--haystack", ev.haystack, "Haystack of the needle tasks")
        ->check(CLI::IsMember({"prose", "noise"}))
        ->capture_default_str();
    eval_cmd->add_option("--lengths", ev.lengths, "Context lengths in tokens")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{256}, int64_t{32000}))
        ->capture_default_str();
    eval_cmd->add_option("--depths", ev.depths, "Needle depths, percent of the context")
        ->delimiter(',')
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    eval_cmd->add_option("--samples", ev.samples, "Samples per length (depths taken in turn)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    eval_cmd->add_option("--seed", ev.seed, "Seed of the samples")->capture_default_str();
    eval_cmd->add_option("--max-tokens", ev.max_tokens, "Most answer tokens (0: the task's)")
        ->check(CLI::Range(0, 4096));
    eval_cmd->add_option("--threads", ev.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    eval_cmd->add_option("--qa-set", ev.qa_set,
                         "Question set of the qa task (tests/qa/questions.json)");
    eval_cmd->add_option("--out", ev.out,
                         "Append one JSON line per sample and policy (a run resumes from it)");
    eval_cmd->add_flag("--json", ev.json, "Print the results and a summary as one JSON object");
    eval_cmd->add_flag("--quiet", ev.quiet, "No progress line per answer on stderr");
    eval_cmd->add_flag("--allow-over-budget", ev.allow_over_budget,
                       "Exit 0 even when a compressed answer held more than its budget");
    eval_cmd
        ->add_option("--summary-weights", ev.summary_weights,
                     "sekv and chunk_summary: each span's summary row is the surprisal-weighted "
                     "mean of its rows (surprisal, the design's) or their plain mean (uniform, a "
                     "measurement; not with the trained router, which was trained on the first)")
        ->check(CLI::IsMember({"surprisal", "uniform"}))
        ->capture_default_str();
    add_policy_options(*eval_cmd, ev.policy);
    add_backend_option(*eval_cmd, ev.backend);
    eval_cmd->remove_option(eval_cmd->get_option("--policy"));
    eval_cmd->remove_option(eval_cmd->get_option("--budget"));
    eval_cmd->add_option("--policy", ev.policies, "Policies, from one prefill per sample")
        ->delimiter(',')
        ->check(CLI::IsMember(spanscope::global_policies()))
        ->capture_default_str();
    eval_cmd
        ->add_option("--budget", ev.budgets,
                     "Fast-tier budgets of the compressed policies (fractions of full)")
        ->delimiter(',')
        ->check(finite_number())
        ->check(CLI::Range(0.01, 1.0))
        ->capture_default_str();

    PicEvalOptions pe;
    auto* pic_cmd = app.add_subcommand(
        "pic-eval", "Measure position-independent caching: the context of each generated sample "
                    "cut into documents prefilled on their own, assembled with each selector's "
                    "recompute set, against a full recompute (quality and time to first token)");
    std::vector<std::string> pic_tasks;
    for (const auto& t : spanscope::eval::task_names())
        if (t != "vt")
            pic_tasks.push_back(t);
    pic_cmd->add_option("task", pe.task, "Task")->required()->check(CLI::IsMember(pic_tasks));
    pic_cmd->add_option("--model", pe.model, "GGUF model file");
    pic_cmd->add_option("--documents", pe.documents, "Documents the context is cut into")
        ->delimiter(',')
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    pic_cmd->add_option("--lengths", pe.lengths, "Context lengths in tokens (all documents)")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{256}, int64_t{32000}))
        ->capture_default_str();
    pic_cmd->add_option("--depths", pe.depths, "Needle depths, percent of the context")
        ->delimiter(',')
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    pic_cmd->add_option("--samples", pe.samples, "Samples per length and document count")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    pic_cmd->add_option("--seed", pe.seed, "Seed of the samples")->capture_default_str();
    pic_cmd->add_option("--selector", pe.selectors, "Selectors (none, epic, cacheblend, full)")
        ->delimiter(',')
        ->check(CLI::IsMember(spanscope::recompute_selectors()))
        ->capture_default_str();
    pic_cmd
        ->add_option("--recompute", pe.ratios,
                     "Recompute ratios of epic and cacheblend (share of the context's tokens)")
        ->delimiter(',')
        ->check(finite_number())
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    pic_cmd->add_option("--check-layer", pe.check_layer, "CacheBlend's check layer")
        ->check(CLI::Range(0, 1024))
        ->capture_default_str();
    pic_cmd->add_option("--max-tokens", pe.max_tokens, "Most answer tokens (0: the task's)")
        ->check(CLI::Range(0, 4096));
    pic_cmd->add_option("--threads", pe.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    pic_cmd->add_option("--qa-set", pe.qa_set,
                        "Question set of the qa task (tests/qa/questions.json)");
    pic_cmd->add_option("--out", pe.out,
                        "Append one JSON line per sample and selector (a run resumes from it)");
    pic_cmd->add_flag("--json", pe.json, "Print the results and a summary as one JSON object");
    pic_cmd->add_flag("--quiet", pe.quiet, "No progress line per answer on stderr");

    ZoomTrainCliOptions zt;
    auto* zt_cmd = add_zoom_train_command(app, zt);

    StateInitEvalOptions si;
    auto* si_cmd = app.add_subcommand(
        "state-init-eval",
        "Measure the recurrent layers' state initialisers (single-block, exact, zero) on a "
        "hybrid model: K documents of random tokens prefilled on their own, assembled, against "
        "a joint run (KL of the next-token distribution, relative state error, time)");
    si_cmd->add_option("--model", si.model, "Hybrid GGUF model file (granitehybrid, qwen3next)")
        ->required();
    si_cmd->add_option("--documents", si.documents, "Documents per sample (K)")
        ->delimiter(',')
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    si_cmd->add_option("--doc-tokens", si.doc_tokens, "Tokens per document, its BOS included")
        ->check(CLI::Range(2, 100000))
        ->capture_default_str();
    si_cmd->add_option("--question-tokens", si.question_tokens, "Tokens of the question")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    si_cmd->add_option("--samples", si.samples, "Samples per K")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    si_cmd->add_option("--seed", si.seed, "Seed of the random tokens")->capture_default_str();
    si_cmd->add_option("--init", si.initialisers, "State initialisers (single-block, exact, zero)")
        ->delimiter(',')
        ->check(CLI::IsMember(spanscope::state_initialiser_names()))
        ->capture_default_str();
    si_cmd->add_option("--threads", si.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    si_cmd->add_option(
        "--out", si.out,
        "Append one JSON line per sample, K and initialiser (a run resumes from it)");
    si_cmd->add_flag("--json", si.json, "Print the results and a summary as one JSON object");
    si_cmd->add_flag("--quiet", si.quiet, "No progress line per result on stderr");

    ZoomRecordOptions zr;
    auto* zr_cmd = app.add_subcommand(
        "zoom-record",
        "Record full attention on real documents for SEKV's trained zoom-in: per document, SEKV "
        "layer and mined query position, the query, the output and the mass on each span "
        "(resumable; one GGUF file per document)");
    zr_cmd->add_option("--model", zr.model, "GGUF model file");
    zr_cmd->add_option("--out", zr.out, "Directory of the recordings")->required();
    zr_cmd->add_option("--documents", zr.documents,
                       "Documents to record (default: the vim user manual, "
                       "/usr/share/vim/vim90/doc/usr_*.txt but usr_01 and usr_02)");
    zr_cmd->add_option("--max-tokens", zr.max_tokens, "Tokens recorded per document (BOS in)")
        ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
        ->capture_default_str();
    zr_cmd->add_option("--queries", zr.queries, "Query positions kept per document")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();
    zr_cmd
        ->add_option("--tail", zr.tail,
                     "Tokens before a query held at full resolution (spans ending before "
                     "query - tail are visible)")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    zr_cmd->add_option("--budget", zr.budget, "SEKV's fast-tier budget of the segmentation")
        ->check(finite_number())
        ->check(CLI::Range(0.01, 1.0))
        ->capture_default_str();
    zr_cmd
        ->add_option("--first-query", zr.first_query,
                     "Candidate query positions every 8 tokens from this one")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    zr_cmd
        ->add_option("--recall-probes", zr.recall_probes,
                     "Runs of the document copied after it, at evenly spaced depths: queries "
                     "that must find one span far back, as a question about the document does")
        ->check(CLI::Range(0, 1000))
        ->capture_default_str();
    zr_cmd->add_option("--probe-tokens", zr.probe_tokens, "Tokens per recall probe")
        ->check(CLI::Range(8, 4096))
        ->capture_default_str();
    zr_cmd
        ->add_option("--probe-form", zr.probe_form,
                     "copy: the runs copied after the document; question: the document as a "
                     "question prompt holds it, then question turns answered with the runs; "
                     "fact: made-up facts (a person's locker, badge, ... number) inserted "
                     "between the document's lines, then question turns asking for them")
        ->check(CLI::IsMember({"copy", "question", "fact"}))
        ->capture_default_str();
    zr_cmd->add_option("--threads", zr.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    zr_cmd
        ->add_option("--held-out", zr.held_out,
                     "The last N documents are recorded into DIR/held-out (held-out evaluation)")
        ->check(CLI::Range(0, 100000))
        ->capture_default_str();

    SourcesOptions src;
    auto* src_cmd = app.add_subcommand(
        "sources", "Measure an answer's sources through the product's path (a throw-away "
                   "project per sample, ingested and asked): on needles, whether the needle's "
                   "passage is the top source and decode speed with and without sources; with "
                   "--qa, whether the top source holds the answer");
    src_cmd->add_option("--model", src.model, "GGUF model file");
    src_cmd->add_option("--lengths", src.lengths, "Haystack lengths in tokens")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{256}, int64_t{32000}))
        ->capture_default_str();
    src_cmd->add_option("--depths", src.depths, "Needle depths, percent of the haystack")
        ->delimiter(',')
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    src_cmd->add_option("--samples", src.samples, "Samples per length (depths taken in turn)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    src_cmd->add_option("--seed", src.seed, "Seed of the samples")->capture_default_str();
    src_cmd
        ->add_option("--max-tokens", src.max_tokens,
                     "Most answer tokens (0: 16 for needles, 32 for the QA set)")
        ->check(CLI::Range(0, 4096));
    src_cmd->add_option("--threads", src.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    src_cmd->add_option("--qa", src.qa,
                        "Measure this question set (tests/qa/questions.json) instead of needles");
    src_cmd->add_option("--out", src.out, "Also append each JSON line to this file");
    src_cmd->add_flag("--quiet", src.quiet, "No progress line per sample on stderr");
    add_policy_options(*src_cmd, src.policy);
    src_cmd->remove_option(src_cmd->get_option("--policy"));
    src_cmd
        ->add_option("--policy", src.policies,
                     "Policies asked (full, sekv: those a project answers with); the SEKV "
                     "settings apply to sekv")
        ->delimiter(',')
        ->check(CLI::IsMember({"full", "sekv"}))
        ->capture_default_str();

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

    if (const auto code = parse_command_line(app, argc, argv, "spanscope-lab"))
        return *code;
    try {
        if (*niah_cmd)
            return run_niah(niah);
        if (*qa_cmd)
            return run_qa(qa);
        if (*src_cmd)
            return run_sources(src);
        if (*eval_cmd) {
            if (ev.task == "qa" && ev.qa_set.empty()) {
                std::cerr << "spanscope-lab: eval qa needs a question set: --qa-set FILE (e.g. "
                             "tests/qa/questions.json)\n";
                return 2;
            }
            for (int i = 0; i < argc; ++i)
                ev.command_line += (i ? " " : "") + std::string(argv[i]);
            return run_eval(ev);
        }
        if (*pic_cmd) {
            for (int i = 0; i < argc; ++i)
                pe.command_line += (i ? " " : "") + std::string(argv[i]);
            return run_pic_eval(pe);
        }
        if (*si_cmd) {
            for (int i = 0; i < argc; ++i)
                si.command_line += (i ? " " : "") + std::string(argv[i]);
            return run_state_init_eval(si);
        }
        if (*zr_cmd) {
            for (int i = 0; i < argc; ++i)
                zr.command_line += (i ? " " : "") + std::string(argv[i]);
            return run_zoom_record(zr);
        }
        if (*zt_cmd) {
            for (int i = 0; i < argc; ++i)
                zt.command_line += (i ? " " : "") + std::string(argv[i]);
            return run_zoom_train(zt);
        }
    } catch (const std::exception& e) {
        std::cerr << "spanscope-lab: " << e.what() << "\n";
        return 1;
    }
    return 2;
}
