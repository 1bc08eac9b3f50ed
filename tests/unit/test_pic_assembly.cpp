// Position-independent caching on tiny models: documents prefilled on their own, assembled in
// any order, with the recompute set of each selector (pic_assembly.h). The reference is a
// cold prefill of the same concatenation through an ordinary session.
#include "engine/kernels/ops.h"
#include "engine/linearkv/memory_assembled.h"
#include "engine/linearkv/pic_assembly.h"
#include "engine/session/session.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

using namespace spanscope;
using namespace spanscope::test;

namespace {

// Logits of the tiny models are O(1..10). The same tokens computed in the same ubatches agree
// to float rounding (1e-4); computed in other ubatches (a later document recomputed on its own
// rather than in one batch with the first), sgemm's blocking rounds differently (1e-3).
constexpr float kSameBatches = 1e-4f;
constexpr float kOtherBatches = 1e-3f;

// Import a document's rows at `offset` as a project stores them: every global row, and of a
// sliding layer only the last window - 1 rows.
void import_as_stored(ModelMemory& memory, const ModelInfo& info, const LayerRows& r,
                      int32_t offset) {
    const auto& li = info.layers[static_cast<size_t>(r.layer)];
    const int64_t keep = li.sliding() ? std::min<int64_t>(r.n_rows, li.attn.window - 1) : r.n_rows;
    const int64_t width = static_cast<int64_t>(li.attn.n_kv_head) * li.attn.head_dim;
    LayerRows tail = r;
    tail.pos_begin = static_cast<int32_t>(r.n_rows - keep);
    tail.n_rows = keep;
    tail.k.assign(r.k.end() - keep * width, r.k.end());
    tail.v.assign(r.v.end() - keep * width, r.v.end());
    import_rows(memory, info, tail, offset, 1000);
}

class PicAssembly : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        TinyGemma3Config c; // window 8, sliding and global layers alternate
        c.n_ctx = 512;
        write_tiny_gemma3(dir_ + "/tiny.gguf", c);
        model_ = Model::load(dir_ + "/tiny.gguf");
        const int V = model_->info().n_vocab;
        a_ = random_tokens(23, V, 1);
        b_ = random_tokens(31, V, 2);
        c_ = random_tokens(17, V, 3);
        question_ = random_tokens(6, V, 4);
        question_.erase(question_.begin()); // no BOS in the question
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    // Next-token logits after `question` following a cold prefill of `context`.
    std::vector<float> cold(const std::vector<int32_t>& context) const {
        SessionOptions o;
        o.threads = 2;
        Session s(*model_, o);
        auto all = context;
        all.insert(all.end(), question_.begin(), question_.end());
        return s.prefill(all);
    }
    // The same after an assembly.
    std::vector<float> after(AssembledContext& a) const {
        SessionOptions o;
        o.threads = 2;
        Session s(*model_, o);
        s.memory() = std::move(a.memory);
        s.adopt_memory(a.n_past);
        return s.prefill(question_);
    }
    static std::vector<int32_t> concat(std::initializer_list<const std::vector<int32_t>*> parts) {
        std::vector<int32_t> out;
        for (const auto* p : parts)
            out.insert(out.end(), p->begin(), p->end());
        return out;
    }

    std::string dir_;
    std::unique_ptr<Model> model_;
    std::vector<int32_t> a_, b_, c_, question_;
    ThreadPool pool_{2};
};

} // namespace

TEST_F(PicAssembly, FullRecomputeEqualsAColdPrefillInAnyOrder) {
    const auto A = prefill_document(*model_, a_, pool_);
    const auto B = prefill_document(*model_, b_, pool_);
    const auto C = prefill_document(*model_, c_, pool_);
    RecomputeOptions o;
    o.selector = "full";
    for (const auto& order : std::vector<std::vector<const CachedDocument*>>{
             {&A, &B, &C}, {&C, &A, &B}, {&B, &C, &A}}) {
        auto a = assemble_documents(*model_, order, o, pool_);
        std::vector<int32_t> tokens;
        for (const auto* d : order)
            tokens.insert(tokens.end(), d->tokens.begin(), d->tokens.end());
        EXPECT_EQ(a.tokens, tokens);
        EXPECT_EQ(a.stats.recompute_set, a.n_past);
        EXPECT_LT(max_abs_diff(after(a), cold(tokens)), kSameBatches);
    }
}

