// spanscope-cli's project commands as a user meets them (ingest, ask --project, project ...),
// with tiny models written by the test: what ingest prints, reuse counted by the engine and
// equal to a cold answer, refusals that change nothing, Ctrl-C and resume, a damaged project
// file left as it was, a document answered from its stored text, and cache maintenance.
#include "answering/answer_sources.h"
#include "engine/model/model.h"
#include "engine/text/chunking.h"
#include "engine/text/prompt.h"
#include "kill_support.h"
#include "storage/sqlite_db.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace spanscope::test;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

struct CliRun {
    int status = -1; ///< exit code, or 128 + signal
    std::string out, err;
};

int exit_code(int st) {
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return -1;
}

struct StateRow {
    int64_t unit = 0, ordinal = 0, kind = 0;
    std::vector<uint8_t> blob;
    bool operator==(const StateRow& o) const {
        return std::tie(unit, ordinal, kind, blob) == std::tie(o.unit, o.ordinal, o.kind, o.blob);
    }
};

/// Every chunk state of a project, ordered by unit, chunk, kind.
std::vector<StateRow> states_of(const std::string& project) {
    spanscope::Db db(project, /*create=*/false);
    std::vector<StateRow> out;
    auto q = db.prepare("SELECT c.unit, c.ordinal, s.kind, s.blob FROM chunk_state_blobs s JOIN "
                        "chunks c ON c.id = s.chunk_id ORDER BY c.unit, c.ordinal, s.kind");
    while (q.step())
        out.push_back({q.int64(0), q.int64(1), q.int64(2), q.blob(3)});
    return out;
}

int64_t sql_count(const std::string& project, const std::string& sql, int64_t arg = -1) {
    spanscope::Db db(project, /*create=*/false);
    auto q = db.prepare(sql);
    if (arg >= 0)
        q.bind(1, arg);
    q.step();
    return q.int64(0);
}

class CliProject : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        model_ = dir_ + "/tiny.gguf";
        TinyGemma3Config c;
        c.n_ctx = 2048;
        c.sliding_window = 16;
        write_tiny_gemma3(model_, c);
        project_ = dir_ + "/p.spanscope";
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string write_file(const std::string& name, const std::string& bytes) {
        const std::string p = dir_ + "/" + name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }

    /// A model slow enough that an ingest of a few thousand tokens takes a measurable time.
    std::string slow_model() {
        const std::string p = dir_ + "/slower.gguf";
        write_tiny_gemma3(p, slower_tiny_gemma3());
        return p;
    }

    /// Start the CLI in an isolated environment (no installed model found by accident);
    /// stdout and stderr go to files read by finish().
    pid_t start(const std::vector<std::string>& args) {
        auto env =
            environment_without({"SPANSCOPE_MODEL", "HOME", "XDG_DATA_HOME", "XDG_DATA_DIRS"});
        env.push_back("HOME=" + dir_);
        env.push_back("XDG_DATA_HOME=" + dir_ + "/xdg");
        env.push_back("XDG_DATA_DIRS=" + dir_ + "/none");
        const ExecStrings argv(command_line(SPANSCOPE_CLI, args));
        const ExecStrings envp(std::move(env));
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/out").c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/err").c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid = -1;
        const int rc = posix_spawn(&pid, SPANSCOPE_CLI, &fa, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0)
            throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
        return pid;
    }

    CliRun finish(pid_t pid) {
        return {exit_code(wait_status(pid)), read_file(dir_ + "/out"), read_file(dir_ + "/err")};
    }

    CliRun run(const std::vector<std::string>& args) { return finish(start(args)); }

    /// Run a command that must succeed and print one JSON value.
    json run_json(const std::vector<std::string>& args) {
        const auto r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        try {
            return json::parse(r.out);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not JSON (" << e.what() << "): " << r.out << "\nstderr: " << r.err;
            return json();
        }
    }

    std::vector<std::string> ingest(const std::string& project,
                                    const std::vector<std::string>& docs,
                                    const std::string& model = "") {
        std::vector<std::string> a{
            "ingest",    "--project", project, "--model", model.empty() ? model_ : model,
            "--threads", "1"};
        a.insert(a.end(), docs.begin(), docs.end());
        return a;
    }

    json ask(const std::string& project, const std::string& question,
             const std::vector<std::string>& extra = {}) {
        std::vector<std::string> a{"ask",    "--project", project, "--model",      model_,
                                   "--json", "--threads", "1",     "--max-tokens", "8"};
        a.insert(a.end(), extra.begin(), extra.end());
        a.push_back(question);
        return run_json(a);
    }

    json info(const std::string& project) {
        return run_json({"project", "info", "--json", "--project", project});
    }

    json list_docs(const std::string& project) {
        return run_json(
            {"project", "list-docs", "--json", "--model", model_, "--project", project});
    }

    /// What the test expects a document to cost: its units under the project's chunking,
    /// computed here with the engine's tokenizer.
    std::pair<int64_t, int64_t> tokens_and_chunks(const std::string& path, int64_t chunk_tokens) {
        const auto m = spanscope::Model::load(model_);
        spanscope::ChunkingOptions o;
        o.target_tokens = chunk_tokens;
        const int64_t ctx = m->info().n_ctx_train;
        o.max_unit_tokens = ctx - std::min<int64_t>(1024, ctx / 4);
        const auto units = spanscope::build_document_units(
            m->tokenizer(), std::filesystem::path(path).filename().string(), read_file(path), o);
        int64_t tokens = 0, chunks = 0;
        for (const auto& u : units) {
            tokens += u.n_tokens();
            chunks += static_cast<int64_t>(u.chunks.size());
        }
        return {tokens, chunks};
    }

    std::string dir_, model_, project_;
};

} // namespace

