// SEKV's trained zoom-in (issue 8): the reference routers of `zoom-train --compare`
// (zoom_reference.h) against the training's forward. The fixture: zoom_model_fixture.h.
#include "lab/router/zoom_model.h"
#include "lab/router/zoom_reference.h"
#include "zoom_model_fixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace spanscope;
using namespace spanscope::test;

TEST(ZoomReference, TrainingFreeAtItsExtremes) {
    // Every span expanded at full rank: the reference is the trained forward with every span
    // expanded and the rank gate ignored (full_rank), up to rounding; none expanded: no recall.
    auto p = tiny_params(5);
    p.layers[0].theta.assign(kHeads, -1e3f);
    auto f = make_fixture(p, {31, 32});
    ThreadPool pool(2);
    ZoomLossOptions o;
    o.full_rank = true;
    const auto all = zoom_loss(p, f->sets, f->items, o, nullptr, pool);
    ASSERT_DOUBLE_EQ(all.expansion_rate, 1.0);
    ZoomReferenceOptions ro;
    ro.expand_rate = 1.0;
    const auto ref = router_reference(f->sets, f->items, ro, pool);
    EXPECT_EQ(ref.examples, static_cast<int64_t>(f->items.size()));
    EXPECT_DOUBLE_EQ(ref.expansion_rate, 1.0);
    EXPECT_DOUBLE_EQ(ref.label_recall, 1.0);
    EXPECT_NEAR(ref.distill, all.distill, 1e-4 * all.distill); // float against double sums
    ro.expand_rate = 0.0;
    const auto none = router_reference(f->sets, f->items, ro, pool);
    EXPECT_EQ(none.expansion_rate, 0.0);
    EXPECT_EQ(none.label_recall, 0.0);
    EXPECT_GT(none.distill, ref.distill);
    ro.expand_rate = 1.5;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
}