TEST_F(PicAssembly, OneDocumentWithoutRecomputeIsExactReuse) {
    const auto A = prefill_document(*model_, a_, pool_);
    auto a = assemble_documents(*model_, {&A}, RecomputeOptions{}, pool_);
    EXPECT_EQ(a.stats.recompute_set, 0);
    EXPECT_EQ(a.stats.global.rows_recomputed + a.stats.sliding.rows_recomputed, 0);
    EXPECT_EQ(a.stats.global.rows_reused, a.stats.global.layers * std::ssize(a_));
    EXPECT_LT(max_abs_diff(after(a), cold(a_)), kSameBatches);
    // Every selector leaves a single document as it was (cacheblend and epic recompute only
    // later documents; full recomputes it and gets the same rows).
    for (const std::string sel : {"epic", "cacheblend", "full"}) {
        RecomputeOptions o;
        o.selector = sel;
        auto s = assemble_documents(*model_, {&A}, o, pool_);
        EXPECT_LT(max_abs_diff(after(s), cold(a_)), kSameBatches) << sel;
    }
}

TEST_F(PicAssembly, WithoutRecomputeASecondDocumentIsApproximate) {
    // The position-independent error the selectors exist to repair: a second document's rows
    // never saw the first, so the answer differs from a cold prefill (and stays finite). The
    // moved keys themselves are exact (AMovedKeyEqualsTheKeyComputedAtTheNewPosition).
    const auto A = prefill_document(*model_, a_, pool_);
    const auto B = prefill_document(*model_, b_, pool_);
    auto none = assemble_documents(*model_, {&A, &B}, RecomputeOptions{}, pool_);
    EXPECT_EQ(none.starts, (std::vector<int64_t>{0, std::ssize(a_)}));
    const auto ref = cold(concat({&a_, &b_}));
    const float err = max_abs_diff(after(none), ref);
    EXPECT_GT(err, 1e-2f);
    EXPECT_TRUE(std::isfinite(err));
}

TEST_F(PicAssembly, EpicRecomputesTheFirstTokensOfEveryLaterDocument) {
    const auto A = prefill_document(*model_, a_, pool_);
    const auto B = prefill_document(*model_, b_, pool_);
    const auto C = prefill_document(*model_, c_, pool_);
    RecomputeOptions o;
    o.selector = "epic";
    o.epic_tokens = 5;
    auto a = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    const auto sa = static_cast<int32_t>(a_.size()), sb = static_cast<int32_t>(b_.size());
    std::vector<int32_t> want;
    for (int32_t i = 0; i < 5; ++i)
        want.push_back(sa + i);
    for (int32_t i = 0; i < 5; ++i)
        want.push_back(sa + sb + i);
    EXPECT_EQ(a.recompute_positions, want);
    EXPECT_EQ(a.stats.recompute_set, 10);
    EXPECT_EQ(a.stats.global.rows_recomputed, 10 * a.stats.global.layers);
    EXPECT_EQ(a.stats.sliding.rows_recomputed, 10 * a.stats.sliding.layers);
    EXPECT_EQ(a.stats.global.rows_reused, (a.n_past - 10) * a.stats.global.layers);
    // k covering whole documents: every later document recomputed, as a cold prefill.
    o.epic_tokens = 1000;
    auto all = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    EXPECT_EQ(all.stats.recompute_set, all.n_past - sa);
    EXPECT_LT(max_abs_diff(after(all), cold(concat({&a_, &b_, &c_}))), kOtherBatches);
}

TEST_F(PicAssembly, CacheBlendKeepsTheTokensWhoseValuesMovedMost) {
    const auto A = prefill_document(*model_, a_, pool_);
    const auto B = prefill_document(*model_, b_, pool_);
    RecomputeOptions o;
    o.selector = "cacheblend";
    o.ratio = 0.25;
    o.check_layer = 1;
    auto a = assemble_documents(*model_, {&A, &B}, o, pool_);
    const auto n_b = std::ssize(b_);
    EXPECT_EQ(a.stats.tokens_forwarded, n_b);
    EXPECT_EQ(a.stats.recompute_set, (n_b + 3) / 4); // ceil(0.25 · 31) in one ubatch
    // The check layer recorded every forwarded row's deviation; the kept ones are the largest.
    const auto& dev =
        dynamic_cast<const AssembledMemory&>(a.memory.layer(o.check_layer)).last_deviation();
    ASSERT_EQ(std::ssize(dev), n_b);
    const auto start = static_cast<int32_t>(a_.size());
    float min_kept = 1e30f, max_left = -1;
    for (int64_t i = 0; i < n_b; ++i) {
        const bool kept =
            std::count(a.recompute_positions.begin(), a.recompute_positions.end(), start + i) > 0;
        if (kept)
            min_kept = std::min(min_kept, dev[static_cast<size_t>(i)]);
        else
            max_left = std::max(max_left, dev[static_cast<size_t>(i)]);
    }
    EXPECT_GE(min_kept, max_left);
    EXPECT_GT(max_left, 0.0f) << "the second document's values moved at the check layer";
    // Layers up to the check layer recomputed every forwarded row, the later ones only U.
    const auto& info = model_->info();
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& m = dynamic_cast<const AssembledMemory&>(a.memory.layer(il));
        EXPECT_EQ(m.rows_recomputed(), il <= o.check_layer ? n_b : a.stats.recompute_set)
            << "layer " << il;
    }
    // Ratio 1: every row goes on, which is a full recompute of the later document.
    o.ratio = 1.0;
    auto whole = assemble_documents(*model_, {&A, &B}, o, pool_);
    EXPECT_LT(max_abs_diff(after(whole), cold(concat({&a_, &b_}))), kOtherBatches);
    // And a partial recompute lies between none and full.
    auto none = assemble_documents(*model_, {&A, &B}, RecomputeOptions{}, pool_);
    const auto ref = cold(concat({&a_, &b_}));
    EXPECT_LT(max_abs_diff(after(a), ref), max_abs_diff(after(none), ref));
}