TEST_F(CliProject, IngestJsonAndListDocsAgree) {
    const auto a = write_file("alpha.txt", sample_prose(1, 300));
    const auto b = write_file("beta.txt", sample_prose(2, 700));
    auto args = ingest(project_, {a, b});
    args.insert(args.end(), {"--chunk-tokens", "64", "--json"});
    const json j = run_json(args);
    ASSERT_TRUE(j.is_array()) << j;
    ASSERT_EQ(j.size(), 2u) << j;
    EXPECT_EQ(j[0]["path"], a);
    EXPECT_EQ(j[1]["path"], b);
    EXPECT_LT(j[0]["id"].get<int64_t>(), j[1]["id"].get<int64_t>());
    for (size_t i = 0; i < 2; ++i) {
        const auto [tokens, chunks] = tokens_and_chunks(j[i]["path"].get<std::string>(), 64);
        EXPECT_EQ(j[i]["tokens"], tokens) << j[i];
        EXPECT_EQ(j[i]["chunks"], chunks) << j[i];
    }
    EXPECT_GT(j[1]["chunks"].get<int64_t>(), 1) << "beta.txt should need several chunks";

    const json l = list_docs(project_);
    ASSERT_EQ(l.size(), 2u) << l;
    for (size_t i = 0; i < 2; ++i)
        for (const char* k : {"id", "path", "tokens", "chunks"})
            EXPECT_EQ(l[i][k], j[i][k]) << k << " of document " << i;
    // Without a model there are no token counts, but the same documents.
    const json n = run_json({"project", "list-docs", "--json", "--project", project_});
    ASSERT_EQ(n.size(), 2u) << n;
    EXPECT_EQ(n[0]["id"], j[0]["id"]);
    EXPECT_TRUE(n[0]["tokens"].is_null()) << n;
}

TEST_F(CliProject, AskReusesTheStoredDocumentAndAnswersLikeAColdAsk) {
    // One chunk (the default chunk size is 1024 tokens), so the cold run prefills the same
    // token sequence in the same ubatch (tests/README.md, failure mode 5).
    const auto doc = write_file("doc.txt", sample_prose(3, 400));
    ASSERT_EQ(run(ingest(project_, {doc})).status, 0);
    const json docs = list_docs(project_);
    ASSERT_EQ(docs.size(), 1u);
    const int64_t id = docs[0]["id"];
    const int64_t doc_tokens = docs[0]["tokens"];
    ASSERT_GT(doc_tokens, 100);

    const std::string q = "What does the river keep?";
    const json warm = ask(project_, q);
    const auto& s = warm["stats"];
    EXPECT_EQ(s["tokens_reused"], doc_tokens) << warm;
    const int64_t question_tokens =
        static_cast<int64_t>(spanscope::question_tokens(spanscope::Model::load(model_)->tokenizer(),
                                                        spanscope::ChatFormat::Completion, q)
                                 .size());
    EXPECT_EQ(s["tokens_computed"], question_tokens) << warm;
    EXPECT_EQ(s["tokens_computed"].get<int64_t>(),
              s["prompt_tokens"].get<int64_t>() - s["tokens_reused"].get<int64_t>())
        << warm;
    EXPECT_EQ(s["units"], 1) << warm;
    EXPECT_EQ(warm["documents"], json::array({id})) << warm;
    ASSERT_TRUE(warm.contains("chat_id")) << warm;
    ASSERT_TRUE(warm["chat_id"].is_number_integer()) << warm;
    // Its sources: top first, each a range of the document's text with its excerpt, as saved.
    ASSERT_TRUE(warm["sources"].is_array()) << warm;
    ASSERT_FALSE(warm["sources"].empty()) << warm;
    std::string text; // as the project holds it
    {
        spanscope::Db db(project_, /*create=*/false);
        auto t = db.prepare("SELECT text FROM documents WHERE id = ?");
        t.bind(1, id);
        ASSERT_TRUE(t.step());
        text = t.text(0);
    }
    double last_share = 1.0;
    for (const auto& src : warm["sources"]) {
        EXPECT_EQ(src["document_id"], id) << src;
        const int64_t b = src["start_char"], e = src["end_char"];
        ASSERT_TRUE(b >= 0 && b < e && e <= static_cast<int64_t>(text.size())) << src;
        EXPECT_EQ(src["excerpt"], spanscope::source_excerpt(text, b, e)) << src;
        EXPECT_EQ(src["page"], 0) << src;
        EXPECT_LE(src["share"].get<double>(), last_share) << src;
        last_share = src["share"];
    }
    EXPECT_EQ(sql_count(project_,
                        "SELECT count(*) FROM answer_sources WHERE token = -1 AND message_id = "
                        "(SELECT max(id) FROM messages)"),
              static_cast<int64_t>(warm["sources"].size()));

    const json cold = run_json({"ask", "--doc", doc, "--model", model_, "--json", "--threads", "1",
                                "--max-tokens", "8", q});
    EXPECT_EQ(warm["answer"], cold["answer"]);
    EXPECT_EQ(warm["stop_reason"], cold["stop_reason"]);
    EXPECT_EQ(s["generated_tokens"], cold["stats"]["generated_tokens"]);
    EXPECT_EQ(s["prompt_tokens"], cold["stats"]["prompt_tokens"]);

    // The same chat continues.
    const int64_t chat = warm["chat_id"];
    const json again = ask(project_, "And the stone?", {"--chat", std::to_string(chat)});
    EXPECT_EQ(again["chat_id"], chat) << again;
    EXPECT_EQ(sql_count(project_, "SELECT count(*) FROM messages WHERE chat_id = ?", chat), 4);
    EXPECT_EQ(sql_count(project_, "SELECT count(*) FROM chats"), 1);
}

