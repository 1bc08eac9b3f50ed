// `spanscope-lab zoom-record`: the recordings SEKV's trained zoom-in learns from (issue 8;
// lab/router/zoom_recorder.h, lab/router/zoom_record.h). Each document is prefilled once with full
// attention and recorded into OUT/<name>.zoom-record.gguf (the last --held-out documents into
// OUT/held-out/). A run resumes: a document whose recording exists with the same model,
// settings and tokens is skipped; a recording made otherwise stops the run (never mixed).
// Files are written atomically, and Ctrl-C stops at the next ubatch: no file is half written.
#include "lab/cli/lab_commands.h"

#include "app/cli/project_support.h"
#include "engine/model/model.h"
#include "lab/evaluation/eval_corpus.h"
#include "lab/router/zoom_fact_probes.h"
#include "lab/router/zoom_question_probes.h"
#include "lab/router/zoom_recorder.h"
#include "spanscope_git_commit.h" // SPANSCOPE_GIT_COMMIT, generated at build time
#include "storage/document_loader.h"
#include "storage/model_fingerprint.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace spanscope::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kVimDocs = "/usr/share/vim/vim90/doc";

// The texts the evaluation reads (its prose haystack and the QA set, tests/qa/questions.json):
// a recording of them would leak the test data into training.
bool is_evaluation_text(const fs::path& canonical) {
    static const std::set<fs::path> texts = [] {
        std::set<fs::path> s;
        auto add = [&](const fs::path& p) {
            std::error_code ec;
            s.insert(fs::weakly_canonical(p, ec));
        };
        for (const auto& f : eval::licence_files())
            add(f);
        add("/usr/share/doc/bash/RBASH");
        add(fs::path(kVimDocs) / "usr_01.txt");
        add(fs::path(kVimDocs) / "usr_02.txt");
        return s;
    }();
    const std::string text = canonical.string();
    return texts.count(canonical) != 0 || text.rfind("/usr/share/common-licenses/", 0) == 0;
}

std::vector<std::string> default_documents() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kVimDocs, ec)) {
        const std::string name = e.path().filename().string();
        // The chapters, without the two the evaluation reads and the table of contents (a list
        // of titles, not prose a question is asked about).
        if (name.rfind("usr_", 0) == 0 && e.path().extension() == ".txt" && name != "usr_01.txt" &&
            name != "usr_02.txt" && name != "usr_toc.txt")
            out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    if (out.empty())
        throw std::runtime_error(std::string("no documents: the vim user manual (") + kVimDocs +
                                 "/usr_*.txt, Debian package vim-runtime) is not installed; "
                                 "give --documents");
    return out;
}

std::string plural(int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string fixed(double x, int digits) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(digits) << x;
    return o.str();
}

} // namespace

