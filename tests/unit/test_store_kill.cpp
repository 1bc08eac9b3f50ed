// Crash safety of the project's other writers (docs/faults.md, "Kills"): the
// commands that change a project besides ingest are killed with SIGKILL at moments spread over
// their run — `ask --project` (which saves SEKV states, the question, the answer with its zoom
// trace and sources), `project vacuum` and the eviction of `project set-cache-limit`. After
// every kill the project opens and passes PRAGMA integrity_check, nothing committed before the
// command is lost, and every stored state is byte-identical to the one an uninterrupted run
// stores; the same command run again completes and leaves exactly what an uninterrupted run
// leaves.
//
// Each test makes 8 kills (SPANSCOPE_KILLS=N: N each): half spread over the command's run, half
// drawn between the latest moment a kill found its write not yet done and the earliest it found
// it done, so that they close in on that write. The draws are fixed by the seed
// (SPANSCOPE_KILL_SEED=N); the moments also depend on the machine's speed.
#include "kill_support.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace spanscope::test;

namespace {

using Clock = std::chrono::steady_clock;

class StoreKill : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        model_ = dir_ + "/tiny.gguf";
        err_ = dir_ + "/stderr.txt";
        write_tiny_gemma3(model_, slower_tiny_gemma3());
        seed_ = 20261207;
        if (const char* s = std::getenv("SPANSCOPE_KILL_SEED"); s && *s)
            seed_ = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
        std::printf("[ kill seed ] %u (SPANSCOPE_KILL_SEED=%u reproduces the moments)\n", seed_,
                    seed_);
    }
    void TearDown() override {
        if (!HasFailure())
            std::filesystem::remove_all(dir_);
    }

    /// A text document of about `bytes` bytes (one byte ~ one token of the tiny model).
    std::string write_doc(const std::string& name, uint32_t seed, size_t bytes) {
        const std::string path = dir_ + "/" + name;
        std::ofstream(path, std::ios::binary) << sample_prose(seed, bytes);
        return path;
    }

    /// Run spanscope-cli to its end; fails the test unless it exits 0.
    void run_ok(const std::vector<std::string>& args) {
        const int st = wait_status(spawn_program(SPANSCOPE_CLI, args, err_));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << args[0] << " failed:\n"
                                                           << read_file(err_);
    }

    /// Run `command(ref)` uninterrupted on a fresh copy of `base` at `ref` three times (the last
    /// is the reference); the shortest time in seconds. Kills drawn from it land inside the
    /// command even when one run was slowed (cold caches, a busy machine).
    double
    reference_run(const std::string& base, const std::string& ref,
                  const std::function<std::vector<std::string>(const std::string&)>& command) {
        double best = 1e9;
        for (int run = 0; run < 3; ++run) {
            copy_project(base, ref);
            const auto t0 = Clock::now();
            run_ok(command(ref));
            best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        }
        return best;
    }

    std::vector<std::string> ingest(const std::string& project,
                                    const std::vector<std::string>& docs) {
        std::vector<std::string> a{"ingest",    "--project", project,          "--model", model_,
                                   "--threads", "1",         "--chunk-tokens", "32"};
        a.insert(a.end(), docs.begin(), docs.end());
        return a;
    }

    /// Kill `args` (run on a fresh copy of `base` at `copy`) after `seconds`; true when the
    /// kill interrupted it.
    bool killed_run(const std::string& base, const std::string& copy,
                    const std::vector<std::string>& args, double seconds) {
        copy_project(base, copy);
        int st = 0;
        const bool interrupted = kill_after(spawn_program(SPANSCOPE_CLI, args, err_), seconds, &st);
        if (!interrupted) {
            EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
                << args[0] << " " << args[1] << " failed:\n"
                << read_file(err_);
        }
        return interrupted;
    }

    /// The moment of kill i of n: spread over (0, span) one per slice, at a random point of it.
    double moment(int i, int n, double span) { return (i + within_(rng_)) / n * span; }

    std::string dir_, model_, err_;
    uint32_t seed_ = 0;
    std::mt19937 rng_{0};
    std::uniform_real_distribution<double> within_{0.0, 1.0};
};