// A chat continued with another model sends none of the first model's turns as history and
// says so once on stderr, naming both models' files.
TEST_F(CliProject, AChatContinuedWithAnotherModelSaysItsHistoryStartsAfresh) {
    const auto doc = write_file("doc.txt", sample_prose(3, 300));
    ASSERT_EQ(run(ingest(project_, {doc})).status, 0);
    const json first = ask(project_, "Where is the stone?");
    ASSERT_FALSE(first["answer"].get<std::string>().empty())
        << "the premise: an answer with text, which a continued chat would send as history";
    const int64_t chat = first["chat_id"];
    const std::string second = dir_ + "/second.gguf";
    TinyGemma3Config c;
    c.n_ctx = 2048;
    c.sliding_window = 16;
    c.seed = 2;
    write_tiny_gemma3(second, c);
    const auto r =
        run({"ask", "--project", project_, "--model", second, "--threads", "1", "--max-tokens", "4",
             "--json", "--chat", std::to_string(chat), "And the river?"});
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string note = "note: chat " + std::to_string(chat) +
                             " was answered by tiny.gguf; with second.gguf its history starts "
                             "afresh (the earlier turns are not sent)";
    const auto at = r.err.find(note);
    EXPECT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(note, at + 1), std::string::npos) << "said once: " << r.err;
    // Asked again with the second model, the chat's history is its own: no note.
    ASSERT_FALSE(json::parse(r.out)["answer"].get<std::string>().empty())
        << "the premise: the second model's answer has text, so it starts the history";
    const auto again = run({"ask", "--project", project_, "--model", second, "--threads", "1",
                            "--max-tokens", "4", "--chat", std::to_string(chat), "And then?"});
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(again.err.find("its history starts afresh"), std::string::npos) << again.err;
}

// LinearKV selectors over stored documents: epic recomputes the first tokens of every
// document after the first, full all of them; the statistics count them per layer kind and
// the answers still come (cacheblend needs rows the store does not keep: not offered).
TEST_F(CliProject, SelectorsRecomputeTokensOfLaterDocuments) {
    const auto a = write_file("alpha.txt", sample_prose(5, 300));
    const auto b = write_file("beta.txt", sample_prose(6, 300));
    ASSERT_EQ(run(ingest(project_, {a, b})).status, 0);
    const json docs = list_docs(project_);
    ASSERT_EQ(docs.size(), 2u);
    const int64_t first = docs[0]["tokens"], second = docs[1]["tokens"];
    const int64_t total = first + second;
    const std::string q = "What does the river keep?";
    const json none = ask(project_, q);
    EXPECT_EQ(none["stats"]["tokens_reused"], total) << none;
    EXPECT_FALSE(none["stats"].contains("selector")) << none;

    const json epic = ask(project_, q, {"--selector", "epic", "--recompute", "0.1"});
    const auto& s = epic["stats"];
    const auto k = static_cast<int64_t>(std::ceil(0.1 * static_cast<double>(total)));
    EXPECT_EQ(s["selector"], "epic") << epic;
    EXPECT_EQ(s["recompute_set"], std::min(k, second)) << epic;
    EXPECT_EQ(s["tokens_reused"], total - s["recompute_set"].get<int64_t>()) << epic;
    EXPECT_EQ(s["layer_rows"]["global"]["rows_recomputed"].get<int64_t>(),
              s["layer_rows"]["global"]["layers"].get<int64_t>() *
                  s["recompute_set"].get<int64_t>())
        << epic;
    EXPECT_FALSE(epic["answer"].get<std::string>().empty()) << epic;

    const json full = ask(project_, q, {"--selector", "full"});
    EXPECT_EQ(full["stats"]["recompute_set"], total) << full;
    EXPECT_EQ(full["stats"]["tokens_reused"], 0) << full;

    const int64_t chats = sql_count(project_, "SELECT count(*) FROM chats");
    const auto blend =
        run({"ask", "--project", project_, "--model", model_, "--selector", "cacheblend", q});
    EXPECT_EQ(blend.status, 2);
    EXPECT_NE(blend.err.find("sliding-window"), std::string::npos) << blend.err;
    const auto sekv = run({"ask", "--project", project_, "--model", model_, "--policy", "sekv",
                           "--selector", "epic", q});
    EXPECT_EQ(sekv.status, 1);
    EXPECT_NE(sekv.err.find("--policy full"), std::string::npos) << sekv.err;
    // --recompute is epic's share: with none (the default) or full it would be ignored, so
    // it is refused.
    for (const std::string selector : {"", "none", "full"}) {
        std::vector<std::string> args{"ask", "--project", project_, "--model", model_};
        if (!selector.empty())
            args.insert(args.end(), {"--selector", selector});
        args.insert(args.end(), {"--recompute", "0.5", q});
        const auto r = run(args);
        EXPECT_EQ(r.status, 2) << selector;
        EXPECT_NE(r.err.find("--recompute needs --selector epic"), std::string::npos) << r.err;
    }
    EXPECT_EQ(sql_count(project_, "SELECT count(*) FROM chats"), chats)
        << "a refused question leaves no chat behind";
}