// The reference with a trained W, each head alone, decides as the training's forward after
// calibrate_theta at the same rate (two implementations of one rule: zoom_forward's logits
// (zoom_example_pass.cpp)
// against θ, zoom_reference.cpp's relevances against their quantile); with the KV group's union
// it expands at least as much and recalls at least as many labels; a W of zeros is the
// training-free router.
TEST(ZoomReference, TrainedWIsTheTrainingsForward) {
    auto p = tiny_params(7);
    auto f = make_fixture(p, {41, 42, 43});
    ThreadPool pool(2);
    ZoomLossOptions lo;
    lo.full_rank = true; // the reference reconstructs every factor at full rank
    for (const double rate : {0.25, 0.5}) {
        auto at = p;
        calibrate_theta(at, f->sets, f->items, rate);
        const auto fw = zoom_loss(at, f->sets, f->items, lo, nullptr, pool);
        ZoomReferenceOptions ro;
        ro.expand_rate = rate;
        ro.share_group = false;
        ro.trained = &p;
        const auto ref = router_reference(f->sets, f->items, ro, pool);
        EXPECT_DOUBLE_EQ(ref.expansion_rate, fw.expansion_rate) << "rate " << rate;
        EXPECT_DOUBLE_EQ(ref.label_recall, fw.label_recall) << "rate " << rate;
        EXPECT_NEAR(ref.distill, fw.distill, 1e-4 * fw.distill) << "rate " << rate;
        ro.share_group = true;
        const auto group = router_reference(f->sets, f->items, ro, pool);
        EXPECT_GT(group.expansion_rate, ref.expansion_rate) << "rate " << rate;
        EXPECT_GE(group.label_recall, ref.label_recall) << "rate " << rate;
        // A W of zeros is the training-free router.
        ro.trained = nullptr;
        const auto free = router_reference(f->sets, f->items, ro, pool);
        auto zero = p;
        std::fill(zero.layers[0].w.begin(), zero.layers[0].w.end(), 0.0f);
        ro.trained = &zero;
        const auto at_zero = router_reference(f->sets, f->items, ro, pool);
        EXPECT_EQ(at_zero.expansion_rate, free.expansion_rate) << "rate " << rate;
        EXPECT_EQ(at_zero.distill, free.distill) << "rate " << rate;
    }
    // Each head reads its own W [n_head][d_out][head_dim]: with W nonzero for head 3 only, head
    // 2's examples (alone; heads 2 and 3 share KV head 1) are decided as by the training-free
    // router, head 3's are not. (Reading W by KV head, by the group's first head, or head 0's
    // for every head fails one of the two.)
    auto one = p;
    const size_t per_head = static_cast<size_t>(kDout) * kDim;
    for (size_t j = 0; j < one.layers[0].w.size(); ++j)
        if (j / per_head != 3)
            one.layers[0].w[j] = 0.0f;
    for (const int head : {2, 3}) {
        std::vector<ZoomItem> items;
        for (const auto& item : f->items)
            if (item.second.head == head)
                items.push_back(item);
        ZoomReferenceOptions ro;
        ro.share_group = false;
        ro.expand_rate = 0.4;
        const auto free = router_reference(f->sets, items, ro, pool);
        ro.trained = &one;
        const auto w = router_reference(f->sets, items, ro, pool);
        if (head == 2)
            EXPECT_EQ(w.distill, free.distill);
        else
            EXPECT_NE(w.distill, free.distill);
    }
    // Refused: a parameter file without the examples' layer; W of another head split or head
    // dimension with the same number of weights (4·4·8 = 2·4·16 = 4·2·16); an example whose head
    // or query lies outside its layer.
    ZoomReferenceOptions ro;
    auto other = p;
    other.layers[0].layer = 5;
    ro.trained = &other;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
    auto heads = p;
    heads.layers[0].n_head = kHeads / 2;
    heads.layers[0].head_dim = kDim * 2;
    ro.trained = &heads;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
    auto dims = p;
    dims.layers[0].head_dim = kDim * 2;
    dims.layers[0].d_out = kDout / 2;
    ro.trained = &dims;
    EXPECT_THROW(router_reference(f->sets, f->items, ro, pool), std::invalid_argument);
    ro.trained = &p;
    for (const int field : {0, 1, 2}) {
        auto bad = f->items;
        if (field == 0)
            bad[0].second.head = kHeads;
        else if (field == 1)
            bad[0].second.head = -1;
        else
            bad[0].second.query = f->records[0].n_queries();
        EXPECT_THROW(router_reference(f->sets, bad, ro, pool), std::invalid_argument) << field;
    }
}

// τ calibrated per query (ZoomReferenceOptions::tau_per_query, as inference calibrates on a
// question): each head alone, every query expands round(rate · its visible spans) of them,
// whatever the router, where a quantile over all the examples lets queries differ.
TEST(ZoomReference, TauPerQueryExpandsEachQuerysShare) {
    auto p = tiny_params(7);
    auto f = make_fixture(p, {51, 52, 53});
    ThreadPool pool(2);
    for (const double rate : {0.25, 0.5}) {
        double expected = 0, spans = 0;
        for (const auto& [si, ex] : f->items) {
            const auto nv = visible_span_count(*f->sets[static_cast<size_t>(si)].record, ex.query);
            expected += static_cast<double>(std::llround(rate * static_cast<double>(nv)));
            spans += static_cast<double>(nv);
        }
        ASSERT_GT(spans, 0);
        double per_query[2] = {0, 0};
        for (const bool trained : {false, true}) {
            ZoomReferenceOptions ro;
            ro.expand_rate = rate;
            ro.share_group = false;
            ro.tau_per_query = true;
            ro.trained = trained ? &p : nullptr;
            const auto r = router_reference(f->sets, f->items, ro, pool);
            EXPECT_DOUBLE_EQ(r.expansion_rate, expected / spans)
                << "rate " << rate << (trained ? " trained" : " training-free");
            ro.tau_per_query = false;
            const auto global = router_reference(f->sets, f->items, ro, pool);
            EXPECT_NE(global.distill, r.distill) << "rate " << rate;
            per_query[trained] = r.distill;
        }
        // The trained column scores with W.
        EXPECT_NE(per_query[0], per_query[1]) << "rate " << rate;
    }
}
