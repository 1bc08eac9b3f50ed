// Position-independent caching on tiny hybrid models (issue 7): tiny `granitehybrid` (Mamba-2
// + NoPE attention) and `qwen3next` (Gated DeltaNet + attention with partial RoPE) written by
// the tests. Documents are prefilled on their own, assembled with a state initialiser
// (pic_assembly.h, state_initialiser.h); the references are a cold prefill of the same
// concatenation through an ordinary session (logits) and a joint run's recurrent states.
#include "engine/linearkv/pic_assembly.h"
#include "engine/memory/kv_rows.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/model/model.h"
#include "engine/session/session.h"
#include "test_support.h"
#include "tiny_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

using namespace spanscope;
using namespace spanscope::test;

namespace {

enum class Arch { Granite, Qwen };

// The recurrent state proper (Mamba-2 ssm, Gated DeltaNet s), without the conv tail.
const std::vector<float>& state_matrix(const RecurrentMemory& m) {
    return m.kind() == RecurrentKind::Mamba2 ? m.mamba2().ssm : m.gated_deltanet().s;
}
const std::vector<float>& state_matrix(const RecurrentLayerState& s) {
    return s.mamba2 ? s.mamba2->ssm : s.gated_deltanet->s;
}
const std::vector<float>& conv_tail(const RecurrentMemory& m) {
    return m.kind() == RecurrentKind::Mamba2 ? m.mamba2().conv : m.gated_deltanet().conv;
}

// ‖a − b‖_F / ‖b‖_F.
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        den += double(b[i]) * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-300));
}