// project info names each model whose states the project holds and counts its chunks: a
// document read by two models (here one tokenizer, so the same chunks) is listed under both,
// each fingerprint with its own model's name.
TEST_F(CliProject, InfoNamesEachModelAndItsChunks) {
    const auto a = write_file("alpha.txt", sample_prose(1, 300));
    auto args = ingest(project_, {a});
    args.insert(args.end(), {"--chunk-tokens", "64", "--json"});
    const json j = run_json(args);
    ASSERT_EQ(j.size(), 1u) << j;
    const int64_t chunks = j[0]["chunks"].get<int64_t>();
    const std::string second = dir_ + "/second.gguf";
    TinyGemma3Config c;
    c.n_ctx = 2048;
    c.sliding_window = 16;
    c.seed = 2;
    c.name = "second tiny test model";
    write_tiny_gemma3(second, c);
    auto again = ingest(project_, {a}, second);
    again.insert(again.end(), {"--chunk-tokens", "64"});
    ASSERT_EQ(run(again).status, 0);
    const json i = info(project_);
    ASSERT_EQ(i["models"].size(), 2u) << i;
    // Listed in the order their states were stored: the first model's, then the second's.
    const std::string names[2] = {spanscope::Model::load(model_)->info().name,
                                  spanscope::Model::load(second)->info().name};
    ASSERT_NE(names[0], names[1]);
    for (size_t k = 0; k < 2; ++k) {
        const auto& m = i["models"][k];
        EXPECT_EQ(m["name"], names[k]) << m;
        EXPECT_EQ(m["chunks"], chunks) << m;
        EXPECT_EQ(m["tokens"], j[0]["tokens"]) << m;
    }
    EXPECT_NE(i["models"][0]["fingerprint"], i["models"][1]["fingerprint"]) << i;
    const auto text = run({"project", "info", "--project", project_});
    ASSERT_EQ(text.status, 0) << text.err;
    for (const auto& name : names)
        EXPECT_NE(text.out.find("model " + name + " (fingerprint "), std::string::npos) << text.out;
    for (const auto& m : i["models"])
        EXPECT_NE(text.out.find(m["chunks"].dump() + " chunks, " + m["states"].dump() + " states"),
                  std::string::npos)
            << text.out;
    // A model of another vocabulary has read nothing: '-', and a note that says so.
    const std::string llama = data_dir() + "/reference/fixtures/tiny_llama3.gguf";
    const auto l = run({"project", "list-docs", "--project", project_, "--model", llama});
    ASSERT_EQ(l.status, 0) << l.err;
    EXPECT_NE(l.out.find("\t- tokens\t- chunks\t-\t"), std::string::npos) << l.out;
    EXPECT_NE(l.err.find("note: '-': not read by " + spanscope::Model::load(llama)->info().name),
              std::string::npos)
        << l.err;
    const auto read = run({"project", "list-docs", "--project", project_, "--model", second});
    EXPECT_EQ(read.err.find("not read by"), std::string::npos) << read.err;
    // Either way the counts name the model they are of.
    for (const auto& [r, file] : {std::pair{l, llama}, std::pair{read, second}}) {
        const auto m = spanscope::Model::load(file);
        const std::string name = m->info().name.empty()
                                     ? std::filesystem::path(m->path()).filename().string()
                                     : m->info().name;
        EXPECT_NE(r.err.find("token and chunk counts of " + name + " (" + m->path() + "): "),
                  std::string::npos)
            << r.err;
    }
}

TEST_F(CliProject, UnknownDocIdIsRefusedAndAddsNothing) {
    const auto doc = write_file("doc.txt", sample_prose(4, 200));
    ASSERT_EQ(run(ingest(project_, {doc})).status, 0);
    const json before = info(project_);
    const auto r = run(
        {"ask", "--project", project_, "--model", model_, "--json", "--doc-id", "999", "What?"});
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("no document 999"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(project_), std::string::npos) << r.err;
    const json after = info(project_);
    for (const char* k : {"documents", "chunks", "chats", "messages", "states"})
        EXPECT_EQ(after[k], before[k]) << k;
    EXPECT_EQ(after["chats"], 0);
}

TEST_F(CliProject, OneBadFileNeverBlocksTheOthers) {
    const auto empty = write_file("empty.txt", "");
    const auto good = write_file("good.txt", sample_prose(5, 300));
    const auto r = run(ingest(project_, {empty, good}));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find(empty), std::string::npos) << r.err;
    const json l = list_docs(project_);
    ASSERT_EQ(l.size(), 1u) << l;
    EXPECT_EQ(l[0]["path"], good);
    EXPECT_EQ(l[0]["tokens"], tokens_and_chunks(good, 1024).first);
    EXPECT_GT(info(project_)["states"].get<int64_t>(), 0);
}

TEST_F(CliProject, AnIngestThatAddsNothingCreatesNoProject) {
    const auto empty = write_file("empty.txt", "");
    const auto r = run(ingest(project_, {empty, dir_ + "/missing.txt"}));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("was not created"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(project_)) << project_;
    EXPECT_FALSE(std::filesystem::exists(project_ + "-wal"));
    // A project that was there before stays, whatever its files.
    const auto good = write_file("good.txt", sample_prose(5, 300));
    ASSERT_EQ(run(ingest(project_, {good})).status, 0);
    EXPECT_EQ(run(ingest(project_, {empty})).status, 1);
    ASSERT_TRUE(std::filesystem::exists(project_));
    EXPECT_EQ(list_docs(project_).size(), 1u);
}

