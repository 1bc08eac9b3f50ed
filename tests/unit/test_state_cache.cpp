// Chunk states end to end on tiny models (storage/state_cache.h): a unit restored from the
// store gives bit-identical logits to a cold prefill (tests/README.md, failure mode 5), a resumed
// ingest equals an uninterrupted one, an unusable or foreign blob is recomputed and logged, a unit
// moved to new positions matches a fresh prefill there (tests/README.md, failure mode 1), reordered
// units assemble (tests/README.md, failure mode 10), and the stored surprisal is -log softmax of
// the full logits.
#include "answering/state_cache.h"
#include "engine/memory/kv_rows.h"
#include "engine/text/prompt.h"
#include "storage/model_fingerprint.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <tuple>

using namespace spanscope;
using namespace spanscope::test;
namespace fs = std::filesystem;

namespace {

// All blobs of a project for one model, in (document order, unit, chunk, kind) order.
std::vector<std::vector<uint8_t>> all_blobs(Project& p) {
    std::vector<std::vector<uint8_t>> out;
    auto q =
        p.db().prepare("SELECT s.blob FROM chunk_state_blobs s JOIN chunks c ON c.id = s.chunk_id "
                       "JOIN documents d ON d.id = c.document_id "
                       "ORDER BY d.position, c.unit, c.ordinal, s.kind");
    while (q.step())
        out.push_back(q.blob(0));
    return out;
}

class StateCacheTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        config_.n_ctx = 2048;
        config_.sliding_window = 16;
        config_.n_layer = 4;
        write_tiny_gemma3(dir_ + "/a.gguf", config_);
        model_ = Model::load(dir_ + "/a.gguf");
        chunking_.target_tokens = 64;
        chunking_.max_unit_tokens = 1500;
        options_.threads = 2;
        options_.ubatch = 32; // chunks span several ubatches
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::unique_ptr<Project> project(const std::string& name) {
        return Project::open(dir_ + "/" + name + ".spanscope", true);
    }
    /// A project holding `text` ingested whole, without interruption: the reference blobs.
    std::unique_ptr<Project> ingested_whole(const std::string& name, const std::string& text) {
        auto p = project(name);
        const auto id = p->add_document("/d.txt", text_document(text));
        StateCache cache(*p, *model_, chunking_);
        Session s(*model_, options_);
        cache.ingest(id, s);
        return p;
    }
    TinyGemma3Config config_;
    std::string dir_;
    std::unique_ptr<Model> model_;
    ChunkingOptions chunking_;
    SessionOptions options_;
};

} // namespace

TEST_F(StateCacheTest, RestoredUnitGivesTheColdLogitsExactly) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(1, 900)));
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    const auto r = cache.ingest(id, scratch);
    EXPECT_GT(r.chunks, 4);
    EXPECT_EQ(r.tokens_computed, r.tokens) << "every token prefilled once";
    const auto units = cache.units(id);
    ASSERT_EQ(units.size(), 1u);
    const auto question = question_tokens(model_->tokenizer(), ChatFormat::Completion, "the cat?");

    // Cold: the same chunks prefilled in a fresh session.
    Session cold(*model_, options_);
    const auto after_doc = prefill_unit(cold, units[0], 0, 0, {}, nullptr, {}, false);
    const auto cold_logits = cold.prefill(question);

    // Warm: restored from the store in another session.
    Session warm(*model_, options_);
    const auto states = cache.load_unit(id, 0);
    EXPECT_EQ(cache.restore_unit(states, warm, 0), units[0].n_tokens());
    warm.adopt_memory(units[0].n_tokens());
    EXPECT_EQ(warm.tokens_processed(), 0) << "nothing recomputed";
    const auto warm_logits = warm.prefill(question);
    EXPECT_EQ(warm.tokens_processed(), static_cast<int64_t>(question.size()));
    EXPECT_EQ(cold_logits, warm_logits) << "max diff " << max_abs_diff(cold_logits, warm_logits);

    // And the memories hold the same rows.
    for (int il = 0; il < model_->info().n_layer; ++il) {
        const int32_t n = static_cast<int32_t>(units[0].n_tokens());
        const int32_t b = model_->info().layers[il].sliding() ? n - 15 : 0;
        const auto a = export_rows(cold.memory(), {il}, b, n);
        const auto w = export_rows(warm.memory(), {il}, b, n);
        EXPECT_EQ(a[0].k, w[0].k) << "layer " << il;
        EXPECT_EQ(a[0].v, w[0].v) << "layer " << il;
    }
    (void)after_doc;
}

