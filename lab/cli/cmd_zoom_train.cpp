// `spanscope-lab zoom-train`: SEKV's trained zoom-in learned from recordings (issue 8;
// zoom_record.h, zoom_model.h, zoom_train.h). Reads the recordings of a directory (and of its
// held-out/ subdirectory for evaluation), trains the router (W, θ per layer and query head) and
// the rank gates with the base model frozen, and writes the parameter file (router_params.h) with
// its provenance. Resumes from its checkpoint; prints a progress line per step and writes the
// loss curves (train and held-out) as JSON lines for spanscope-report.
#include "app/cli/finite_check.h"
#include "lab/cli/lab_commands.h"

#include "engine/text/content_hash.h"

#include "engine/model/model.h"
#include "engine/model/model_locator.h"
#include "engine/sekv/router_params.h"
#include "engine/sekv/span_sketch.h"
#include "lab/router/zoom_record.h"
#include "lab/router/zoom_reference.h"
#include "lab/router/zoom_train.h"
#include "spanscope_git_commit.h" // SPANSCOPE_GIT_COMMIT, generated at build time
#include "storage/model_fingerprint.h"
#include "storage/project_clock.h" // now_iso

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace spanscope::cli {

namespace {

namespace fs = std::filesystem;

std::vector<ZoomRecord> load_records(const std::string& dir, bool required) {
    std::vector<std::string> paths;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
        if (required)
            throw std::runtime_error("no recordings: " + dir + " is not a directory");
        return {};
    }
    for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (e.is_regular_file() && name.ends_with(".zoom-record.gguf"))
            paths.push_back(e.path().string());
    }
    std::sort(paths.begin(), paths.end());
    if (paths.empty() && required)
        throw std::runtime_error("no recordings (*.zoom-record.gguf) in " + dir +
                                 "; make them with spanscope-lab zoom-record");
    std::vector<ZoomRecord> out;
    for (const auto& p : paths)
        out.push_back(load_zoom_record(p));
    return out;
}

nlohmann::json loss_json(const ZoomLoss& l) {
    return {{"zoom", l.zoom},
            {"ranking", l.ranking},
            {"distill", l.distill},
            {"recon", l.recon},
            {"recon_hard", l.recon_hard},
            {"budget", l.budget},
            {"budget_soft", l.budget_soft},
            {"total", l.total},
            {"expansion_rate", l.expansion_rate},
            {"label_rate", l.label_rate},
            {"label_recall", l.label_recall},
            {"mean_rank", l.mean_rank},
            {"examples", l.examples}};
}

// Every option that changes what training computes, the recordings' contents (data), the
// model and the thread count (the order of the sums): a checkpoint of another configuration is
// refused.
std::string config_string(const ZoomTrainCliOptions& o, const ZoomTrainOptions& t,
                          const std::string& data, const std::string& model, int threads) {
    std::ostringstream s;
    // The parameter format's version stands for the model's form (the relevance, the gate's
    // input): a checkpoint trained for another form is not resumed.
    s << "format=" << RouterParams::kVersion << ";data=" << data << ";model=" << model
      << ";threads=" << threads << ";d_out=" << o.d_out << ";hidden=" << o.hidden
      << ";max_rank=" << o.max_rank << ";steps=" << t.steps << ";batch=" << t.batch
      << ";lr=" << t.lr << ";warmup=" << t.warmup << ";min_lr=" << t.min_lr_ratio
      << ";wd=" << t.weight_decay << ";clip=" << t.clip << ";seed=" << t.seed
      << ";init_rate=" << t.init_expand_rate << ";gate_bias=" << t.init_gate_bias
      << ";T=" << t.loss.temperature << ";coverage=" << t.loss.coverage
      << ";pos_weight=" << t.loss.pos_weight << ";w=" << t.loss.w_zoom << "," << t.loss.w_distill
      << "," << t.loss.w_recon << "," << t.loss.w_budget << ";budget=" << t.loss.expansion_weight
      << "," << t.loss.rank_weight;
    if (t.loss.w_ranking != 0) // only then, so that earlier checkpoints resume
        s << ";w_ranking=" << t.loss.w_ranking;
    if (t.loss.share_group) // likewise
        s << ";share_group=1";
    return s.str();
}