/// Where a command's last write happens, narrowed kill by kill: `lo` the latest moment a kill
/// found the write not yet done, `hi` the earliest it found it done. Drawing kills between them
/// concentrates them on the write (the moments shift with the machine's load, so the bracket is
/// widened again when it closes).
struct Bracket {
    double lo = 0, hi = 0;
    double next(std::mt19937& rng) {
        if (hi - lo < 1e-4)
            lo = std::max(0.0, hi - 0.2 * hi), hi = hi + 0.1 * hi;
        return std::uniform_real_distribution<double>(lo, hi)(rng);
    }
    void observe(double at, bool done) {
        if (done)
            hi = std::min(hi, at);
        else
            lo = std::max(lo, at);
    }
};

void expect_same_states(const Snapshot& got, const Snapshot& want, const std::string& where) {
    ASSERT_EQ(got.states.size(), want.states.size()) << where << ": chunk states";
    for (size_t i = 0; i < got.states.size(); ++i) {
        EXPECT_EQ(describe(got.states[i]), describe(want.states[i])) << where;
        EXPECT_TRUE(got.states[i].blob == want.states[i].blob)
            << where << ": " << describe(got.states[i]) << " differs";
    }
}

std::string sekv_key(const SekvRow& r) {
    return std::to_string(r.document) + "/" + std::to_string(r.unit) + "/" +
           std::to_string(r.ordinal) + "/" + r.key;
}

/// Every SEKV state of `got` is byte-identical to `want`'s of the same chunk and options.
void expect_sekv_subset(const Snapshot& got, const Snapshot& want, const std::string& where) {
    std::map<std::string, const SekvRow*> ref;
    for (const auto& r : want.sekv)
        ref[sekv_key(r)] = &r;
    for (const auto& r : got.sekv) {
        const auto it = ref.find(sekv_key(r));
        ASSERT_NE(it, ref.end()) << where << ": SEKV state " << sekv_key(r) << " not in reference";
        EXPECT_TRUE(it->second->data == r.data)
            << where << ": SEKV state " << sekv_key(r) << " differs from the uninterrupted run's";
    }
}

void expect_same_message(const MessageRow& got, const MessageRow& want, const std::string& where) {
    EXPECT_EQ(got.role, want.role) << where;
    EXPECT_EQ(got.text, want.text) << where;
    EXPECT_TRUE(got.zoom_trace == want.zoom_trace)
        << where << ": zoom trace of " << got.zoom_trace.size() << " bytes, the reference's "
        << want.zoom_trace.size();
    EXPECT_EQ(got.sources, want.sources) << where;
}

/// (document, unit) of every unit with at least one chunk state.
std::set<std::pair<int64_t, int64_t>> units_with_states(const Snapshot& s) {
    std::set<std::pair<int64_t, int64_t>> out;
    for (const auto& r : s.states)
        out.insert({r.document, r.unit});
    return out;
}

} // namespace

