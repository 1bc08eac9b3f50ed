// Training of SEKV's zoom-in parameters (issue 8): minibatches of recorded examples
// (zoom_model.h), AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization",
// Algorithm 2) with a linear warm-up and a cosine decay of the learning rate (Loshchilov &
// Hutter 2017, SGDR, eq. 5, one cycle), clipping of the global gradient norm (Pascanu et al.
// 2013, §3.2), seeded, and resumable from a checkpoint that holds the parameters, the
// optimiser's moments and the step: a run stopped and resumed takes the same steps as one that
// was not (each step's minibatch is drawn from the seed and the step number alone).
#pragma once

#include "lab/router/zoom_model.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spanscope {

struct ZoomTrainOptions {
    int64_t steps = 1500;
    int64_t batch = 64;         ///< examples per step
    double lr = 3e-3;           ///< peak learning rate
    int64_t warmup = 100;       ///< steps of linear warm-up from lr / warmup
    double min_lr_ratio = 0.1;  ///< the cosine decays to lr · min_lr_ratio at the last step
    double weight_decay = 0.01; ///< decoupled, on the matrices only (zoom_tensors)
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double clip = 1.0; ///< global gradient-norm clip (<= 0: none)
    uint64_t seed = 1;
    int64_t eval_every = 100; ///< steps between held-out evaluations (and curve points)
    int64_t checkpoint_every = 100;
    double init_expand_rate = 0.2; ///< θ is first calibrated to expand this share of spans
    /// The rank gates' starting output bias b2 (init_router_params): m ≈ σ(b2) at the start. On
    /// the recorded data b2 = 1 keeps every available component (m ≈ 0.73), as the
    /// training-free gate does; b2 = 0, the start until run 16 (docs/sekv.md), left the gates
    /// undecided, keeping a chance half of each span's components; negative values start them
    /// closed.
    double init_gate_bias = kZoomInitGateBias;
    ZoomLossOptions loss;
};

/// Learning rate at step (0-based): lr · (step + 1) / warmup during the warm-up, then
/// lr · (r + (1 − r) · (1 + cos(π · t)) / 2) with t = (step − warmup) / (steps − warmup),
/// r = min_lr_ratio.
double zoom_learning_rate(const ZoomTrainOptions& o, int64_t step);

/// The optimiser's state: first and second moments per trainable array (zoom_tensors order).
struct ZoomTrainState {
    RouterParams params;
    std::vector<std::vector<float>> m, v;
    int64_t step = 0; ///< steps taken
};

/// A fresh state: params, zero moments, step 0.
ZoomTrainState start_training(RouterParams params);

/// One AdamW update of state.params with `grad` (same shapes) at learning rate lr, after
/// clipping grad's global L2 norm to o.clip. Returns the norm before clipping.
/// Throws std::invalid_argument when the shapes differ.
double adamw_update(ZoomTrainState& state, RouterParams grad, double lr, const ZoomTrainOptions& o);

/// The minibatch of step `step`: o.batch items drawn uniformly with replacement from
/// [0, n_items) by a generator seeded with (o.seed, step).
std::vector<int64_t> zoom_minibatch(const ZoomTrainOptions& o, int64_t step, int64_t n_items);

/// Write a checkpoint (GGUF, atomically): the parameters (with their provenance and model),
/// the moments, the step and `config` (a string that must match on resume). Throws
/// std::system_error when it cannot be written.
void save_zoom_checkpoint(const ZoomTrainState& s, const std::string& config,
                          const std::string& path);

/// Read a checkpoint; its config must equal `config` and its shapes those of `like` (the
/// parameters a fresh run would start from). Throws std::runtime_error saying what differs.
ZoomTrainState load_zoom_checkpoint(const std::string& path, const std::string& config,
                                    const RouterParams& like);

/// One line of the training progress: the step's minibatch losses, or a held-out evaluation.
struct ZoomProgress {
    int64_t step = 0;
    double lr = 0, grad_norm = 0;
    ZoomLoss train; ///< this step's minibatch (before the update)
    bool evaluated = false;
    ZoomLoss held_out; ///< every held-out example, when evaluated
};

/// Train from `state` until o.steps: each step a minibatch of `train` (zoom_minibatch), its
/// loss and gradient (zoom_loss), one AdamW update; every eval_every steps (and at the last)
/// the loss on every `held_out` example; every checkpoint_every steps (and at the last) a
/// checkpoint when checkpoint_path is non-empty. `progress` is called after every step.
/// Throws std::invalid_argument for no training examples.
void train_zoom(ZoomTrainState& state, const std::vector<ZoomExampleSet>& train_sets,
                const std::vector<ZoomItem>& train, const std::vector<ZoomExampleSet>& held_sets,
                const std::vector<ZoomItem>& held_out, const ZoomTrainOptions& o, ThreadPool& pool,
                const std::string& checkpoint_path, const std::string& config,
                const std::function<void(const ZoomProgress&)>& progress);

} // namespace spanscope