int run_zoom_record(const ZoomRecordOptions& o) {
    install_interrupt_handler();
    ZoomRecordSettings settings;
    settings.max_tokens = o.max_tokens;
    settings.queries = o.queries;
    settings.tail = o.tail;
    settings.budget = o.budget;
    settings.first_query = o.first_query;
    settings.recall_probes = o.recall_probes;
    settings.probe_tokens = o.probe_tokens;
    if (o.probe_form == "question") {
        if (o.recall_probes < 1)
            throw std::invalid_argument("--probe-form question needs --recall-probes N >= 1");
        settings.probe_form = ZoomProbeForm::Question;
    } else if (o.probe_form == "fact") {
        if (o.recall_probes < 1)
            throw std::invalid_argument("--probe-form fact needs --recall-probes N >= 1");
        settings.probe_form = ZoomProbeForm::Fact;
    } else if (o.probe_form != "copy")
        throw std::invalid_argument("--probe-form must be copy, question or fact, not " +
                                    o.probe_form);
    check_zoom_record_settings(settings);
    if (o.out.empty())
        throw std::invalid_argument("--out DIR is required");

    // The documents, checked before the model is loaded: evaluation texts and two documents
    // that would share an output file are refused.
    const auto given = o.documents.empty() ? default_documents() : o.documents;
    std::vector<std::string> sources;
    std::map<std::string, std::string> by_name;
    for (const auto& g : given) {
        std::error_code ec;
        const fs::path canonical = fs::weakly_canonical(fs::absolute(g), ec);
        if (ec)
            throw std::runtime_error(g + ": " + ec.message());
        if (is_evaluation_text(canonical))
            throw std::invalid_argument(g + " is one of the evaluation's texts; recordings for "
                                            "training must not include it");
        const std::string name = canonical.filename().string();
        if (auto [it, fresh] = by_name.emplace(name, g); !fresh)
            throw std::invalid_argument(g + " and " + it->second + " would both be recorded as " +
                                        name + ".zoom-record.gguf");
        sources.push_back(canonical.string());
    }
    const int64_t n_docs = static_cast<int64_t>(sources.size());
    const int64_t held_out = std::min<int64_t>(std::max(o.held_out, 0), n_docs);

    auto model = open_model(o.model);
    const std::string fingerprint = fingerprint_hex(model_fingerprint(*model));
    const std::string key = zoom_record_settings_key(settings);
    const fs::path out_dir(o.out), held_dir = fs::path(o.out) / "held-out";
    fs::create_directories(out_dir);
    if (held_out > 0)
        fs::create_directories(held_dir);
    std::cerr << plural(n_docs, "document", "documents") << ": " << n_docs - held_out
              << " for training in " << out_dir.string() << ", " << held_out << " held out in "
              << held_dir.string() << "; " << key << "\n";

    int failed = 0, recorded = 0, skipped = 0;
    auto interrupted = [&] {
        std::cerr << "interrupted: " << plural(recorded, "document", "documents")
                  << " recorded now, " << skipped << " before; run the same command to resume\n";
        return interrupted_exit_code();
    };
    for (int64_t d = 0; d < n_docs; ++d) {
        const std::string& source = sources[static_cast<size_t>(d)];
        const std::string name = fs::path(source).filename().string();
        const fs::path dest =
            (d >= n_docs - held_out ? held_dir : out_dir) / (name + ".zoom-record.gguf");
        const std::string tag =
            "[" + std::to_string(d + 1) + "/" + std::to_string(n_docs) + "] " + name;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            const auto doc = load_document(source);
            // The tokens, and where the document ends and the probes begin.
            std::vector<int32_t> tokens;
            int64_t document_end = 0;
            if (settings.probe_form != ZoomProbeForm::Copy && settings.recall_probes > 0) {
                auto p =
                    settings.probe_form == ZoomProbeForm::Fact
                        ? zoom_fact_probes(model->tokenizer(),
                                           chat_format_of(model->info(), model->tokenizer()), name,
                                           doc.text, settings)
                        : zoom_question_probes(model->tokenizer(),
                                               chat_format_of(model->info(), model->tokenizer()),
                                               name, doc.text, settings);
                tokens = std::move(p.tokens);
                document_end = p.document_end;
            } else {
                tokens = zoom_recall_probes(
                    zoom_document_tokens(model->tokenizer(), doc.text, o.max_tokens), settings);
                document_end = static_cast<int64_t>(tokens.size()) -
                               int64_t{settings.recall_probes} * settings.probe_tokens;
            }
            if (zoom_resume(dest.string(), source, tokens, fingerprint, key) == ZoomResume::Skip) {
                std::cerr << tag << ": already recorded in " << dest.string() << ", skipped\n";
                ++skipped;
                continue;
            }
            auto rec = record_zoom(*model, tokens, settings, o.threads, &g_interrupted);
            ZoomRecord& r = rec.record;
            r.source = source;
            r.model_fingerprint = fingerprint;
            r.command = o.command_line;
            r.commit = SPANSCOPE_GIT_COMMIT;
            save_zoom_record(r, dest.string());
            ++recorded;
            const double all =
                rec.reach.empty()
                    ? 0
                    : std::accumulate(rec.reach.begin(), rec.reach.end(), 0.0) / rec.reach.size();
            double kept = 0;
            for (size_t c = 0; c < rec.candidates.size(); ++c)
                if (std::binary_search(r.query_pos.begin(), r.query_pos.end(), rec.candidates[c]))
                    kept += rec.reach[c];
            kept = r.query_pos.empty() ? 0 : kept / static_cast<double>(r.query_pos.size());
            std::string probes_part;
            if (settings.recall_probes > 0)
                probes_part =
                    ", " +
                    std::to_string(std::count_if(r.query_pos.begin(), r.query_pos.end(),
                                                 [&](int32_t p) { return p >= document_end; })) +
                    " after the document";
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::cerr << tag << ": " << r.n_tokens() << " tokens, " << r.spans.size()
                      << " spans (alpha " << fixed(rec.alpha, 2)
                      << (rec.budget_met ? "" : ", budget not met: no span held") << "), "
                      << r.n_queries() << " queries of " << rec.candidates.size() << " candidates"
                      << probes_part << " (mean reach: kept " << fixed(kept, 3) << ", all "
                      << fixed(all, 3) << "), output check " << std::scientific
                      << std::setprecision(1) << rec.out_check << std::defaultfloat << ", "
                      << fixed(rec.prefill_seconds, 1) << " s prefill, " << fixed(seconds, 1)
                      << " s, " << human_bytes(static_cast<int64_t>(fs::file_size(dest))) << " -> "
                      << dest.string() << "\n";
        } catch (const Cancelled&) {
            return interrupted();
        } catch (const ZoomRecordError&) {
            throw; // a recording made otherwise: stop, nothing is mixed
        } catch (const DocumentError& e) {
            std::cerr << "spanscope-lab: " << e.what() << " (skipped)\n";
            ++failed;
        } catch (const ZoomOutCheckError& e) {
            std::cerr << "spanscope-lab: " << source << ": " << e.what() << " (skipped)\n";
            ++failed;
        } catch (const std::invalid_argument& e) {
            std::cerr << "spanscope-lab: " << source << ": " << e.what() << " (skipped)\n";
            ++failed;
        }
        if (g_interrupted.load())
            return interrupted();
    }
    std::cerr << recorded << " recorded, " << skipped << " already recorded, " << failed
              << " failed\n";
    return failed ? 1 : 0;
}

} // namespace spanscope::cli