TEST_F(StoreKill, KillsWhileAnAnswerIsSavedLoseNothing) {
    const std::string base = dir_ + "/base.spanscope";
    run_ok(ingest(base, {write_doc("notes.txt", 7, 1200)}));
    const Snapshot before = snapshot(base);
    ASSERT_EQ(before.integrity, "ok");
    const auto ask = [&](const std::string& project) {
        return std::vector<std::string>{
            "ask",  "--project", project, "--model",
            model_, "--threads", "1",     "--max-tokens",
            "24",   "--seed",    "3",     "What does the text say about the river?"};
    };
    // The reference: an uninterrupted ask on a copy, and how long it takes.
    const std::string ref_path = dir_ + "/reference.spanscope";
    const double T = reference_run(base, ref_path, ask);
    const Snapshot ref = snapshot(ref_path);
    ASSERT_EQ(ref.integrity, "ok");
    ASSERT_EQ(ref.messages.size(), 2u) << "the question and the answer";
    const MessageRow& question = ref.messages[0];
    const MessageRow& answer = ref.messages[1];
    ASSERT_EQ(answer.role, "assistant");
    ASSERT_FALSE(answer.zoom_trace.empty()) << "the default policy (sekv) saves a zoom trace";
    ASSERT_FALSE(answer.sources.empty());
    ASSERT_FALSE(ref.sekv.empty()) << "the ask stores the unit's SEKV state";
    expect_same_states(ref, before, "reference");
    std::printf("[ reference ] ask took %.0f ms; %zu SEKV states, %zu source rows\n", T * 1000,
                ref.sekv.size(), answer.sources.size());

    // Half the kills spread over the whole ask, half on the moment its answer is saved.
    rng_.seed(seed_);
    Bracket save{0.5 * T, 1.3 * T};
    const int n = kills_wanted(8);
    int interrupted = 0, nothing = 0, question_only = 0, answered = 0;
    for (int i = 0; i < n; ++i) {
        const double at = i % 2 == 0 ? moment(i / 2, (n + 1) / 2, 1.2 * T) : save.next(rng_);
        const std::string k = dir_ + "/killed.spanscope";
        const std::string where = "kill " + std::to_string(i) + " after " +
                                  std::to_string(static_cast<int>(at * 1000)) + " ms";
        const bool hit = killed_run(base, k, ask(k), at);
        interrupted += hit ? 1 : 0;
        const Snapshot s = snapshot(k);
        ASSERT_EQ(s.integrity, "ok") << where;
        expect_same_states(s, before, where);
        expect_sekv_subset(s, ref, where);
        ASSERT_LE(s.messages.size(), 2u) << where;
        if (s.messages.size() >= 1)
            expect_same_message(s.messages[0], question, where);
        if (s.messages.size() == 2)
            expect_same_message(s.messages[1], answer, where);
        save.observe(at, s.messages.size() == 2);
        const char* outcome[] = {"nothing saved", "the question saved", "the answer saved"};
        (s.messages.empty() ? nothing : s.messages.size() == 1 ? question_only : answered) += 1;
        // The same ask again completes and answers as the uninterrupted one did.
        run_ok(ask(k));
        const Snapshot r = snapshot(k);
        ASSERT_EQ(r.integrity, "ok") << where << ", asked again";
        expect_same_states(r, before, where + ", asked again");
        expect_sekv_subset(r, ref, where + ", asked again");
        expect_sekv_subset(ref, r, where + ", asked again");
        ASSERT_GE(r.messages.size(), 2u) << where;
        expect_same_message(r.messages.back(), answer, where + ", asked again");
        std::printf("[ kill %2d ] %5.0f ms: %s, %s; asked again: %s\n", i, at * 1000,
                    hit ? "interrupted" : "had ended", outcome[s.messages.size()],
                    HasFailure() ? "DIFFERS" : "same answer and states");
        if (HasFailure())
            return;
    }
    std::printf("[ summary   ] %d kills, %d interrupted an ask: %d left nothing, %d the question, "
                "%d the whole answer; 0 lost or differing states\n",
                n, interrupted, nothing, question_only, answered);
    EXPECT_GT(interrupted, 0);
}