TEST_F(StateCacheTest, ResumedIngestEqualsAnUninterruptedOne) {
    const std::string text = sample_prose(2, 2250);
    auto a = ingested_whole("a", text);
    auto b = project("b");
    const auto idb = b->add_document("/d.txt", text_document(text));
    StateCache cache(*b, *model_, chunking_);
    int interrupted = 0;
    for (const int64_t stop_after : {1, 3, 4, 9}) {
        Session s(*model_, options_);
        std::atomic<bool> cancel{false};
        try {
            cache.ingest(idb, s, &cancel, [&](const IngestProgress& pr) {
                if (pr.chunk >= stop_after)
                    cancel = true;
            });
        } catch (const Cancelled&) {
            ++interrupted;
        }
        auto q = b->db().prepare("SELECT count(*) FROM chunk_states WHERE kind = 2");
        q.step();
        EXPECT_EQ(q.int64(0), 1) << "one sliding tail: the last committed chunk's";
    }
    EXPECT_EQ(interrupted, 4);
    Session s(*model_, options_);
    const auto r = cache.ingest(idb, s);
    EXPECT_GT(r.chunks_reused, 8);
    EXPECT_EQ(all_blobs(*a), all_blobs(*b));
    const auto again = cache.ingest(idb, s);
    EXPECT_EQ(again.tokens_computed, 0) << "a complete document is not prefilled again";
}

TEST_F(StateCacheTest, FlippedByteIsDetectedRecomputedAndLogged) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(3, 900)));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    cache.ingest(id, s);
    const auto before = all_blobs(*p);
    std::vector<std::vector<int64_t>> ids;
    cache.units(id, &ids);
    auto blob = *p->state_blob(ids[0][2], cache.fingerprint(), StateKind::AttentionRows);
    blob[blob.size() / 2] ^= 0x01;
    p->db()
        .prepare("UPDATE chunk_state_blobs SET blob = ? WHERE chunk_id = ? AND kind = 1")
        .bind_blob(1, blob.data(), blob.size())
        .bind(2, ids[0][2])
        .run();
    EXPECT_THROW(cache.load_unit(id, 0), StateError);
    const auto r = cache.ingest(id, s);
    EXPECT_EQ(r.recomputed_units, 1);
    EXPECT_EQ(r.tokens_computed, r.tokens);
    EXPECT_EQ(all_blobs(*p), before) << "recomputed states equal the originals";
    bool logged = false;
    for (const auto& [kind, message] : p->events())
        logged = logged || (kind == "recomputed" && message.find("checksum") != std::string::npos);
    EXPECT_TRUE(logged);
    EXPECT_NO_THROW(cache.load_unit(id, 0));
}