// The recordings' key (zoom_record_digest of each, training then held out), after checking
// that no document is both trained on and held out: held-out losses of a trained-on document
// would say nothing about other text.
std::string data_key(const std::vector<ZoomRecord>& train, const std::vector<ZoomRecord>& held) {
    std::map<std::string, std::string> seen; // digest or source -> the training recording
    ContentHash h;
    for (const auto& r : train) {
        const auto d = zoom_record_digest(r);
        seen.emplace(d, r.source);
        seen.emplace("source:" + r.source, r.source);
        h.str(d);
    }
    h.str("held-out");
    for (const auto& r : held) {
        const auto d = zoom_record_digest(r);
        for (const auto& key : {d, "source:" + r.source})
            if (const auto it = seen.find(key); it != seen.end())
                throw std::runtime_error("the held-out recording of " + r.source +
                                         " is also a training recording (of " + it->second +
                                         "): held-out documents must not be trained on");
        h.str(d);
    }
    return h.hex();
}

// The curves file of this run: a fresh run starts it anew; a resumed run keeps the lines up to
// the checkpoint's step (the steps after it are computed again) and appends. Rewritten through
// a temporary file, so a failure leaves the old one whole.
std::ofstream open_curves(const std::string& path, int64_t resumed_step) {
    std::vector<std::string> kept;
    if (resumed_step > 0) {
        std::ifstream in(path);
        std::string line;
        while (std::getline(in, line)) {
            const auto j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_discarded() && j.is_object() && j.contains("step") &&
                j["step"].is_number_integer() && j["step"].get<int64_t>() <= resumed_step)
                kept.push_back(line);
        }
    }
    const auto tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        for (const auto& l : kept)
            out << l << "\n";
        out.flush();
        if (!out)
            throw std::runtime_error("cannot write the curves to " + tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec)
        throw std::runtime_error("cannot write the curves to " + path + ": " + ec.message());
    std::ofstream curves(path, std::ios::app);
    if (!curves)
        throw std::runtime_error("cannot write the curves to " + path);
    return curves;
}