TEST_F(CliProject, SigintStopsIngestAndTheSameCommandResumes) {
    const auto slow = slow_model();
    const auto doc = write_file("long.txt", sample_prose(6, 2200));
    auto cmd = [&](const std::string& project) {
        auto a = ingest(project, {doc}, slow);
        a.insert(a.end(), {"--chunk-tokens", "32"});
        return a;
    };
    const std::string reference = dir_ + "/reference.spanscope";
    const auto t0 = Clock::now();
    ASSERT_EQ(run(cmd(reference)).status, 0);
    const double T = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto ref_states = states_of(reference);
    const int64_t n_chunks = sql_count(reference, "SELECT count(*) FROM chunks");
    ASSERT_GE(n_chunks, 40);

    // Interrupt once the progress lines show two committed chunks.
    const pid_t pid = start(cmd(project_));
    const auto deadline = Clock::now() + std::chrono::duration<double>(10 * T + 10);
    while (read_file(dir_ + "/err").find(": 2 of ") == std::string::npos && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, SIGINT);
    const auto r = finish(pid);
    EXPECT_EQ(r.status, 130) << r.err;
    EXPECT_NE(r.err.find("interrupted"), std::string::npos) << r.err;
    const int64_t kept = sql_count(project_, "SELECT count(*) FROM chunk_states WHERE kind = 1");
    EXPECT_GE(kept, 2);
    EXPECT_LT(kept, n_chunks) << "the ingest ended before the interrupt (took " << T << " s)";

    const auto resumed = run(cmd(project_));
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(resumed.err, m, std::regex("([0-9]+) chunks? already stored")))
        << resumed.err;
    EXPECT_EQ(std::stoll(m[1]), kept) << resumed.err;
    EXPECT_EQ(info(project_)["states"], info(reference)["states"]);
    EXPECT_TRUE(states_of(project_) == ref_states)
        << "the resumed ingest stored other chunk states than an uninterrupted one";

    const auto answer = [&](const std::string& p) {
        return run_json({"ask", "--project", p, "--model", slow, "--json", "--threads", "1",
                         "--max-tokens", "6", "What holds the lantern?"});
    };
    const json x = answer(project_), y = answer(reference);
    EXPECT_EQ(x["answer"], y["answer"]);
    EXPECT_EQ(x["stats"]["tokens_reused"], y["stats"]["tokens_reused"]);
    EXPECT_EQ(x["stats"]["units_recomputed"], 0);
}

TEST_F(CliProject, DamagedProjectFilesAreRefusedAndLeftUnchanged) {
    const auto doc = write_file("doc.txt", sample_prose(7, 300));
    ASSERT_EQ(run(ingest(project_, {doc})).status, 0);
    const std::string whole = read_file(project_);
    ASSERT_GT(whole.size(), 8192u);
    const std::string empty = write_file("empty.spanscope", "");
    const std::string half = write_file("half.spanscope", whole.substr(0, whole.size() / 2));
    for (const auto& f : {empty, half}) {
        const std::string bytes = read_file(f);
        const std::vector<std::vector<std::string>> commands{
            {"project", "info", "--project", f},
            {"project", "info", "--json", "--project", f},
            {"project", "list-docs", "--project", f, "--model", model_},
            {"project", "remove-doc", "--project", f, "1"},
            {"project", "vacuum", "--project", f},
            {"project", "set-cache-limit", "--project", f, "1K"},
            {"project", "events", "--project", f},
            {"ask", "--project", f, "--model", model_, "What?"},
            {"ask", "--project", f, "--model", model_, "--doc", doc, "What?"},
            ingest(f, {doc}),
        };
        for (const auto& c : commands) {
            std::string shown;
            for (const auto& a : c)
                shown += " " + a;
            const auto r = run(c);
            EXPECT_NE(r.status, 0) << shown;
            EXPECT_EQ(r.out, "") << shown;
            EXPECT_NE(r.err.find(f), std::string::npos) << shown << "\n" << r.err;
            EXPECT_NE(r.err.find("not changed"), std::string::npos) << shown << "\n" << r.err;
            EXPECT_TRUE(read_file(f) == bytes) << shown << ": the file was changed";
            for (const char* side : {"-wal", "-shm", "-journal"})
                EXPECT_FALSE(std::filesystem::exists(f + side)) << shown << ": left " << f << side;
        }
    }
}

TEST_F(CliProject, AnswersFromTheStoredTextAfterTheFileIsGone) {
    const auto doc = write_file("gone.txt", sample_prose(8, 400));
    ASSERT_EQ(run(ingest(project_, {doc})).status, 0);
    const int64_t tokens = list_docs(project_)[0]["tokens"];
    const json before = ask(project_, "Where is the garden?");
    std::filesystem::remove(doc);
    const json after = ask(project_, "Where is the garden?");
    EXPECT_EQ(after["stats"]["tokens_reused"], tokens) << after;
    EXPECT_EQ(after["stats"]["units_recomputed"], 0) << after;
    EXPECT_EQ(after["answer"], before["answer"]);
    EXPECT_EQ(list_docs(project_).size(), 1u);
}