TEST_F(StateCacheTest, AnotherModelIgnoresTheStatesAndKeepsDocumentsAndChats) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(4, 600)));
    const auto chat = p->create_chat("q");
    p->add_message(chat, "user", "q");
    {
        StateCache cache(*p, *model_, chunking_);
        Session s(*model_, options_);
        cache.ingest(id, s);
    }
    auto other_config = config_;
    other_config.seed = 99;
    write_tiny_gemma3(dir_ + "/b.gguf", other_config);
    auto other = Model::load(dir_ + "/b.gguf");
    ASSERT_NE(model_fingerprint(*other), model_fingerprint(*model_));
    StateCache cache(*p, *other, chunking_);
    try {
        cache.load_unit(id, 0);
        ADD_FAILURE() << "states of another model were accepted";
    } catch (const StateError& e) {
        EXPECT_NE(std::string(e.what()).find("no stored state"), std::string::npos) << e.what();
    }
    Session s(*other, options_);
    const auto r = cache.ingest(id, s);
    EXPECT_EQ(r.tokens_computed, r.tokens);
    EXPECT_NO_THROW(cache.load_unit(id, 0));
    // The reason is logged: a change of the engine's numerics version changes the fingerprint
    // the same way, so states stored before it are recomputed, and said to be.
    bool logged = false;
    for (const auto& [kind, message] : p->events())
        logged = logged || (kind == "recomputed" &&
                            message.find("another model fingerprint") != std::string::npos);
    EXPECT_TRUE(logged) << "no \"recomputed\" event naming the fingerprint";
    EXPECT_EQ(p->documents().size(), 1u);
    EXPECT_EQ(p->messages(chat).size(), 1u);
    EXPECT_EQ(p->info().models.size(), 2u) << "the first model's states are kept";
}

TEST_F(StateCacheTest, AnotherTokenizerOverTheSameWeightsNeverHits) {
    // The same weights with other piece scores: the model fingerprint (metadata hashed) and the
    // chunking key (tokenizer hash) both differ, so neither the stored chunk rows (token ids of
    // the first tokenizer) nor their states are used; the document is cut and computed again.
    auto p = project("tok");
    const std::string text = sample_prose(4, 600);
    const auto id = p->add_document("/d.txt", text_document(text));
    {
        StateCache cache(*p, *model_, chunking_);
        Session s(*model_, options_);
        cache.ingest(id, s);
    }
    auto other_config = config_;
    other_config.alternate_scores = true;
    write_tiny_gemma3(dir_ + "/tok.gguf", other_config);
    auto other = Model::load(dir_ + "/tok.gguf");
    ASSERT_NE(tokenizer_hash(*other), tokenizer_hash(*model_));
    ASSERT_NE(model_fingerprint(*other), model_fingerprint(*model_));
    // Premise: the two tokenizers cut this text differently.
    ASSERT_NE(other->tokenizer().encode(text, false), model_->tokenizer().encode(text, false));
    StateCache cache(*p, *other, chunking_);
    EXPECT_FALSE(cache.status(id).chunked) << "chunks of the other tokenizer were taken";
    EXPECT_THROW(cache.load_unit(id, 0), StateError);
    Session s(*other, options_);
    const auto r = cache.ingest(id, s);
    EXPECT_EQ(r.chunks_reused, 0);
    EXPECT_EQ(r.tokens_computed, r.tokens);
    EXPECT_NO_THROW(cache.load_unit(id, 0));
}