TEST_F(PicAssembly, AMovedKeyEqualsTheKeyComputedAtTheNewPosition) {
    // The same document prefilled at positions from 0 and from delta: every layer's keys
    // (global base 1e6, sliding base 1e4), moved by delta, equal the ones computed there. A
    // move of 16 000 positions checks it far from the start (to f16 rounding, 4e-3 of the
    // largest key: looser than fp32 phase error there, so it catches a wrong base or sign,
    // not a precision loss).
    const auto A = prefill_document(*model_, a_, pool_);
    const auto& info = model_->info();
    const auto n = static_cast<int32_t>(a_.size());
    for (const int32_t delta : {100, 16000}) {
        ModelMemory at = make_assembled_memory(info, 200);
        std::vector<int32_t> pos(a_.size());
        std::iota(pos.begin(), pos.end(), delta);
        model_->forward(a_.data(), pos.data(), std::ssize(a_), at, {}, nullptr, pool_);
        ModelMemory moved = make_assembled_memory(info, 200);
        for (const auto& r : A.rows)
            import_rows(moved, info, r, delta, 1000);
        bool saw_global = false, saw_sliding = false;
        for (int il = 0; il < info.n_layer; ++il) {
            std::vector<float> k1, v1, k2, v2;
            std::vector<int32_t> p1, p2;
            at.layer(il).read_rows(delta, delta + n, k1, v1, p1);
            moved.layer(il).read_rows(delta, delta + n, k2, v2, p2);
            ASSERT_EQ(p1, p2);
            ASSERT_EQ(p1.size(), a_.size()) << "delta " << delta;
            float scale = 0;
            for (const float x : k1)
                scale = std::max(scale, std::abs(x));
            // Both keys are rounded through f16 (relative 2^-11), the moved one twice.
            EXPECT_LT(max_abs_diff(k1, k2), 4e-3f * scale) << "layer " << il << ", delta " << delta;
            // Values do not move; they differ only by the rounding of the layers below.
            EXPECT_LT(max_abs_diff(v1, v2), 4e-3f * scale) << "layer " << il << ", delta " << delta;
            (info.layers[static_cast<size_t>(il)].sliding() ? saw_sliding : saw_global) = true;
        }
        EXPECT_TRUE(saw_global && saw_sliding);
    }
}