TEST_F(StoreKill, KillsDuringVacuumLoseNothing) {
    // Two documents, the first removed: the vacuum has pages to give back.
    const std::string base = dir_ + "/base.spanscope";
    run_ok(ingest(base, {write_doc("a.txt", 5, 1500), write_doc("b.txt", 6, 900)}));
    run_ok({"project", "remove-doc", "--project", base, "1"});
    const Snapshot before = snapshot(base);
    ASSERT_EQ(before.integrity, "ok");
    ASSERT_EQ(before.documents, 1);
    const auto vacuum = [](const std::string& project) {
        return std::vector<std::string>{"project", "vacuum", "--project", project};
    };
    const std::string ref_path = dir_ + "/reference.spanscope";
    const double T = reference_run(base, ref_path, vacuum);
    const auto ref_size = std::filesystem::file_size(ref_path);
    ASSERT_LT(ref_size, std::filesystem::file_size(base)) << "the vacuum gave nothing back";
    expect_same_states(snapshot(ref_path), before, "reference");
    std::printf("[ reference ] vacuum took %.0f ms: %ju -> %ju bytes\n", T * 1000,
                static_cast<uintmax_t>(std::filesystem::file_size(base)),
                static_cast<uintmax_t>(ref_size));

    // Half the kills spread over the whole command, half on the moment the vacuum commits.
    rng_.seed(seed_ + 1);
    Bracket commit{0.0, 1.3 * T};
    const int n = kills_wanted(8);
    int interrupted = 0, mid_vacuum = 0;
    for (int i = 0; i < n; ++i) {
        const double at = i % 2 == 0 ? moment(i / 2, (n + 1) / 2, 1.2 * T) : commit.next(rng_);
        const std::string k = dir_ + "/killed.spanscope";
        const std::string where = "kill " + std::to_string(i) + " after " +
                                  std::to_string(static_cast<int>(at * 1000)) + " ms";
        const bool hit = killed_run(base, k, vacuum(k), at);
        interrupted += hit ? 1 : 0;
        // A write-ahead log with frames (more than its 32-byte header) left behind: the kill
        // came while the vacuum was writing.
        const int64_t wal = wal_bytes(k);
        mid_vacuum += hit && wal > 32 ? 1 : 0;
        const Snapshot s = snapshot(k);
        ASSERT_EQ(s.integrity, "ok") << where;
        EXPECT_EQ(s.documents, before.documents) << where;
        EXPECT_EQ(s.chunks, before.chunks) << where;
        expect_same_states(s, before, where);
        commit.observe(at, std::filesystem::file_size(k) == ref_size);
        run_ok(vacuum(k));
        const Snapshot r = snapshot(k);
        ASSERT_EQ(r.integrity, "ok") << where << ", vacuumed again";
        expect_same_states(r, before, where + ", vacuumed again");
        EXPECT_EQ(std::filesystem::file_size(k), ref_size) << where << ", vacuumed again";
        std::printf("[ kill %2d ] %5.1f ms: %s, write-ahead log %lld bytes; vacuumed again: %s\n",
                    i, at * 1000, hit ? "interrupted" : "had ended", static_cast<long long>(wal),
                    HasFailure() ? "DIFFERS" : "same states and size");
        if (HasFailure())
            return;
    }
    std::printf("[ summary   ] %d kills, %d interrupted a vacuum (%d while it was writing); 0 lost "
                "or differing states\n",
                n, interrupted, mid_vacuum);
    EXPECT_GT(interrupted, 0);
}