TEST_F(StateCacheTest, MovedUnitMatchesAFreshPrefillAtTheNewPositions) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(5, 450)));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    cache.ingest(id, s);
    const auto unit = cache.units(id)[0];
    std::vector<int32_t> tokens;
    for (const auto& c : unit.chunks)
        tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    const auto n = static_cast<int32_t>(tokens.size());
    const int32_t delta = 700;
    ThreadPool pool(2);
    const auto question = question_tokens(model_->tokenizer(), ChatFormat::Completion, "rain?");
    std::vector<int32_t> qpos(question.size());
    for (size_t i = 0; i < qpos.size(); ++i)
        qpos[i] = delta + n + static_cast<int32_t>(i);
    const std::vector<int64_t> last{static_cast<int64_t>(question.size()) - 1};
    const auto V = model_->info().n_vocab;

    // Fresh: the unit's tokens run at positions delta, delta+1, ...
    auto fresh = make_memory(model_->info(), 2048, 2048);
    std::vector<int32_t> pos(tokens.size());
    for (int32_t i = 0; i < n; ++i)
        pos[i] = delta + i;
    model_->forward(tokens.data(), pos.data(), n, fresh, {}, nullptr, pool);
    std::vector<float> fresh_logits(V), moved_logits(V), wrong_logits(V);
    model_->forward(question.data(), qpos.data(), static_cast<int64_t>(question.size()), fresh,
                    last, fresh_logits.data(), pool);

    // Moved: the stored rows re-rotated by delta (each layer with its own RoPE base).
    Session moved(*model_, options_);
    const auto states = cache.load_unit(id, 0);
    cache.restore_unit(states, moved, delta);
    moved.adopt_memory(delta + n);
    model_->forward(question.data(), qpos.data(), static_cast<int64_t>(question.size()),
                    moved.memory(), last, moved_logits.data(), pool);
    const float diff = max_abs_diff(fresh_logits, moved_logits);
    std::printf("moved by %d positions: max |logit difference| %.2e\n", delta, diff);
    EXPECT_LT(diff, 2e-3f);

    // Rotating every layer with the global base instead is measurably wrong (the test can fail).
    auto info = model_->info();
    for (auto& l : info.layers)
        l.rope = model_->info().rope_base_global;
    auto wrong = make_memory(model_->info(), 2048, options_.ubatch);
    for (const auto& c : states.rows)
        for (const auto& rows : c.layers)
            import_rows(wrong, info, rows, delta, options_.ubatch);
    for (const auto& rows : states.tail.layers)
        import_rows(wrong, info, rows, delta, options_.ubatch);
    model_->forward(question.data(), qpos.data(), static_cast<int64_t>(question.size()), wrong,
                    last, wrong_logits.data(), pool);
    EXPECT_GT(max_abs_diff(fresh_logits, wrong_logits), 20 * std::max(diff, 1e-4f));
}

TEST_F(StateCacheTest, UnitsAssembleInAnyOrder) {
    auto p = project("p");
    const auto a = p->add_document("/a.txt", text_document(sample_prose(6, 375)));
    const auto b = p->add_document("/b.txt", text_document(sample_prose(7, 525)));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    cache.ingest(a, s);
    cache.ingest(b, s);
    const auto na = cache.units(a)[0].n_tokens(), nb = cache.units(b)[0].n_tokens();
    const auto question = question_tokens(model_->tokenizer(), ChatFormat::Completion, "hills?");
    for (const auto& order : {std::vector<int64_t>{a, b}, std::vector<int64_t>{b, a}}) {
        Session session(*model_, options_);
        int64_t offset = 0, restored = 0;
        for (const auto id : order) {
            restored += cache.restore_unit(cache.load_unit(id, 0), session, offset);
            offset += id == a ? na : nb;
        }
        session.adopt_memory(offset);
        EXPECT_EQ(restored, na + nb);
        const auto ans = session.answer_after_context(question, ChatFormat::Completion, 4, {});
        EXPECT_EQ(ans.stats.tokens_reused, na + nb);
        EXPECT_EQ(ans.stats.tokens_computed, static_cast<int64_t>(question.size()))
            << "only the question is computed";
    }
}