class PicHybrid : public ::testing::TestWithParam<Arch> {
protected:
    void SetUp() override {
        dir_ = temp_dir();
        const std::string path = dir_ + "/m.gguf";
        if (GetParam() == Arch::Granite)
            write_tiny_granite_hybrid(path, TinyGraniteHybridConfig{});
        else
            write_tiny_qwen3next(path, TinyQwen3NextConfig{});
        model_ = Model::load(path);
        const int V = model_->info().n_vocab;
        a_ = random_tokens(23, V, 1);
        b_ = random_tokens(31, V, 2);
        c_ = random_tokens(17, V, 3);
        question_ = random_tokens(6, V, 4);
        question_.erase(question_.begin()); // no BOS in the question
        ASSERT_TRUE(model_->info().hybrid());
        ASSERT_TRUE(model_->info().layers[0].recurrent());
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    CachedDocument prefill(const std::vector<int32_t>& t) {
        return prefill_document(*model_, t, pool_, 512, nullptr, /*track_transition=*/true);
    }
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
    // A joint run's memory after `context` (positions from 0, one memory).
    ModelMemory joint(const std::vector<int32_t>& context) {
        ModelMemory mem = make_memory(model_->info(), 512, 512);
        std::vector<int32_t> pos(context.size());
        std::iota(pos.begin(), pos.end(), 0);
        model_->forward(context.data(), pos.data(), std::ssize(context), mem, {}, nullptr, pool_);
        return mem;
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

// `full` restarts the recurrent layers from zero at position 0 and recomputes every token:
// a cold prefill of the concatenation, whatever the order and the initialiser.
TEST_P(PicHybrid, FullRecomputeEqualsAColdPrefillInAnyOrder) {
    const auto A = prefill(a_), B = prefill(b_), C = prefill(c_);
    RecomputeOptions o;
    o.selector = "full";
    o.state_init = StateInitialiser::Exact; // ignored by full
    for (const auto& order : {std::vector<const CachedDocument*>{&A, &B, &C},
                              std::vector<const CachedDocument*>{&C, &A, &B}}) {
        auto a = assemble_documents(*model_, order, o, pool_);
        const auto ref = cold(a.tokens);
        EXPECT_EQ(a.stats.recompute_set, a.n_past);
        EXPECT_EQ(a.stats.recurrent.rows_recomputed, a.n_past * a.stats.recurrent.layers);
        EXPECT_GT(a.stats.recurrent.layers, 0);
        const float err = max_abs_diff(after(a), ref);
        EXPECT_LT(err, 1e-3f * std::max(1.0f, max_abs(ref))) << err;
    }
}

// One document reused as it was prefilled: exact reuse (no recompute) for the initialisers
// that keep its state; the zero initialiser forgets it and differs.
TEST_P(PicHybrid, OneDocumentWithoutRecomputeIsExactReuse) {
    const auto A = prefill(a_);
    const auto ref = cold(a_);
    for (const auto init : {StateInitialiser::SingleBlock, StateInitialiser::Exact}) {
        RecomputeOptions o;
        o.state_init = init;
        auto a = assemble_documents(*model_, {&A}, o, pool_);
        EXPECT_EQ(a.stats.recompute_set, 0);
        EXPECT_LT(max_abs_diff(after(a), ref), 1e-4f * std::max(1.0f, max_abs(ref)))
            << state_initialiser_name(init);
    }
    RecomputeOptions z;
    z.state_init = StateInitialiser::Zero;
    auto a = assemble_documents(*model_, {&A}, z, pool_);
    EXPECT_GT(max_abs_diff(after(a), ref), 1e-2f);
}

// What each initialiser puts in the recurrent layers (state_initialiser.h): zero a zero state
// and tail, single-block the last document's own state, both standing for the whole context.
TEST_P(PicHybrid, InitialisersGiveZeroOrTheLastDocumentsState) {
    const auto A = prefill(a_), B = prefill(b_), C = prefill(c_);
    const auto& info = model_->info();
    for (const auto& order : {std::vector<const CachedDocument*>{&A, &B, &C},
                              std::vector<const CachedDocument*>{&B, &C, &A}}) {
        RecomputeOptions o;
        o.state_init = StateInitialiser::Zero;
        auto z = assemble_documents(*model_, order, o, pool_);
        o.state_init = StateInitialiser::SingleBlock;
        auto s = assemble_documents(*model_, order, o, pool_);
        size_t k = 0;
        for (int il = 0; il < info.n_layer; ++il) {
            if (!info.layers[static_cast<size_t>(il)].recurrent())
                continue;
            EXPECT_EQ(max_abs(state_matrix(z.memory.recurrent(il))), 0.0f);
            EXPECT_EQ(max_abs(conv_tail(z.memory.recurrent(il))), 0.0f);
            EXPECT_EQ(z.memory.recurrent(il).n_tokens(), z.n_past);
            const auto& last = order.back()->states[k];
            ASSERT_EQ(last.layer, il);
            EXPECT_EQ(state_matrix(s.memory.recurrent(il)), state_matrix(last));
            EXPECT_EQ(conv_tail(s.memory.recurrent(il)), last.conv());
            EXPECT_GT(max_abs(state_matrix(last)), 0.0f);
            EXPECT_EQ(s.memory.recurrent(il).n_tokens(), s.n_past);
            ++k;
        }
        EXPECT_EQ(k, order.back()->states.size());
    }
}

// Exact composition against a joint run. The first layer's input is the token embedding only,
// so when each document is prefilled from the previous document's conv tail (what a joint run
// has at the seam) its layer-0 contribution is the joint run's and `exact` equals the joint
// state there to fp32 rounding. Prefilled on their own (zero tails, the PIC default), the
// first d_conv − 1 tokens of each document see other inputs: the known difference. Deeper
// recurrent layers see the attention layers' other context and differ too.
TEST_P(PicHybrid, ExactCompositionEqualsTheJointRunWithTheRightConvTails) {
    const auto& info = model_->info();
    const std::vector<const std::vector<int32_t>*> parts{&a_, &b_, &c_};
    std::vector<CachedDocument> seamed;
    for (size_t d = 0; d < parts.size(); ++d) {
        const auto& t = *parts[d];
        ModelMemory mem = make_assembled_memory(info, std::ssize(t), true);
        for (const auto& st : d ? seamed.back().states : std::vector<RecurrentLayerState>{}) {
            auto& rm = mem.recurrent(st.layer);
            (rm.kind() == RecurrentKind::Mamba2 ? rm.mamba2().conv : rm.gated_deltanet().conv) =
                st.conv();
        }
        std::vector<int32_t> pos(t.size());
        std::iota(pos.begin(), pos.end(), 0);
        model_->forward(t.data(), pos.data(), std::ssize(t), mem, {}, nullptr, pool_);
        CachedDocument doc = prefill(t); // rows and the shape of the states
        for (auto& st : doc.states) {
            const auto& rm = mem.recurrent(st.layer);
            if (st.mamba2)
                st.mamba2 = rm.mamba2();
            else
                st.gated_deltanet = rm.gated_deltanet();
        }
        seamed.push_back(std::move(doc));
    }
    const auto A = prefill(a_), B = prefill(b_), C = prefill(c_);
    const auto J = joint(concat({&a_, &b_, &c_}));
    RecomputeOptions o;
    o.state_init = StateInitialiser::Exact;
    auto with_tails = assemble_documents(*model_, {&seamed[0], &seamed[1], &seamed[2]}, o, pool_);
    auto own = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    o.state_init = StateInitialiser::SingleBlock;
    auto single = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    const auto& j0 = state_matrix(J.recurrent(0));
    const double e_tails = rel_err(state_matrix(with_tails.memory.recurrent(0)), j0);
    const double e_own = rel_err(state_matrix(own.memory.recurrent(0)), j0);
    const double e_single = rel_err(state_matrix(single.memory.recurrent(0)), j0);
    std::printf("layer 0 relative state error: exact with seam tails %.3g, exact with own "
                "tails %.3g, single-block %.3g\n",
                e_tails, e_own, e_single);
    EXPECT_LT(e_tails, 1e-4);
    EXPECT_GT(e_own, 10 * e_tails + 1e-6); // the d_conv − 1 tokens at each seam
    EXPECT_EQ(conv_tail(with_tails.memory.recurrent(0)), seamed[2].states[0].conv());
    // The last document's layer-0 tail is the joint run's (its inputs are the embeddings).
    EXPECT_LT(max_abs_diff(conv_tail(own.memory.recurrent(0)), conv_tail(J.recurrent(0))),
              1e-5f * std::max(1.0f, max_abs(conv_tail(J.recurrent(0)))));
    int deeper = 0;
    for (int il = 1; il < info.n_layer; ++il)
        if (info.layers[static_cast<size_t>(il)].recurrent()) {
            ++deeper;
            EXPECT_GT(rel_err(state_matrix(with_tails.memory.recurrent(il)),
                              state_matrix(J.recurrent(il))),
                      1e-4)
                << "layer " << il << ": its input depends on the attention layers' context";
        }
    EXPECT_GT(deeper, 0);
}

// EPIC on a hybrid model: the first k tokens of each later document run through every layer,
// the recurrent layers absorbing them at their positions; afterwards the recurrent layers stand
// for the whole context with the initialiser's conv tail, and the question continues at n_past.
TEST_P(PicHybrid, EpicRunsTheSeamsThroughTheRecurrentLayers) {
    const auto A = prefill(a_), B = prefill(b_), C = prefill(c_);
    RecomputeOptions o;
    o.selector = "epic";
    o.epic_tokens = 5;
    auto none = assemble_documents(*model_, {&A, &B, &C}, RecomputeOptions{}, pool_);
    auto e = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    const auto sa = static_cast<int32_t>(a_.size()), sb = static_cast<int32_t>(b_.size());
    std::vector<int32_t> want;
    for (int32_t i = 0; i < 5; ++i)
        want.push_back(sa + i);
    for (int32_t i = 0; i < 5; ++i)
        want.push_back(sa + sb + i);
    EXPECT_EQ(e.recompute_positions, want);
    EXPECT_EQ(e.stats.recurrent.rows_recomputed, 10 * e.stats.recurrent.layers);
    const auto& info = model_->info();
    for (int il = 0; il < info.n_layer; ++il) {
        if (!info.layers[static_cast<size_t>(il)].recurrent())
            continue;
        EXPECT_EQ(e.memory.recurrent(il).n_tokens(), e.n_past);
        EXPECT_EQ(conv_tail(e.memory.recurrent(il)), conv_tail(none.memory.recurrent(il)));
        EXPECT_GT(
            rel_err(state_matrix(e.memory.recurrent(il)), state_matrix(none.memory.recurrent(il))),
            1e-6)
            << "layer " << il << " absorbed U";
    }
    // The conv-tail policy changes what U's first tokens see.
    o.conv_tail = ConvTailPolicy::Zero;
    auto z = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    o.conv_tail = ConvTailPolicy::Previous;
    auto p = assemble_documents(*model_, {&A, &B, &C}, o, pool_);
    EXPECT_GT(rel_err(state_matrix(z.memory.recurrent(0)), state_matrix(e.memory.recurrent(0))),
              1e-6);
    EXPECT_GT(rel_err(state_matrix(p.memory.recurrent(0)), state_matrix(z.memory.recurrent(0))),
              1e-6);
    const auto l = after(e);
    for (const float x : l)
        ASSERT_TRUE(std::isfinite(x));
}

TEST_P(PicHybrid, CacheBlendAndExactWithoutTransitionsAreRefused) {
    const auto A = prefill(a_), B = prefill(b_);
    RecomputeOptions o;
    o.selector = "cacheblend";
    try {
        assemble_documents(*model_, {&A, &B}, o, pool_);
        ADD_FAILURE() << "cacheblend on a hybrid model was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("hybrid"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_conv_tail_policy("left"), std::invalid_argument);
    EXPECT_EQ(parse_conv_tail_policy("previous"), ConvTailPolicy::Previous);
    o.selector = "none";
    o.conv_tail = static_cast<ConvTailPolicy>(7);
    EXPECT_THROW(assemble_documents(*model_, {&A, &B}, o, pool_), std::invalid_argument);
    // A document without its recurrent states cannot initialise the recurrent layers.
    CachedDocument bare = B;
    bare.states.pop_back();
    EXPECT_THROW(assemble_documents(*model_, {&A, &bare}, RecomputeOptions{}, pool_),
                 std::invalid_argument);
    // Gated DeltaNet: exact needs the transition matrices, kept only when asked.
    const auto plain = prefill_document(*model_, b_, pool_);
    o.conv_tail = ConvTailPolicy::Same;
    o.state_init = StateInitialiser::Exact;
    if (GetParam() == Arch::Qwen) {
        EXPECT_FALSE(plain.states[0].gated_deltanet->tracks_transition());
        EXPECT_TRUE(B.states[0].gated_deltanet->tracks_transition());
        EXPECT_THROW(assemble_documents(*model_, {&A, &plain}, o, pool_), std::invalid_argument);
    } else {
        EXPECT_NO_THROW(assemble_documents(*model_, {&A, &plain}, o, pool_)); // log-decay sums
    }
}

// Keys moved by Δ equal keys computed at the new position: partial NeoX RoPE (qwen3next, the
// first rope_dims of each head) and NoPE (granitehybrid) alike.
TEST_P(PicHybrid, AMovedKeyEqualsTheKeyComputedAtTheNewPosition) {
    const auto A = prefill(a_);
    const auto& info = model_->info();
    ModelMemory at100 = make_assembled_memory(info, 200);
    for (int il = 0; il < info.n_layer; ++il)
        if (at100.is_recurrent(il))
            at100.recurrent(il).reposition(100);
    std::vector<int32_t> pos(a_.size());
    std::iota(pos.begin(), pos.end(), 100);
    model_->forward(a_.data(), pos.data(), std::ssize(a_), at100, {}, nullptr, pool_);
    ModelMemory moved = make_assembled_memory(info, 200), still = make_assembled_memory(info, 200);
    for (const auto& r : A.rows) {
        import_rows(moved, info, r, 100, 1000);
        LayerRows shifted = r;
        shifted.pos_begin = 100; // the same keys at the new positions, not rotated
        import_rows(still, info, shifted, 0, 1000);
    }
    ASSERT_FALSE(A.rows.empty());
    for (const auto& r : A.rows) {
        std::vector<float> k1, v1, k2, v2, k3, v3;
        std::vector<int32_t> p1, p2, p3;
        at100.layer(r.layer).read_rows(100, 200, k1, v1, p1);
        moved.layer(r.layer).read_rows(100, 200, k2, v2, p2);
        still.layer(r.layer).read_rows(100, 200, k3, v3, p3);
        ASSERT_EQ(p1, p2);
        const float scale = max_abs(k1);
        EXPECT_LT(max_abs_diff(k1, k2), 4e-3f * scale) << "layer " << r.layer;
        const int rope_dims = info.layers[static_cast<size_t>(r.layer)].rope_dims;
        if (rope_dims > 0) // the unmoved keys are wrong where RoPE rotates
            EXPECT_GT(max_abs_diff(k1, k3), 5e-2f * scale) << "layer " << r.layer;
        else
            EXPECT_EQ(k2, k3) << "NoPE: nothing to move";
    }
}

INSTANTIATE_TEST_SUITE_P(Archs, PicHybrid, ::testing::Values(Arch::Granite, Arch::Qwen),
                         [](const auto& info) {
                             return info.param == Arch::Granite ? "GraniteHybrid" : "Qwen3Next";
                         });