TEST_F(StoreKill, KillsDuringEvictionLoseNothing) {
    // Twelve one-unit documents; a cache limit of a quarter of their states evicts most units,
    // one transaction each, least recently used first.
    const std::string base = dir_ + "/base.spanscope";
    std::vector<std::string> docs;
    for (int d = 0; d < 12; ++d)
        docs.push_back(write_doc(std::to_string(d) + ".txt", 20 + d, 300));
    run_ok(ingest(base, docs));
    const Snapshot before = snapshot(base);
    ASSERT_EQ(before.integrity, "ok");
    int64_t total = 0;
    for (const auto& r : before.states)
        total += static_cast<int64_t>(r.blob.size());
    const auto limit = [&](const std::string& project) {
        return std::vector<std::string>{"project", "set-cache-limit", "--project", project,
                                        std::to_string(total / 4)};
    };
    const std::string ref_path = dir_ + "/reference.spanscope";
    const double T = reference_run(base, ref_path, limit);
    const Snapshot ref = snapshot(ref_path);
    ASSERT_EQ(ref.integrity, "ok");
    const auto ref_units = units_with_states(ref);
    const auto all_units = units_with_states(before);
    ASSERT_GE(all_units.size() - ref_units.size(), 6u) << "the limit should evict most units";
    const auto evicted_events = [](const Snapshot& s) {
        std::set<std::string> out;
        for (const auto& e : s.events)
            if (e.rfind("evicted: ", 0) == 0)
                out.insert(e.substr(9, e.find(':', 9) - 9)); // "document D unit U"
        return out;
    };
    ASSERT_EQ(evicted_events(ref).size(), all_units.size() - ref_units.size());
    std::printf("[ reference ] eviction took %.0f ms: %zu of %zu units evicted\n", T * 1000,
                all_units.size() - ref_units.size(), all_units.size());

    // Half the kills spread over the whole command, half on the evictions.
    rng_.seed(seed_ + 2);
    Bracket evictions{0.0, 1.3 * T};
    const int n = kills_wanted(8);
    int interrupted = 0, partial = 0;
    for (int i = 0; i < n; ++i) {
        const double at = i % 2 == 0 ? moment(i / 2, (n + 1) / 2, 1.2 * T) : evictions.next(rng_);
        const std::string k = dir_ + "/killed.spanscope";
        const std::string where = "kill " + std::to_string(i) + " after " +
                                  std::to_string(static_cast<int>(at * 1000)) + " ms";
        const bool hit = killed_run(base, k, limit(k), at);
        interrupted += hit ? 1 : 0;
        const Snapshot s = snapshot(k);
        ASSERT_EQ(s.integrity, "ok") << where;
        // What is left is byte-identical to what was there, whole units at a time; every unit
        // gone is in the event log.
        std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, const StateRow*> was;
        for (const auto& r : before.states)
            was[{r.document, r.unit, r.ordinal, r.kind}] = &r;
        for (const auto& r : s.states) {
            const auto it = was.find({r.document, r.unit, r.ordinal, r.kind});
            ASSERT_NE(it, was.end()) << where << ": " << describe(r) << " is new";
            EXPECT_TRUE(it->second->blob == r.blob) << where << ": " << describe(r) << " differs";
        }
        const auto left = units_with_states(s);
        size_t rows_left = 0;
        for (const auto& r : before.states)
            rows_left += left.count({r.document, r.unit}) ? 1 : 0;
        EXPECT_EQ(s.states.size(), rows_left) << where << ": a unit was evicted in part";
        const auto events = evicted_events(s);
        for (const auto& u : all_units) {
            const std::string name =
                "document " + std::to_string(u.first) + " unit " + std::to_string(u.second);
            EXPECT_EQ(left.count(u) == 0, events.count(name) == 1)
                << where << ": " << name << (left.count(u) ? " kept" : " evicted") << " but "
                << (events.count(name) ? "an eviction is logged" : "no eviction is logged");
        }
        for (const auto& u : ref_units)
            EXPECT_TRUE(left.count(u)) << where << ": evicted a unit the limit keeps";
        partial += left.size() != all_units.size() && left.size() != ref_units.size() ? 1 : 0;
        if (left.size() == ref_units.size())
            evictions.observe(at, true);
        else if (left.size() == all_units.size())
            evictions.observe(at, false);
        run_ok(limit(k));
        const Snapshot r = snapshot(k);
        ASSERT_EQ(r.integrity, "ok") << where << ", limited again";
        expect_same_states(r, ref, where + ", limited again");
        EXPECT_EQ(evicted_events(r), evicted_events(ref)) << where << ", limited again";
        std::printf("[ kill %2d ] %5.1f ms: %s, %2zu of %zu units left; limited again: %s\n", i,
                    at * 1000, hit ? "interrupted" : "had ended", left.size(), all_units.size(),
                    HasFailure() ? "DIFFERS" : "same states and events");
        if (HasFailure())
            return;
    }
    std::printf("[ summary   ] %d kills, %d interrupted a set-cache-limit (%d in the middle of its "
                "evictions); 0 lost or differing states\n",
                n, interrupted, partial);
    EXPECT_GT(interrupted, 0);
}