TEST_F(StateCacheTest, StoredSurprisalIsMinusLogSoftmaxOfTheFullLogits) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(8, 225)));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    cache.ingest(id, s);
    const auto unit = cache.units(id)[0];
    const auto states = cache.load_unit(id, 0);
    std::vector<int32_t> tokens;
    for (const auto& c : unit.chunks)
        tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
    // Reference: every row's logits from one forward pass, log-softmax in double.
    const auto n = static_cast<int64_t>(tokens.size());
    const auto V = model_->info().n_vocab;
    auto memory = make_memory(model_->info(), 2048, n);
    std::vector<int32_t> pos(tokens.size());
    std::vector<int64_t> rows(tokens.size());
    for (int64_t i = 0; i < n; ++i) {
        pos[i] = static_cast<int32_t>(i);
        rows[i] = i;
    }
    std::vector<float> logits(static_cast<size_t>(n * V));
    ThreadPool pool(2);
    model_->forward(tokens.data(), pos.data(), n, memory, rows, logits.data(), pool);
    int64_t at = 0, checked = 0;
    for (const auto& c : states.rows)
        for (size_t i = 0; i < c.surprisal.size(); ++i, ++at) {
            if (at + 1 == n) {
                EXPECT_TRUE(std::isnan(c.surprisal[i])) << "nothing follows the last token";
                continue;
            }
            const float* l = logits.data() + at * V;
            double mx = l[0], sum = 0;
            for (int v = 1; v < V; ++v)
                mx = std::max<double>(mx, l[v]);
            for (int v = 0; v < V; ++v)
                sum += std::exp(l[v] - mx);
            const double ref = mx + std::log(sum) - l[tokens[at + 1]];
            EXPECT_NEAR(c.surprisal[i], ref, 2e-3 + 1e-3 * ref) << "row " << at;
            ++checked;
        }
    EXPECT_EQ(checked, n - 1);
}

TEST_F(StateCacheTest, DocumentOfOver100000TokensIsStoredInSections) {
    // The tiny vocabulary is byte-level: ~1 token per byte of text.
    auto p = project("p");
    const auto id = p->add_document("/long.txt", text_document(sample_prose(9, 112000)));
    chunking_.target_tokens = 512;
    chunking_.max_unit_tokens = 1800;
    options_.ubatch = 512;
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    const auto r = cache.ingest(id, s);
    std::printf("%lld tokens, %lld chunks, %d sections\n", static_cast<long long>(r.tokens),
                static_cast<long long>(r.chunks), r.units);
    EXPECT_GE(r.tokens, 100000);
    EXPECT_GE(r.units, 55);
    EXPECT_EQ(r.tokens_computed, r.tokens);
    auto tails = p->db().prepare("SELECT count(*) FROM chunk_states WHERE kind = 2");
    tails.step();
    EXPECT_EQ(tails.int64(0), r.units) << "one sliding tail per section";
    // Any section restores on its own, and a later one at a moved position.
    Session session(*model_, options_);
    const auto last = cache.units(id).back();
    EXPECT_EQ(cache.restore_unit(cache.load_unit(id, r.units - 1), session, 100), last.n_tokens());
    session.adopt_memory(100 + last.n_tokens());
    EXPECT_NO_THROW(
        session.prefill(question_tokens(model_->tokenizer(), ChatFormat::Completion, "rain?")));
}

