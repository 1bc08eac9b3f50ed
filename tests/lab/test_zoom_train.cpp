// SEKV's trained zoom-in (issue 8), the training: the learning-rate schedule, AdamW by hand,
// the minibatches, training lowering the held-out losses and exact resumption from a checkpoint.
// The fixture: zoom_model_fixture.h.
#include "lab/router/zoom_model.h"
#include "lab/router/zoom_train.h"
#include "zoom_model_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

using namespace spanscope;
using namespace spanscope::test;

TEST(ZoomTrain, LearningRateWarmsUpAndDecays) {
    ZoomTrainOptions o;
    o.steps = 110;
    o.warmup = 10;
    o.lr = 1.0;
    o.min_lr_ratio = 0.1;
    EXPECT_NEAR(zoom_learning_rate(o, 0), 0.1, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 9), 1.0, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 10), 1.0, 1e-12);
    EXPECT_NEAR(zoom_learning_rate(o, 60), 0.55, 1e-12); // half way down the cosine
    EXPECT_NEAR(zoom_learning_rate(o, 110), 0.1, 1e-12);
}

TEST(ZoomTrain, AdamWStepByHand) {
    ZoomTrainOptions o;
    o.clip = 0;
    o.weight_decay = 0.5;
    auto p = tiny_params(1);
    auto s = start_training(p);
    RouterParams g = p;
    for (auto& t : zoom_tensors(g))
        std::fill(t.values->begin(), t.values->end(), 0.0f);
    g.layers[0].w[0] = 2.0f;      // decayed matrix
    g.layers[0].theta[1] = -3.0f; // not decayed
    const float w0 = p.layers[0].w[0], w1 = p.layers[0].w[1], th1 = p.layers[0].theta[1];
    adamw_update(s, g, 0.01, o);
    // First step: m̂ = g, v̂ = g², so the step is lr · g / (|g| + eps) = ±lr.
    EXPECT_NEAR(s.params.layers[0].w[0], w0 - 0.01 * 0.5 * w0 - 0.01, 1e-6);
    EXPECT_NEAR(s.params.layers[0].w[1], w1 - 0.01 * 0.5 * w1, 1e-6);
    EXPECT_NEAR(s.params.layers[0].theta[1], th1 + 0.01, 1e-6);
    // Clipping scales the whole gradient: a norm of 10 clipped to 1.
    o.clip = 1.0;
    RouterParams g2 = g;
    for (auto& t : zoom_tensors(g2))
        std::fill(t.values->begin(), t.values->end(), 0.0f);
    g2.layers[0].w[0] = 6.0f;
    g2.layers[0].w[1] = 8.0f;
    EXPECT_NEAR(adamw_update(s, g2, 0.0, o), 10.0, 1e-9);
    // ... and the moments take the clipped gradient (0.6, 0.8), not the raw one: from a fresh
    // state, m = (1 − β1) g and v = (1 − β2) g².
    auto fresh = start_training(p);
    EXPECT_NEAR(adamw_update(fresh, g2, 0.0, o), 10.0, 1e-9);
    auto names = zoom_tensors(fresh.params);
    size_t wi = names.size();
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i].values == &fresh.params.layers[0].w)
            wi = i;
    ASSERT_LT(wi, names.size());
    EXPECT_NEAR(fresh.m[wi][0], (1 - o.beta1) * 0.6, 1e-7);
    EXPECT_NEAR(fresh.m[wi][1], (1 - o.beta1) * 0.8, 1e-7);
    EXPECT_NEAR(fresh.v[wi][0], (1 - o.beta2) * 0.36, 1e-9);
    EXPECT_NEAR(fresh.v[wi][1], (1 - o.beta2) * 0.64, 1e-9);
}

TEST(ZoomTrain, MinibatchesDependOnSeedAndStepOnly) {
    ZoomTrainOptions o;
    o.batch = 16;
    const auto a = zoom_minibatch(o, 5, 100);
    EXPECT_EQ(a, zoom_minibatch(o, 5, 100));
    EXPECT_NE(a, zoom_minibatch(o, 6, 100));
    o.seed = 2;
    EXPECT_NE(a, zoom_minibatch(o, 5, 100));
    for (const auto i : a)
        EXPECT_TRUE(i >= 0 && i < 100);
}

// Training lowers every loss component on held-out recordings; a run stopped at a checkpoint
// and resumed ends with the same parameters as one that ran through.
TEST(ZoomTrain, LowersHeldOutLossesAndResumesExactly) {
    auto p = tiny_params(3);
    auto train = make_fixture(p, {41, 42, 43, 44, 45, 46});
    auto held = make_fixture(p, {51, 52});
    ThreadPool pool(2);
    ZoomTrainOptions o;
    o.steps = 120;
    o.batch = 24;
    o.warmup = 10;
    o.lr = 1e-2;
    o.eval_every = 40;
    o.checkpoint_every = 40;
    o.loss.w_recon = 1.0;
    o.loss.w_budget = 0.05;
    calibrate_theta(p, train->sets, train->items, 0.5);
    const auto before = zoom_loss(p, held->sets, held->items, o.loss, nullptr, pool);
    auto state = start_training(p);
    const auto ckpt =
        (std::filesystem::temp_directory_path() / "spanscope-zoom-ckpt-test.gguf").string();
    std::filesystem::remove(ckpt);
    ZoomLoss last;
    train_zoom(state, train->sets, train->items, held->sets, held->items, o, pool, ckpt, "cfg",
               [&](const ZoomProgress& pr) {
                   if (pr.evaluated)
                       last = pr.held_out;
               });
    EXPECT_EQ(state.step, 120);
    EXPECT_LT(last.zoom, before.zoom);
    EXPECT_LT(last.distill, before.distill);
    EXPECT_LT(last.recon, before.recon);
    EXPECT_LT(last.total, before.total);

    // Interrupted after step 50 (the last checkpoint: step 40), resumed to 120.
    struct Stop {};
    std::filesystem::remove(ckpt);
    auto s1 = start_training(p);
    EXPECT_THROW(train_zoom(s1, train->sets, train->items, held->sets, held->items, o, pool, ckpt,
                            "cfg",
                            [](const ZoomProgress& pr) {
                                if (pr.step == 50)
                                    throw Stop{};
                            }),
                 Stop);
    auto resumed = load_zoom_checkpoint(ckpt, "cfg", p);
    EXPECT_EQ(resumed.step, 40);
    train_zoom(resumed, train->sets, train->items, held->sets, held->items, o, pool, "", "cfg",
               nullptr);
    auto a = zoom_tensors(resumed.params);
    auto b = zoom_tensors(state.params);
    for (size_t t = 0; t < a.size(); ++t)
        EXPECT_EQ(*a[t].values, *b[t].values) << a[t].name;
    EXPECT_THROW(load_zoom_checkpoint(ckpt, "other", p), std::runtime_error);
    auto bigger = tiny_params(3);
    bigger.layers[0].gate.n_hidden = kHidden + 1;
    bigger = init_router_params(bigger.layers, 3);
    EXPECT_THROW(load_zoom_checkpoint(ckpt, "cfg", bigger), std::runtime_error);
    std::filesystem::remove(ckpt);
}