TEST_F(PicAssembly, BadInputIsRefusedWithAReason) {
    const auto A = prefill_document(*model_, a_, pool_);
    RecomputeOptions bad;
    bad.selector = "prophet";
    EXPECT_THROW(assemble_documents(*model_, {&A}, bad, pool_), std::invalid_argument);
    EXPECT_THROW(assemble_documents(*model_, {}, RecomputeOptions{}, pool_), std::invalid_argument);
    RecomputeOptions ratio;
    ratio.selector = "cacheblend";
    ratio.ratio = 0;
    EXPECT_THROW(assemble_documents(*model_, {&A}, ratio, pool_), std::invalid_argument);
    auto missing = A;
    missing.rows.pop_back();
    try {
        assemble_documents(*model_, {&A, &missing}, RecomputeOptions{}, pool_);
        ADD_FAILURE() << "a document without every layer's rows was assembled";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("document 2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(assemble_documents(*model_, {&A, &A}, RecomputeOptions{}, pool_, 30),
                 std::length_error);
}

TEST_F(PicAssembly, ATokenFilterThatKeepsEveryRowChangesNothing) {
    const auto& info = model_->info();
    std::vector<int32_t> pos(a_.size());
    std::iota(pos.begin(), pos.end(), 0);
    const auto n = std::ssize(a_);
    ModelMemory plain = make_assembled_memory(info, 64), filtered = make_assembled_memory(info, 64);
    model_->forward(a_.data(), pos.data(), n, plain, {}, nullptr, pool_);
    TokenFilter keep_all;
    keep_all.after_layer = 1;
    keep_all.keep = [&] {
        std::vector<int64_t> all(static_cast<size_t>(n));
        std::iota(all.begin(), all.end(), 0);
        return all;
    };
    model_->forward(a_.data(), pos.data(), n, filtered, {}, nullptr, pool_, nullptr, nullptr,
                    &keep_all);
    for (int il = 0; il < info.n_layer; ++il) {
        std::vector<float> k1, v1, k2, v2;
        std::vector<int32_t> p1, p2;
        plain.layer(il).read_rows(0, 1000, k1, v1, p1);
        filtered.layer(il).read_rows(0, 1000, k2, v2, p2);
        EXPECT_EQ(k1, k2);
        EXPECT_EQ(v1, v2);
    }
    TokenFilter none;
    none.after_layer = 0;
    none.keep = [] { return std::vector<int64_t>{}; };
    ModelMemory m = make_assembled_memory(info, 64);
    model_->forward(a_.data(), pos.data(), n, m, {}, nullptr, pool_, nullptr, nullptr, &none);
    EXPECT_EQ(m.layer(0).n_tokens(), n);
    EXPECT_EQ(m.layer(1).n_tokens(), 0);
    TokenFilter wrong;
    wrong.after_layer = 0;
    wrong.keep = [] { return std::vector<int64_t>{3, 1}; };
    ModelMemory w = make_assembled_memory(info, 64);
    EXPECT_THROW(
        model_->forward(a_.data(), pos.data(), n, w, {}, nullptr, pool_, nullptr, nullptr, &wrong),
        std::invalid_argument);
    std::vector<float> logits(static_cast<size_t>(info.n_vocab));
    EXPECT_THROW(model_->forward(a_.data(), pos.data(), n, w, {n - 1}, logits.data(), pool_,
                                 nullptr, nullptr, &keep_all),
                 std::invalid_argument);
}

TEST_F(PicAssembly, EpicNeedsOnlyTheLastRowsOfEachDocumentInSlidingLayers) {
    // What a project stores: every global row, and in sliding layers each section's last W - 1
    // rows. EPIC's tokens see nothing else there, so it answers as with every row; CacheBlend's
    // tokens past the check layer would, so it is refused, naming the layer.
    const auto A = prefill_document(*model_, a_, pool_);
    const auto B = prefill_document(*model_, b_, pool_);
    const auto C = prefill_document(*model_, c_, pool_);
    RecomputeOptions o;
    o.selector = "epic";
    o.epic_tokens = 4;
    auto all = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    const auto& info = model_->info();
    ModelMemory stored = make_assembled_memory(info, 512);
    std::vector<int64_t> starts;
    std::vector<int32_t> tokens;
    for (const auto* d : {&A, &B, &C}) {
        starts.push_back(std::ssize(tokens));
        for (const auto& r : d->rows)
            import_as_stored(stored, info, r, static_cast<int32_t>(starts.back()));
        tokens.insert(tokens.end(), d->tokens.begin(), d->tokens.end());
    }
    std::vector<int32_t> u;
    const auto st = recompute_documents(*model_, stored, tokens, starts, o, pool_, &u);
    EXPECT_EQ(u, all.recompute_positions);
    EXPECT_EQ(st.recompute_set, 8);
    EXPECT_EQ(st.global.rows_reused, st.global.layers * (std::ssize(tokens) - 8));
    EXPECT_LT(st.sliding.rows_reused, st.sliding.layers * (std::ssize(tokens) - 8));
    AssembledContext a;
    a.memory = std::move(stored);
    a.n_past = std::ssize(tokens);
    EXPECT_LT(max_abs_diff(after(a), after(all)), kSameBatches);

    // CacheBlend on the same stored rows: refused, for a sliding layer past its check layer
    // (the layers up to it recompute every forwarded row, so the tails suffice there).
    ModelMemory again = make_assembled_memory(info, 512);
    for (const auto* d : {&A, &B})
        for (const auto& r : d->rows)
            import_as_stored(again, info, r, d == &A ? 0 : static_cast<int32_t>(a_.size()));
    RecomputeOptions cb;
    cb.selector = "cacheblend";
    cb.check_layer = 0;
    const auto ab = concat({&a_, &b_});
    try {
        recompute_documents(*model_, again, ab, {0, std::ssize(a_)}, cb, pool_, nullptr);
        ADD_FAILURE() << "cacheblend ran without the sliding rows it attends to";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("cacheblend"), std::string::npos) << e.what();
        // Layer 0 (the check layer) recomputes its whole run; the first sliding layer after it
        // is where rows are missing.
        int first_sliding_after = -1;
        for (int il = cb.check_layer + 1; il < info.n_layer && first_sliding_after < 0; ++il)
            if (info.layers[static_cast<size_t>(il)].sliding())
                first_sliding_after = il;
        ASSERT_GT(first_sliding_after, cb.check_layer);
        EXPECT_NE(std::string(e.what()).find("layer " + std::to_string(first_sliding_after)),
                  std::string::npos)
            << e.what();
    }
}