TEST_F(StateCacheTest, TwoAssembledDocumentsMatchEachPrefilledAloneAtItsPlace) {
    // Window 64: the second document is shorter than the window, so the question's sliding
    // layers see the end of the first document's tail too (tests/README.md, failure mode 10).
    auto wide = config_;
    wide.sliding_window = 64;
    write_tiny_gemma3(dir_ + "/wide.gguf", wide);
    auto model = Model::load(dir_ + "/wide.gguf");
    auto p = project("p");
    const auto a = p->add_document("/a.txt", text_document(sample_prose(10, 450)));
    const auto b = p->add_document("/b.txt", text_document("Rain."));
    StateCache cache(*p, *model, chunking_);
    Session s(*model, options_);
    cache.ingest(a, s);
    cache.ingest(b, s);
    const auto ua = cache.units(a)[0], ub = cache.units(b)[0];
    const auto na = static_cast<int32_t>(ua.n_tokens()), nb = static_cast<int32_t>(ub.n_tokens());
    ASSERT_LT(nb, 63) << "the second document must be shorter than the window";
    const auto question = question_tokens(model->tokenizer(), ChatFormat::Completion, "hills?");
    const auto nq = static_cast<int64_t>(question.size());
    std::vector<int32_t> qpos(question.size());
    for (int64_t i = 0; i < nq; ++i)
        qpos[i] = na + nb + static_cast<int32_t>(i);
    const std::vector<int64_t> last{nq - 1};
    ThreadPool pool(2);
    auto tokens_of = [](const DocumentUnit& u) {
        std::vector<int32_t> t;
        for (const auto& c : u.chunks)
            t.insert(t.end(), c.tokens.begin(), c.tokens.end());
        return t;
    };

    // Reference: each document prefilled alone (B at positions na...), their rows put side by
    // side, then the question.
    const auto& info = model->info();
    auto run_alone = [&](const std::vector<int32_t>& t, int32_t at) {
        auto m = make_memory(info, 2048, 2048);
        std::vector<int32_t> pos(t.size());
        for (size_t i = 0; i < t.size(); ++i)
            pos[i] = at + static_cast<int32_t>(i);
        model->forward(t.data(), pos.data(), static_cast<int64_t>(t.size()), m, {}, nullptr, pool);
        return m;
    };
    const auto ma = run_alone(tokens_of(ua), 0), mb = run_alone(tokens_of(ub), na);
    auto reference = make_memory(info, 2048, 2048);
    for (int il = 0; il < info.n_layer; ++il) {
        const int32_t w = info.layers[il].sliding() ? info.layers[il].attn.window - 1 : 1 << 30;
        for (const auto& [m, b0, e0] : {std::tuple{&ma, 0, na}, std::tuple{&mb, na, na + nb}}) {
            const int32_t from = std::max(b0, e0 - w);
            for (const auto& rows : export_rows(*m, {il}, from, e0))
                import_rows(reference, info, rows, 0, 2048);
        }
    }
    std::vector<float> want(info.n_vocab), got(info.n_vocab);
    model->forward(question.data(), qpos.data(), nq, reference, last, want.data(), pool);

    // Assembled from the store: A at 0, B moved to na.
    Session session(*model, options_);
    cache.restore_unit(cache.load_unit(a, 0), session, 0);
    cache.restore_unit(cache.load_unit(b, 0), session, na);
    session.adopt_memory(na + nb);
    model->forward(question.data(), qpos.data(), nq, session.memory(), last, got.data(), pool);
    const float diff = max_abs_diff(want, got);
    std::printf("two documents assembled: max |logit difference| %.2e\n", diff);
    EXPECT_LT(diff, 2e-3f);

    // Without the first document's sliding tail the result is measurably different: the
    // reference really depends on it.
    auto no_tail = make_memory(info, 2048, 2048);
    for (int il = 0; il < info.n_layer; ++il) {
        const int32_t w = info.layers[il].sliding() ? info.layers[il].attn.window - 1 : 1 << 30;
        if (!info.layers[il].sliding())
            for (const auto& rows : export_rows(ma, {il}, 0, na))
                import_rows(no_tail, info, rows, 0, 2048);
        for (const auto& rows : export_rows(mb, {il}, std::max(na, na + nb - w), na + nb))
            import_rows(no_tail, info, rows, 0, 2048);
    }
    std::vector<float> without(info.n_vocab);
    model->forward(question.data(), qpos.data(), nq, no_tail, last, without.data(), pool);
    EXPECT_GT(max_abs_diff(want, without), 20 * std::max(diff, 1e-4f));
}