TEST_F(CliProject, RemoveDocVacuumAndCacheLimit) {
    const auto a = write_file("a.txt", sample_prose(9, 300));
    const auto b = write_file("b.txt", sample_prose(10, 300));
    ASSERT_EQ(run(ingest(project_, {a, b})).status, 0);
    const json docs = list_docs(project_);
    ASSERT_EQ(docs.size(), 2u);
    const int64_t id_a = docs[0]["id"], id_b = docs[1]["id"];
    const json first = ask(project_, "What keeps the letter?");
    EXPECT_EQ(first["documents"], json::array({id_a, id_b})) << first;
    const json i0 = info(project_);
    EXPECT_EQ(i0["chats"], 1);
    EXPECT_EQ(i0["messages"], 2);

    // show-doc: the text as read (here the file's bytes), whole or a source's range of it.
    const std::string text_a = sample_prose(9, 300);
    const auto shown = run({"project", "show-doc", "--project", project_, std::to_string(id_a)});
    ASSERT_EQ(shown.status, 0) << shown.err;
    EXPECT_EQ(shown.out, text_a.back() == '\n' ? text_a : text_a + "\n");
    ASSERT_FALSE(first["sources"].empty()) << first;
    const auto& src = first["sources"][0];
    const int64_t sb = src["start_char"], se = src["end_char"];
    const auto part = run({"project", "show-doc", "--project", project_,
                           std::to_string(src["document_id"].get<int64_t>()), "--chars",
                           std::to_string(sb) + ":" + std::to_string(se)});
    ASSERT_EQ(part.status, 0) << part.err;
    const std::string& of = src["document_id"] == id_a ? text_a : sample_prose(10, 300);
    EXPECT_EQ(part.out, of.substr(static_cast<size_t>(sb), static_cast<size_t>(se - sb)) + "\n");
    for (const std::string bad : {"5:3", "x:3", "0:999999", "3"}) {
        const auto r = run(
            {"project", "show-doc", "--project", project_, std::to_string(id_a), "--chars", bad});
        EXPECT_EQ(r.status, 1) << bad;
        EXPECT_NE(r.err.find("give BEGIN:END"), std::string::npos) << r.err;
    }
    const auto none = run({"project", "show-doc", "--project", project_, "999"});
    EXPECT_EQ(none.status, 1);
    EXPECT_NE(none.err.find("has no document 999"), std::string::npos) << none.err;

    // remove-doc: the document goes, the chat stays.
    const auto rm = run({"project", "remove-doc", "--project", project_, std::to_string(id_a)});
    EXPECT_EQ(rm.status, 0) << rm.err;
    const json l = list_docs(project_);
    ASSERT_EQ(l.size(), 1u) << l;
    EXPECT_EQ(l[0]["id"], id_b);
    const json i1 = info(project_);
    EXPECT_EQ(i1["documents"], 1);
    EXPECT_EQ(i1["chats"], i0["chats"]);
    EXPECT_EQ(i1["messages"], i0["messages"]);
    EXPECT_LT(i1["states"].get<int64_t>(), i0["states"].get<int64_t>());
    const auto again = run({"project", "remove-doc", "--project", project_, std::to_string(id_a)});
    EXPECT_NE(again.status, 0);
    EXPECT_NE(again.err.find("no document"), std::string::npos) << again.err;

    const auto vac = run({"project", "vacuum", "--project", project_});
    EXPECT_EQ(vac.status, 0) << vac.err;
    EXPECT_LE(info(project_)["file_bytes"].get<int64_t>(), i1["file_bytes"].get<int64_t>());

    const json warm = ask(project_, "What keeps the letter?");
    EXPECT_EQ(warm["stats"]["units_recomputed"], 0) << warm;
    EXPECT_EQ(warm["documents"], json::array({id_b}));

    // A cache limit below one unit's states evicts them; the next ask recomputes.
    const auto lim = run({"project", "set-cache-limit", "--project", project_, "1K"});
    EXPECT_EQ(lim.status, 0) << lim.err;
    const json i2 = info(project_);
    EXPECT_EQ(i2["cache_limit_bytes"], 1024);
    EXPECT_LT(i2["state_bytes"].get<int64_t>(), i1["state_bytes"].get<int64_t>());
    EXPECT_LE(i2["state_bytes"].get<int64_t>(), 1024);
    const auto ev = run({"project", "events", "--project", project_});
    EXPECT_EQ(ev.status, 0) << ev.err;
    EXPECT_NE(ev.out.find("evicted"), std::string::npos) << ev.out;

    const json cold = ask(project_, "What keeps the letter?");
    EXPECT_EQ(cold["stats"]["units_recomputed"], 1) << cold;
    EXPECT_EQ(cold["answer"], warm["answer"]);
    // The recomputed section's tokens count as computed, not reused (tests/README.md, failure mode
    // 9).
    EXPECT_EQ(cold["stats"]["tokens_reused"], 0) << cold;
    EXPECT_EQ(cold["stats"]["tokens_computed"].get<int64_t>(),
              cold["stats"]["prompt_tokens"].get<int64_t>())
        << cold;
    EXPECT_LE(info(project_)["state_bytes"].get<int64_t>(), 1024)
        << "after the answer the project is within its limit again";
    const auto ev2 = run({"project", "events", "--project", project_});
    EXPECT_NE(ev2.out.find("recomputed"), std::string::npos) << ev2.out;
}