// --compare: the parameter file OUT against the training-free router on the held-out
// recordings, in the training's terms (distillation, expansions, label recall); the trained
// router also with every factor at full rank, to tell what the router and the rank gate lose.
int compare_on_held_out(const ZoomTrainCliOptions& o, const std::vector<ZoomExampleSet>& sets,
                        const std::vector<ZoomItem>& held, const std::string& fingerprint,
                        const std::string& model_name, ThreadPool& pool) {
    if (held.empty())
        throw std::runtime_error("--compare needs held-out recordings (" +
                                 (o.held_out.empty() ? o.records + "/held-out" : o.held_out) + ")");
    const RouterParams p = load_router_params(o.out, fingerprint, model_name);
    for (const auto& l : p.layers)
        if (l.gate.n_rank != o.max_rank)
            throw std::runtime_error(o.out + ": its rank gate decides among " +
                                     std::to_string(l.gate.n_rank) +
                                     " components, as inference builds the spans; pass "
                                     "--max-rank " +
                                     std::to_string(l.gate.n_rank));
    auto line = [](const char* what, double distill, double expand, double recall, double rank) {
        std::printf("%-44s distill %.4f  expand %5.1f %%  label recall %5.1f %%", what, distill,
                    100 * expand, 100 * recall);
        if (rank > 0)
            std::printf("  rank %.1f", rank);
        std::printf("\n");
    };
    // The learned thresholds decide as the training did: each head alone, or the KV group's
    // union when the file was trained with --share-group (or it is given); the lines say which.
    ZoomLossOptions lo = o.train.loss;
    lo.share_group = lo.share_group || p.share_group;
    const bool united = lo.share_group;
    const auto gated = zoom_loss(p, sets, held, lo, nullptr, pool);
    std::printf("trained: held-out losses%s zoom %.4f  distill %.4f  recon %.4f "
                "(hard %.4f)  budget %.4f (soft %.4f)  ranking %.4f\n",
                united ? " (KV group union)    " : "                     ", gated.zoom,
                gated.distill, gated.recon, gated.recon_hard, gated.budget, gated.budget_soft,
                gated.ranking);
    line(united ? "trained router, rank gate (union)" : "trained router, trained rank gate",
         gated.distill, gated.expansion_rate, gated.label_recall, gated.mean_rank);
    lo.full_rank = true;
    const auto full = zoom_loss(p, sets, held, lo, nullptr, pool);
    line(united ? "trained router, full-rank factors (union)" : "trained router, full-rank factors",
         full.distill, full.expansion_rate, full.label_recall, full.mean_rank);
    lo.share_group = false; // the lines at equal rates compare each head alone
    for (const bool share : {true, false}) {
        ZoomReferenceOptions ro;
        ro.expand_rate = o.train.init_expand_rate;
        ro.share_group = share;
        ro.coverage = o.train.loss.coverage;
        const auto r = router_reference(sets, held, ro, pool);
        line(share ? "training-free router (KV group union)" : "training-free router (per head)",
             r.distill, r.expansion_rate, r.label_recall, 0);
    }
    std::printf("(%zu held-out examples; training-free τ at the %.0f %% quantile per head)\n",
                held.size(), 100 * (1 - o.train.init_expand_rate));
    // Equal expansions: each router's threshold per head at the same quantile of its own scores
    // on these examples (calibrate_theta, router_reference), each head alone, every factor at
    // full rank (the router alone; lo.full_rank is set above); then both with inference's rule,
    // the KV group's union of those choices (router_reference), where the shares expanded are
    // no longer equal.
    // One line: the two routers' distillation, expansions and label recall (ZoomLoss or
    // ZoomReference each).
    auto pair_line = [](const char* label, const auto& t, const auto& r) {
        std::printf("%s trained distill %.4f  expand %5.1f %%  label recall %5.1f %%   "
                    "training-free distill %.4f  expand %5.1f %%  label recall %5.1f %%\n",
                    label, t.distill, 100 * t.expansion_rate, 100 * t.label_recall, r.distill,
                    100 * r.expansion_rate, 100 * r.label_recall);
    };
    for (const double rate : o.compare_rates) {
        RouterParams at = p;
        calibrate_theta(at, sets, held, rate);
        const auto t = zoom_loss(at, sets, held, lo, nullptr, pool);
        ZoomReferenceOptions ro;
        ro.expand_rate = rate;
        ro.share_group = false;
        ro.coverage = o.train.loss.coverage;
        const auto r = router_reference(sets, held, ro, pool);
        char head[40];
        std::snprintf(head, sizeof head, "at %5.1f %% per head:", 100 * rate);
        pair_line(head, t, r);
        ro.share_group = true;
        const auto ru = router_reference(sets, held, ro, pool);
        ro.trained = &p;
        const auto tu = router_reference(sets, held, ro, pool);
        pair_line("  with the KV group union:", tu, ru);
        // τ calibrated on each query's own spans (inference calibrates on the question's).
        ro.tau_per_query = true;
        const auto tq = router_reference(sets, held, ro, pool);
        ro.trained = nullptr;
        const auto rq = router_reference(sets, held, ro, pool);
        pair_line("  union, tau per query:   ", tq, rq);
    }
    return 0;
}

} // namespace