TEST_F(StateCacheTest, DamagedChunkRowsAreCutAgain) {
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(sample_prose(11, 900)));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    cache.ingest(id, s);
    const auto before = cache.units(id);
    // One token id changed into another valid id: only the row checksum can tell.
    auto q = p->db().prepare("SELECT id, tokens FROM chunks WHERE document_id = ? ORDER BY id "
                             "LIMIT 1 OFFSET 1");
    q.bind(1, id);
    ASSERT_TRUE(q.step());
    const int64_t row = q.int64(0);
    auto tokens = q.blob(1);
    q.reset();
    tokens[4] ^= 1;
    p->db()
        .prepare("UPDATE chunks SET tokens = ? WHERE id = ?")
        .bind_blob(1, tokens.data(), tokens.size())
        .bind(2, row)
        .run();
    const auto after = cache.units(id);
    ASSERT_EQ(after.size(), before.size());
    for (size_t c = 0; c < after[0].chunks.size(); ++c)
        EXPECT_EQ(after[0].chunks[c].tokens, before[0].chunks[c].tokens) << "chunk " << c;
    bool logged = false;
    for (const auto& [kind, message] : p->events())
        logged = logged || (kind == "rechunked" && message.find("checksum") != std::string::npos);
    EXPECT_TRUE(logged);
    const auto r = cache.ingest(id, s);
    EXPECT_EQ(r.tokens_computed, r.tokens) << "the states of the damaged chunks went with them";
}

// Hybrid models (issue 7): every chunk also stores the recurrent layers' states at its end
// (chunk_state.h kind 3); restored, they give the cold prefill's logits exactly, and an
// interrupted ingest resumes from them to the same blobs as an uninterrupted one.
class HybridStateCache : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        if (GetParam())
            write_tiny_qwen3next(dir_ + "/m.gguf", TinyQwen3NextConfig{});
        else
            write_tiny_granite_hybrid(dir_ + "/m.gguf", TinyGraniteHybridConfig{});
        model_ = Model::load(dir_ + "/m.gguf");
        chunking_.target_tokens = 48;
        chunking_.max_unit_tokens = 400;
        options_.threads = 2;
        options_.ubatch = 16;
    }
    void TearDown() override { fs::remove_all(dir_); }
    std::string dir_;
    std::unique_ptr<Model> model_;
    ChunkingOptions chunking_;
    SessionOptions options_;
};

TEST_P(HybridStateCache, RestoredUnitGivesTheColdLogitsExactly) {
    auto p = Project::open(dir_ + "/p.spanscope", true);
    const auto id = p->add_document("/d.txt", text_document(sample_prose(1, 250)));
    StateCache cache(*p, *model_, chunking_);
    Session scratch(*model_, options_);
    const auto r = cache.ingest(id, scratch);
    EXPECT_GT(r.chunks, 2);
    const auto units = cache.units(id);
    ASSERT_EQ(units.size(), 1u);
    auto q = p->db().prepare("SELECT count(*) FROM chunk_states WHERE kind = 3");
    q.step();
    EXPECT_EQ(q.int64(0), 1) << "one set of recurrent states: the last committed chunk's";
    const auto question = question_tokens(model_->tokenizer(), ChatFormat::Completion, "the cat?");
    Session cold(*model_, options_);
    prefill_unit(cold, units[0], 0, 0, {}, nullptr, {}, false);
    const auto cold_logits = cold.prefill(question);
    Session warm(*model_, options_);
    const auto states = cache.load_unit(id, 0);
    ASSERT_TRUE(states.recurrent.has_value());
    EXPECT_EQ(cache.restore_unit(states, warm, 0), units[0].n_tokens());
    warm.adopt_memory(units[0].n_tokens());
    const auto warm_logits = warm.prefill(question);
    EXPECT_EQ(cold_logits, warm_logits) << "max diff " << max_abs_diff(cold_logits, warm_logits);
    // Without the recurrent states (a zero state) the logits differ: the test can fail.
    Session zero(*model_, options_);
    auto no_recurrent = states;
    no_recurrent.recurrent.reset();
    cache.restore_unit(no_recurrent, zero, 0);
    for (int il = 0; il < model_->info().n_layer; ++il)
        if (zero.memory().is_recurrent(il))
            zero.memory().recurrent(il).reposition(units[0].n_tokens());
    zero.adopt_memory(units[0].n_tokens());
    EXPECT_GT(max_abs_diff(zero.prefill(question), cold_logits), 1e-3f);
}