// Several documents in context with every stored state (full hit), one document's states gone
// (partial hit) and none (no hit): each missing section is computed first, the others reused,
// and every case gives the same answer, with no selector and with `full` (published PIC code
// crashed on the partial and empty cases). The documents come in reverse order, as chosen.
TEST_F(CliProject, FullPartialAndNoHitOverSeveralDocumentsGiveTheSameAnswer) {
    std::vector<std::string> files;
    for (const uint32_t i : {0u, 1u, 2u})
        files.push_back(
            write_file(std::array{"d0.txt", "d1.txt", "d2.txt"}[i], sample_prose(60 + i, 400)));
    ASSERT_EQ(run(ingest(project_, files)).status, 0);
    const json docs = list_docs(project_);
    ASSERT_EQ(docs.size(), 3u);
    std::vector<std::string> order;
    json ids = json::array();
    for (int i = 2; i >= 0; --i) {
        order.insert(order.end(), {"--doc-id", std::to_string(docs[i]["id"].get<int64_t>())});
        ids.push_back(docs[i]["id"]);
    }
    const std::string q = "What keeps the letter?";
    auto drop_states = [&](const std::string& where) {
        spanscope::Db db(project_, /*create=*/false);
        const std::string chunks = "SELECT id FROM chunks" + where;
        db.exec("DELETE FROM chunk_state_blobs WHERE chunk_id IN (" + chunks + ")");
        db.exec("DELETE FROM chunk_states WHERE chunk_id IN (" + chunks + ")");
    };
    for (const std::string selector : {"none", "full"}) {
        auto extra = order;
        extra.insert(extra.end(), {"--selector", selector});
        const json hit = ask(project_, q, extra);
        EXPECT_EQ(hit["documents"], ids) << hit;
        EXPECT_EQ(hit["stats"]["units"], 3) << hit;
        EXPECT_EQ(hit["stats"]["units_recomputed"], 0) << hit;

        drop_states(" WHERE document_id = " + std::to_string(docs[1]["id"].get<int64_t>()));
        const json partial = ask(project_, q, extra);
        EXPECT_EQ(partial["stats"]["units_recomputed"], 1) << partial;
        EXPECT_EQ(partial["answer"], hit["answer"]) << selector;

        drop_states("");
        const json none = ask(project_, q, extra);
        EXPECT_EQ(none["stats"]["units_recomputed"], 3) << none;
        EXPECT_EQ(none["answer"], hit["answer"]) << selector;
    }
}