int run_zoom_train(const ZoomTrainCliOptions& o) {
    const auto where = locate_model(o.model);
    auto model = open_model(o.model);
    const auto fingerprint = fingerprint_hex(model_fingerprint(*model));
    const auto model_name = fs::path(where.path).filename().string();

    const auto train_records = load_records(o.records, true);
    const auto held_dir =
        o.held_out.empty() ? (fs::path(o.records) / "held-out").string() : o.held_out;
    const auto held_records = load_records(held_dir, false);
    for (const auto* list : {&train_records, &held_records})
        for (const auto& r : *list)
            if (r.model_fingerprint != fingerprint)
                throw std::runtime_error(r.source + " was recorded with another model (" +
                                         r.model_fingerprint + ") than " + model_name + " (" +
                                         fingerprint + ")");

    // The parameter shapes: one entry per recorded layer.
    std::vector<RouterLayerParams> shapes;
    for (const auto& rl : train_records.front().layers) {
        RouterLayerParams s;
        s.layer = rl.layer;
        s.n_head = rl.n_head;
        s.head_dim = rl.head_dim;
        s.d_out = o.d_out;
        s.gate.n_rank = o.max_rank;
        s.gate.head_dim = rl.head_dim;
        s.gate.n_hidden = o.hidden;
        shapes.push_back(s);
    }
    // The sketch basis: fitted once on the training recordings' queries (not trained by
    // gradient), before the spans are prepared, as their sketches depend on it. --compare
    // takes the basis of the file it compares.
    if (o.compare) {
        const auto file = load_router_params(o.out, fingerprint, model_name);
        for (auto& s : shapes)
            if (const auto* l = file.find(s.layer)) {
                s.sketch_dim = l->sketch_dim;
                s.n_kv_head = l->n_kv_head;
                s.sketch = l->sketch;
            }
    } else if (o.sketch_dim > 0)
        for (size_t li = 0; li < shapes.size(); ++li) {
            auto& s = shapes[li];
            const auto& first = train_records.front().layers[li];
            if (o.sketch_dim > s.head_dim)
                throw std::runtime_error("--sketch-dim " + std::to_string(o.sketch_dim) +
                                         " exceeds the head dimension " +
                                         std::to_string(s.head_dim));
            std::vector<float> q;
            int64_t n_q = 0;
            for (const auto& r : train_records) {
                if (r.layers.size() != shapes.size())
                    throw std::runtime_error(r.source + ": its layers differ from " +
                                             train_records.front().source + "'s");
                const auto& rl = r.layers[li];
                if (rl.layer != s.layer || rl.n_head != s.n_head || rl.head_dim != s.head_dim ||
                    rl.n_kv_head != first.n_kv_head)
                    throw std::runtime_error(r.source + ": its layers differ from " +
                                             train_records.front().source + "'s");
                q.insert(q.end(), rl.q.begin(), rl.q.end());
                n_q += r.n_queries();
            }
            s.sketch_dim = o.sketch_dim;
            s.n_kv_head = first.n_kv_head;
            s.sketch =
                fit_sketch_basis(q.data(), n_q, s.n_head, s.n_kv_head, s.head_dim, o.sketch_dim);
        }
    RouterParams init =
        init_router_params(shapes, o.train.seed, kZoomInitWScale, o.train.init_gate_bias);
    init.model_fingerprint = fingerprint;
    init.model_name = model_name;

    ThreadPool pool(o.threads);
    // The spans' factors (an SVD each) of the recordings in parallel, one recording per task.
    auto build = [&](const std::vector<ZoomRecord>& recs, std::vector<ZoomExampleSet>& sets,
                     std::vector<ZoomItem>& items) {
        sets.resize(recs.size());
        pool.parallel_for(static_cast<int64_t>(recs.size()), [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i)
                sets[static_cast<size_t>(i)] =
                    prepare_examples(recs[static_cast<size_t>(i)], init, o.max_rank);
        });
        for (size_t i = 0; i < sets.size(); ++i)
            for (const auto& ex : list_examples(sets[i]))
                items.push_back({static_cast<int>(i), ex});
    };
    // Before the long preparation: a held-out document also trained on is refused at once.
    const auto data = data_key(train_records, held_records);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<ZoomExampleSet> train_sets, held_sets;
    std::vector<ZoomItem> train, held;
    build(train_records, train_sets, train);
    build(held_records, held_sets, held);
    if (train.empty())
        throw std::runtime_error("the recordings in " + o.records +
                                 " hold no query that sees a span");
    if (o.compare)
        return compare_on_held_out(o, held_sets, held, fingerprint, model_name, pool);
    calibrate_theta(init, train_sets, train, o.train.init_expand_rate);
    std::fprintf(stderr,
                 "zoom-train: %zu recordings (%zu examples), %zu held out (%zu examples), %lld "
                 "parameters; prepared in %.1f s\n",
                 train_records.size(), train.size(), held_records.size(), held.size(),
                 static_cast<long long>(init.n_parameters()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

    auto config = config_string(o, o.train, data, fingerprint, pool.size());
    if (o.sketch_dim > 0) { // the fitted basis itself: a checkpoint of another one is refused
        ContentHash h;
        for (const auto& l : init.layers)
            h.floats(l.sketch);
        config += ";sketch_dim=" + std::to_string(o.sketch_dim) + ";sketch=" + h.hex();
    }
    const auto ckpt = o.checkpoint.empty() ? o.out + ".ckpt" : o.checkpoint;
    ZoomTrainState state = start_training(init);
    if (fs::exists(ckpt)) {
        state = load_zoom_checkpoint(ckpt, config, init);
        state.params.model_fingerprint = fingerprint;
        state.params.model_name = model_name;
        std::fprintf(stderr, "zoom-train: resuming from %s at step %lld\n", ckpt.c_str(),
                     static_cast<long long>(state.step));
    }
    std::ofstream curves;
    if (!o.curves.empty())
        curves = open_curves(o.curves, state.step);
    auto write_line = [&](const nlohmann::json& j) {
        if (curves) {
            curves << j.dump() << "\n";
            curves.flush();
        }
    };
    if (state.step == 0 && !held.empty()) {
        const auto l0 = zoom_loss(state.params, held_sets, held, o.train.loss, nullptr, pool);
        write_line({{"step", 0}, {"split", "held_out"}, {"loss", loss_json(l0)}});
        std::fprintf(stderr,
                     "held-out step 0: total %.4f zoom %.4f distill %.4f recon %.4f (hard "
                     "%.4f) budget %.4f (soft %.4f) ranking %.4f expand %.1f %% rank %.1f\n",
                     l0.total, l0.zoom, l0.distill, l0.recon, l0.recon_hard, l0.budget,
                     l0.budget_soft, l0.ranking, 100 * l0.expansion_rate, l0.mean_rank);
    }
    const auto ts = std::chrono::steady_clock::now();
    const int64_t start_step = state.step;
    train_zoom(
        state, train_sets, train, held_sets, held, o.train, pool, ckpt, config,
        [&](const ZoomProgress& p) {
            write_line({{"step", p.step},
                        {"split", "train"},
                        {"lr", p.lr},
                        {"grad_norm", p.grad_norm},
                        {"loss", loss_json(p.train)}});
            if (p.evaluated)
                write_line(
                    {{"step", p.step}, {"split", "held_out"}, {"loss", loss_json(p.held_out)}});
            if (o.quiet && !p.evaluated)
                return;
            const double s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count();
            std::fprintf(stderr,
                         "step %lld/%lld lr %.2e loss %.4f (zoom %.4f distill %.4f recon "
                         "%.4f budget %.4f) expand %.1f %% rank %.1f |g| %.3f %.1f s\n",
                         static_cast<long long>(p.step), static_cast<long long>(o.train.steps),
                         p.lr, p.train.total, p.train.zoom, p.train.distill, p.train.recon,
                         p.train.budget, 100 * p.train.expansion_rate, p.train.mean_rank,
                         p.grad_norm, s);
            if (p.evaluated)
                std::fprintf(stderr,
                             "held-out step %lld: total %.4f zoom %.4f distill %.4f recon "
                             "%.4f (hard %.4f) budget %.4f (soft %.4f) ranking %.4f expand "
                             "%.1f %% rank %.1f\n",
                             static_cast<long long>(p.step), p.held_out.total, p.held_out.zoom,
                             p.held_out.distill, p.held_out.recon, p.held_out.recon_hard,
                             p.held_out.budget, p.held_out.budget_soft, p.held_out.ranking,
                             100 * p.held_out.expansion_rate, p.held_out.mean_rank);
        });
    RouterParams out = state.params;
    out.provenance.data = o.records + " (" + std::to_string(train_records.size()) +
                          " recordings; held out: " + std::to_string(held_records.size()) + ")";
    out.provenance.command = o.command_line;
    out.share_group = o.train.loss.share_group; // how its θ decide (answering/policy_settings.cpp)
    out.provenance.commit = SPANSCOPE_GIT_COMMIT;
    out.provenance.created = now_iso();
    save_router_params(out, o.out);
    std::fprintf(stderr, "zoom-train: %lld steps (%lld this run) in %.1f s; wrote %s\n",
                 static_cast<long long>(state.step),
                 static_cast<long long>(state.step - start_step),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count(),
                 o.out.c_str());
    return 0;
}

CLI::App* add_zoom_train_command(CLI::App& app, ZoomTrainCliOptions& o) {
    auto* c = app.add_subcommand(
        "zoom-train",
        "Train SEKV's zoom-in (router W and τ per layer and head, rank gates) from recordings "
        "made by zoom-record; resumable; writes the parameter file");
    c->add_option("--model", o.model, "GGUF model the recordings were made with");
    c->add_option("--records", o.records,
                  "Directory of recordings (*.zoom-record.gguf); DIR/held-out/ is evaluated")
        ->required();
    c->add_option("--held-out", o.held_out, "Held-out recordings (default: RECORDS/held-out)");
    c->add_option("--out", o.out, "Parameter file to write")->required();
    c->add_option("--checkpoint", o.checkpoint, "Checkpoint (default: OUT.ckpt); resumed from");
    c->add_option("--curves", o.curves,
                  "Write the loss curves as JSON lines to this file (a resumed run keeps "
                  "the lines up to its checkpoint)");
    c->add_option("--steps", o.train.steps, "Optimiser steps")
        ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
        ->capture_default_str();
    c->add_option("--batch", o.train.batch, "Examples per step")
        ->check(CLI::Range(int64_t{1}, int64_t{1000000}))
        ->capture_default_str();
    c->add_option("--lr", o.train.lr, "Peak learning rate")
        ->check(finite_number())
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    c->add_option("--warmup", o.train.warmup, "Warm-up steps")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--weight-decay", o.train.weight_decay, "AdamW weight decay (matrices)")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--clip", o.train.clip, "Gradient-norm clip (0: none)")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--seed", o.train.seed, "Seed (initial parameters, minibatches)")
        ->capture_default_str();
    c->add_option("--eval-every", o.train.eval_every, "Steps between held-out evaluations")
        ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
        ->capture_default_str();
    c->add_option("--checkpoint-every", o.train.checkpoint_every, "Steps between checkpoints")
        ->check(CLI::Range(int64_t{1}, int64_t{10000000}))
        ->capture_default_str();
    c->add_option("--d-out", o.d_out, "Router projection width d′")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--sketch-dim", o.sketch_dim,
                  "Give the router a key sketch of this many dimensions: each span keeps, in the "
                  "fast tier, its keys' mean and covariance within a basis of the query space "
                  "fitted on the training recordings' queries, and the relevance gains their "
                  "second-order term (docs/sekv.md, \"What did not work\"); 0: none. "
                  "With --compare, the file's own basis is used")
        ->check(CLI::Range(0, 64))
        ->capture_default_str();
    c->add_option("--hidden", o.hidden, "Rank-gate hidden units")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    c->add_option("--max-rank", o.max_rank, "Components a span keeps at most (r_max)")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    c->add_option("--expand-rate", o.train.init_expand_rate, "Share of spans the initial θ expands")
        ->check(finite_number())
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    c->add_option("--gate-bias", o.train.init_gate_bias,
                  "The rank gates' starting output bias b2 (m ≈ σ(b2)): 0 leaves them undecided "
                  "(about half of each span's components kept), 1 keeps every component on the "
                  "recorded data, as the training-free gate does")
        ->check(finite_number())
        ->capture_default_str();
    c->add_option("--temperature", o.train.loss.temperature, "Straight-through temperature T")
        ->check(finite_number())
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    c->add_option("--coverage", o.train.loss.coverage, "Teacher mass the zoom labels cover")
        ->check(finite_number())
        ->check(CLI::Range(0.01, 1.0))
        ->capture_default_str();
    c->add_option("--pos-weight", o.train.loss.pos_weight, "Weight of positive zoom labels")
        ->check(finite_number())
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    c->add_option("--w-zoom", o.train.loss.w_zoom, "Weight of the zoom cross-entropy")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--w-distill", o.train.loss.w_distill, "Weight of the output distillation")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--w-recon", o.train.loss.w_recon, "Weight of the reconstruction error")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--w-budget", o.train.loss.w_budget, "Weight of the budget penalty")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--w-ranking", o.train.loss.w_ranking,
                  "Weight of the ranking loss (the spans' order within each query)")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_flag("--share-group", o.train.loss.share_group,
                "Train with the KV group's union, as inference decides: a span any query head "
                "of a group asks for is expanded for every head of it (distillation and budget "
                "see the union)");
    c->add_option("--rank-weight", o.train.loss.rank_weight,
                  "Weight of the kept rank inside the budget penalty (the expansions' is 1)")
        ->check(finite_number())
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    c->add_option("--threads", o.threads, "Worker threads (default: all cores)")
        ->check(CLI::Range(1, 1024));
    c->add_flag("--quiet", o.quiet, "Print only the held-out evaluations");
    c->add_flag("--compare", o.compare,
                "Do not train: compare the parameter file OUT with the training-free router on "
                "the held-out recordings (distillation, expansions, label recall); the "
                "training-free router's rate per head is --expand-rate");
    c->add_option("--compare-rates", o.compare_rates,
                  "With --compare: also both routers at these shares of spans expanded per head "
                  "(τ calibrated on the held-out examples, full-rank factors), each head alone and "
                  "with the KV group's union, e.g. 0.1,0.2")
        ->delimiter(',')
        ->check(finite_number())
        ->check(CLI::Range(0.0, 1.0))
        ->needs("--compare");
    return c;
}

} // namespace spanscope::cli