TEST_P(HybridStateCache, ResumedIngestEqualsAnUninterruptedOne) {
    const std::string text = sample_prose(2, 300);
    auto a = Project::open(dir_ + "/a.spanscope", true);
    const auto ida = a->add_document("/d.txt", text_document(text));
    {
        StateCache cache(*a, *model_, chunking_);
        Session s(*model_, options_);
        cache.ingest(ida, s);
    }
    auto b = Project::open(dir_ + "/b.spanscope", true);
    const auto idb = b->add_document("/d.txt", text_document(text));
    StateCache cache(*b, *model_, chunking_);
    int interrupted = 0;
    for (const int64_t stop_after : {1, 2}) {
        Session s(*model_, options_);
        std::atomic<bool> cancel{false};
        try {
            cache.ingest(idb, s, &cancel, [&](const IngestProgress& pr) {
                if (pr.chunk >= stop_after)
                    cancel = true;
            });
        } catch (const Cancelled&) {
            ++interrupted;
        }
    }
    EXPECT_GT(interrupted, 0);
    Session s(*model_, options_);
    const auto r = cache.ingest(idb, s);
    EXPECT_GT(r.chunks_reused, 0);
    EXPECT_EQ(all_blobs(*a), all_blobs(*b)) << "bit-identical states after resuming";
}

INSTANTIATE_TEST_SUITE_P(Archs, HybridStateCache, ::testing::Values(false, true),
                         [](const auto& info) {
                             return info.param ? "Qwen3Next" : "GraniteHybrid";
                         });

// One section ingested alone (what an answer computes of a section it chose): only its
// chunks are computed and stored; the rest, ingested later, leave every blob as an
// uninterrupted ingest of the whole document stores it.
TEST_F(StateCacheTest, OneSectionIsIngestedAloneAndTheRestLater) {
    chunking_.max_unit_tokens = 300;
    const auto text = sample_prose(4, 1200);
    auto whole = ingested_whole("whole", text);
    auto p = project("p");
    const auto id = p->add_document("/d.txt", text_document(text));
    StateCache cache(*p, *model_, chunking_);
    Session s(*model_, options_);
    const auto units = cache.units(id);
    ASSERT_GE(units.size(), 3u);
    EXPECT_THROW(cache.ingest_unit(id, static_cast<int>(units.size()), s), std::out_of_range);
    EXPECT_THROW(cache.ingest_unit(id, -1, s), std::out_of_range);
    std::vector<IngestProgress> seen;
    const auto one =
        cache.ingest_unit(id, 1, s, nullptr, [&](const IngestProgress& pr) { seen.push_back(pr); });
    EXPECT_EQ(one.tokens_computed, units[1].n_tokens());
    EXPECT_EQ(cache.status(id).chunks_stored, static_cast<int64_t>(units[1].chunks.size()));
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.back().unit, 1);
    EXPECT_EQ(seen.back().tokens_done, units[1].n_tokens());
    EXPECT_EQ(seen.back().tokens_to_do, units[1].n_tokens());
    EXPECT_EQ(seen.back().chunk, static_cast<int64_t>(units[1].chunks.size()))
        << "the document's stored chunks";
    std::vector<std::vector<int64_t>> chunk_ids;
    cache.units(id, &chunk_ids);
    EXPECT_EQ(cache.tokens_to_compute(units[0], chunk_ids[0]), units[0].n_tokens());
    EXPECT_EQ(cache.tokens_to_compute(units[1], chunk_ids[1]), 0);
    EXPECT_NO_THROW(cache.load_unit(id, 1));
    EXPECT_THROW(cache.load_unit(id, 0), StateError);
    const auto rest = cache.ingest(id, s);
    EXPECT_EQ(rest.tokens_computed, rest.tokens - units[1].n_tokens());
    EXPECT_EQ(all_blobs(*p), all_blobs(*whole));
}