// More text than the context: a model with a 1024-token context, two documents of about
// 2 000 tokens and two short ones. The section holding the question's rare word is chosen
// (ranked first by bm25), the sections used come in the order of the --doc-id options
// (descending ids), the JSON statistics name them and the human output says how many of how
// many were used.
TEST_F(CliProject, AskOverMoreTextThanTheContextUsesTheRelevantSections) {
    const std::string small = dir_ + "/small.gguf";
    TinyGemma3Config c;
    c.n_ctx = 1024;
    c.sliding_window = 16;
    write_tiny_gemma3(small, c);
    const std::string rare = "A silver zeppelin, the zeppelin of the north, drifts.\n\n";
    const auto one = write_file("one.txt", sample_prose(41, 2000));
    const auto two = write_file("two.txt", sample_prose(42, 150) + rare + sample_prose(43, 150));
    const auto three = write_file("three.txt", sample_prose(44, 250));
    const auto four = write_file("four.txt", sample_prose(45, 2000));
    auto ingest_args = ingest(project_, {one, two, three, four}, small);
    ingest_args.insert(ingest_args.end(), {"--chunk-tokens", "256"});
    const auto ingested = run(ingest_args);
    ASSERT_EQ(ingested.status, 0) << ingested.err;
    const json docs =
        run_json({"project", "list-docs", "--json", "--model", small, "--project", project_});
    ASSERT_EQ(docs.size(), 4u);
    const int64_t d1 = docs[0]["id"], d2 = docs[1]["id"], d3 = docs[2]["id"], d4 = docs[3]["id"];
    int64_t all_tokens = 0;
    for (const auto& d : docs)
        all_tokens += d["tokens"].get<int64_t>();
    ASSERT_GT(all_tokens, 2 * 1024);

    // The units as stored, and which holds the rare word (from the chunks' byte ranges).
    std::vector<std::pair<int64_t, int64_t>> all;
    std::pair<int64_t, int64_t> rare_unit{-1, -1};
    {
        spanscope::Db db(project_, false);
        auto q = db.prepare("SELECT c.document_id, c.unit, min(c.char_begin), max(c.char_end), "
                            "d.text FROM chunks c JOIN documents d ON d.id = c.document_id GROUP "
                            "BY c.document_id, c.chunking, c.unit");
        while (q.step()) {
            all.emplace_back(q.int64(0), q.int64(1));
            const auto text = q.text(4).substr(static_cast<size_t>(q.int64(2)),
                                               static_cast<size_t>(q.int64(3) - q.int64(2)));
            if (text.find("zeppelin") != std::string::npos)
                rare_unit = {q.int64(0), q.int64(1)};
        }
    }
    ASSERT_EQ(rare_unit.first, d2);

    const std::vector<int64_t> order{d4, d3, d2, d1};
    std::vector<std::string> extra{"--model", small};
    for (const auto id : order)
        extra.insert(extra.end(), {"--doc-id", std::to_string(id)});
    std::vector<std::string> a{"ask",       "--project", project_,       "--json",
                               "--threads", "1",         "--max-tokens", "8"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("Where does the zeppelin drift?");
    const json r = run_json(a);
    const auto& s = r["stats"];
    ASSERT_TRUE(s.contains("units_used")) << r;
    EXPECT_GT(s["units_left_out"].get<int>(), 0) << s;
    EXPECT_EQ(s["units"].get<size_t>() + s["units_left_out"].get<size_t>(), all.size()) << s;
    EXPECT_EQ(s["ranking"], "bm25") << s;
    const auto& used = s["units_used"];
    ASSERT_EQ(used.size(), s["units"].get<size_t>()) << s;
    ASSERT_GE(used.size(), 2u) << "the order test needs several sections: " << s;
    bool found = false;
    int64_t tokens = 0;
    for (size_t i = 0; i < used.size(); ++i) {
        const auto& u = used[i];
        tokens += u["tokens"].get<int64_t>();
        if (u["document_id"] == rare_unit.first && u["unit"] == rare_unit.second) {
            found = true;
            EXPECT_EQ(u["rank"], 1) << u;
            EXPECT_LT(u["bm25"].get<double>(), 0) << u;
        }
        if (i > 0) {
            const auto place = [&](const json& x) {
                return std::find(order.begin(), order.end(), x["document_id"].get<int64_t>()) -
                       order.begin();
            };
            const auto& p = used[i - 1];
            EXPECT_TRUE(place(p) < place(u) ||
                        (p["document_id"] == u["document_id"] && p["unit"] < u["unit"]))
                << "not in the --doc-id order: " << used;
        }
    }
    EXPECT_TRUE(found) << "the zeppelin section was not used: " << s;
    EXPECT_EQ(s["tokens_reused"], tokens) << s;

    // The human output says which were used.
    a.erase(std::find(a.begin(), a.end(), "--json"));
    const auto h = run(a);
    ASSERT_EQ(h.status, 0) << h.err;
    const std::string said =
        std::to_string(used.size()) + " of " + std::to_string(all.size()) + " sections used: ";
    EXPECT_NE(h.err.find(said), std::string::npos) << h.err;
    // "document 2 (section 3)" or "document 2 (sections 1, 3)": sections 1-based.
    const std::regex listed("document " + std::to_string(d2) + " \\(sections? ([0-9, ]+)\\)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(h.err, m, listed)) << h.err;
    std::set<int64_t> sections;
    std::stringstream list(m[1].str());
    for (std::string n; std::getline(list, n, ',');)
        sections.insert(std::stoll(n));
    EXPECT_TRUE(sections.count(rare_unit.second + 1)) << h.err;
    EXPECT_NE(h.err.find("note: the documents do not fit the context window"), std::string::npos)
        << h.err;
}

// A hybrid model's project (issue 7): ingest stores the recurrent states with the rows; one
// document answers as a cold ask; with two, --state-init chooses the recurrent layers'
// initial state (the statistics say which), exact is refused on Gated DeltaNet (the store
// keeps no transition) and accepted on Mamba-2.
TEST_F(CliProject, HybridProjectsAnswerWithTheChosenStateInitialiser) {
    const std::string fixtures = data_dir() + "/reference/fixtures/";
    // Two short documents: both fit the tiny models' 512-token context with the question.
    const auto a =
        write_file("alpha.txt", "The river keeps the stone and the cat keeps the mat.\n");
    const auto b = write_file("beta.txt", "A bird sat at the gate; the cat sat at the door.\n");
    const std::string q = "What does the river keep?";
    for (const std::string file : {"tiny_granitehybrid.gguf", "tiny_qwen3next.gguf"}) {
        const std::string model = fixtures + file;
        const std::string one = dir_ + "/one-" + file + ".spanscope";
        ASSERT_EQ(run(ingest(one, {a}, model)).status, 0);
        auto ask_with = [&](const std::string& project, const std::vector<std::string>& extra) {
            std::vector<std::string> args{"ask",    "--project", project, "--model",      model,
                                          "--json", "--threads", "1",     "--max-tokens", "6"};
            args.insert(args.end(), extra.begin(), extra.end());
            args.push_back(q);
            return args;
        };
        const json warm = run_json(ask_with(one, {}));
        const json cold = run_json({"ask", "--doc", a, "--model", model, "--json", "--threads", "1",
                                    "--max-tokens", "6", q});
        EXPECT_EQ(warm["answer"], cold["answer"]) << file;
        EXPECT_EQ(warm["stats"]["state_init"], "single-block") << warm;
        EXPECT_GT(warm["stats"]["recurrent_layers"].get<int>(), 0) << warm;

        const std::string two = dir_ + "/two-" + file + ".spanscope";
        ASSERT_EQ(run(ingest(two, {a, b}, model)).status, 0);
        EXPECT_EQ(sql_count(two, "SELECT count(*) FROM chunk_states WHERE kind = 3"), 2)
            << "one set of recurrent states per document (its last chunk's)";
        std::map<std::string, std::string> answers;
        for (const std::string init : {"single-block", "zero"}) {
            const json r = run_json(ask_with(two, {"--state-init", init}));
            EXPECT_EQ(r["stats"]["state_init"], init) << r;
            EXPECT_EQ(r["stats"]["units"], 2) << r;
            answers[init] = r["answer"].get<std::string>();
        }
        // The initialiser reaches the recurrent layers: a zero state answers otherwise. (The
        // tiny Granite model's random weights answer ':' whatever its state, so only the
        // Qwen3-Next one can show it.)
        if (file == "tiny_qwen3next.gguf") {
            EXPECT_NE(answers["single-block"], answers["zero"]);
        }
        const json epic = run_json(ask_with(two, {"--selector", "epic", "--recompute", "0.1"}));
        EXPECT_GT(epic["stats"]["layer_rows"]["recurrent"]["rows_recomputed"].get<int64_t>(), 0)
            << epic;
        const int64_t chats = sql_count(two, "SELECT count(*) FROM chats");
        const auto exact = run(ask_with(two, {"--state-init", "exact"}));
        if (file == "tiny_qwen3next.gguf") {
            EXPECT_EQ(exact.status, 1);
            EXPECT_NE(exact.err.find("transition"), std::string::npos) << exact.err;
            EXPECT_EQ(sql_count(two, "SELECT count(*) FROM chats"), chats)
                << "the refused question leaves no chat";
            // A question with no room left for a document: refused before it is saved too.
            const auto full = run({"ask", "--project", two, "--model", model, "--threads", "1",
                                   "--max-tokens", "600", q});
            EXPECT_EQ(full.status, 1);
            EXPECT_NE(full.err.find("leave no room"), std::string::npos) << full.err;
            EXPECT_EQ(sql_count(two, "SELECT count(*) FROM chats"), chats);
        } else {
            EXPECT_EQ(exact.status, 0) << exact.err;
        }
    }
}
