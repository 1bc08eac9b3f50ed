#include "lab/router/zoom_train.h"

#include "engine/gguf/gguf_reader.h"
#include "engine/gguf/gguf_writer.h"

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>

namespace spanscope {

namespace {

constexpr uint32_t kCheckpointVersion = 1;

std::vector<float> tensor_floats(const GgufFile& f, const std::string& name, size_t expect,
                                 const std::string& path) {
    const auto* t = f.find_tensor(name);
    if (!t)
        throw std::runtime_error(path + ": checkpoint has no tensor " + name);
    if (t->type != TensorType::F32 || t->n_elements() != static_cast<int64_t>(expect) ||
        t->nbytes != expect * sizeof(float))
        throw std::runtime_error(path + ": checkpoint tensor " + name + " has " +
                                 std::to_string(t->n_elements()) + " elements, expected " +
                                 std::to_string(expect));
    std::vector<float> v(expect);
    std::memcpy(v.data(), t->data, expect * sizeof(float));
    return v;
}

} // namespace

double zoom_learning_rate(const ZoomTrainOptions& o, int64_t step) {
    if (o.warmup > 0 && step < o.warmup)
        return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup);
    const int64_t span = std::max<int64_t>(1, o.steps - std::max<int64_t>(0, o.warmup));
    const double t =
        std::min(1.0, static_cast<double>(step - std::max<int64_t>(0, o.warmup)) / span);
    const double r = o.min_lr_ratio;
    return o.lr * (r + (1.0 - r) * 0.5 * (1.0 + std::cos(M_PI * t)));
}

ZoomTrainState start_training(RouterParams params) {
    ZoomTrainState s;
    s.params = std::move(params);
    for (const auto& t : zoom_tensors(s.params)) {
        s.m.emplace_back(t.values->size(), 0.0f);
        s.v.emplace_back(t.values->size(), 0.0f);
    }
    return s;
}

double adamw_update(ZoomTrainState& s, RouterParams grad, double lr, const ZoomTrainOptions& o) {
    auto pt = zoom_tensors(s.params);
    auto gt = zoom_tensors(grad);
    if (pt.size() != gt.size() || pt.size() != s.m.size())
        throw std::invalid_argument("adamw: gradient and parameters differ in shape");
    double norm2 = 0;
    for (size_t i = 0; i < pt.size(); ++i) {
        if (pt[i].values->size() != gt[i].values->size())
            throw std::invalid_argument("adamw: gradient and parameters differ in shape");
        for (const float g : *gt[i].values)
            norm2 += static_cast<double>(g) * g;
    }
    const double norm = std::sqrt(norm2);
    const double k = o.clip > 0 && norm > o.clip ? o.clip / norm : 1.0;
    s.step += 1;
    const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(s.step));
    const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(s.step));
    for (size_t i = 0; i < pt.size(); ++i) {
        auto& p = *pt[i].values;
        const auto& g = *gt[i].values;
        auto& m = s.m[i];
        auto& v = s.v[i];
        for (size_t j = 0; j < p.size(); ++j) {
            const double gj = k * g[j];
            m[j] = static_cast<float>(o.beta1 * m[j] + (1.0 - o.beta1) * gj);
            v[j] = static_cast<float>(o.beta2 * v[j] + (1.0 - o.beta2) * gj * gj);
            const double mh = m[j] / c1, vh = v[j] / c2;
            double x = p[j];
            if (pt[i].decay)
                x -= lr * o.weight_decay * x;
            x -= lr * mh / (std::sqrt(vh) + o.eps);
            p[j] = static_cast<float>(x);
        }
    }
    return norm;
}

std::vector<int64_t> zoom_minibatch(const ZoomTrainOptions& o, int64_t step, int64_t n_items) {
    if (n_items < 1)
        throw std::invalid_argument("zoom training: no examples");
    std::seed_seq seq{static_cast<uint32_t>(o.seed), static_cast<uint32_t>(o.seed >> 32),
                      static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)};
    std::mt19937_64 rng(seq);
    std::uniform_int_distribution<int64_t> pick(0, n_items - 1);
    std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(1, o.batch)));
    for (auto& x : out)
        x = pick(rng);
    return out;
}

void save_zoom_checkpoint(const ZoomTrainState& s, const std::string& config,
                          const std::string& path) {
    GgufWriter w;
    w.set_uint32("spanscope.zoom_checkpoint.version", kCheckpointVersion);
    w.set_uint64("spanscope.zoom_checkpoint.step", static_cast<uint64_t>(s.step));
    w.set_string("spanscope.zoom_checkpoint.config", config);
    w.set_string("spanscope.zoom_checkpoint.model_fingerprint", s.params.model_fingerprint);
    RouterParams params = s.params; // zoom_tensors hands out mutable views
    const auto ts = zoom_tensors(params);
    for (size_t i = 0; i < ts.size(); ++i) {
        const auto n = static_cast<int64_t>(ts[i].values->size());
        const auto id = std::to_string(i);
        w.add_tensor_f32("p." + id, TensorType::F32, {n}, *ts[i].values);
        w.add_tensor_f32("m." + id, TensorType::F32, {n}, s.m[i]);
        w.add_tensor_f32("v." + id, TensorType::F32, {n}, s.v[i]);
    }
    w.write(path);
}

ZoomTrainState load_zoom_checkpoint(const std::string& path, const std::string& config,
                                    const RouterParams& like) {
    std::unique_ptr<GgufFile> f;
    try {
        f = GgufFile::open(path);
    } catch (const std::exception& e) {
        throw std::runtime_error(path + ": not a readable checkpoint (" + e.what() + ")");
    }
    try {
        if (f->get_uint("spanscope.zoom_checkpoint.version") != kCheckpointVersion)
            throw std::runtime_error(path + ": checkpoint of another version");
        if (f->get_string("spanscope.zoom_checkpoint.config") != config)
            throw std::runtime_error(path + ": checkpoint of another training configuration ('" +
                                     f->get_string("spanscope.zoom_checkpoint.config") +
                                     "', this run: '" + config + "')");
        ZoomTrainState s = start_training(like);
        s.step = static_cast<int64_t>(f->get_uint("spanscope.zoom_checkpoint.step"));
        const auto ts = zoom_tensors(s.params);
        for (size_t i = 0; i < ts.size(); ++i) {
            const auto id = std::to_string(i);
            const size_t n = ts[i].values->size();
            *ts[i].values = tensor_floats(*f, "p." + id, n, path);
            s.m[i] = tensor_floats(*f, "m." + id, n, path);
            s.v[i] = tensor_floats(*f, "v." + id, n, path);
        }
        if (f->find_tensor("p." + std::to_string(ts.size())))
            throw std::runtime_error(path + ": checkpoint has more tensors than the parameters");
        return s;
    } catch (const GgufError& e) {
        throw std::runtime_error(path + ": malformed checkpoint (" + e.what() + ")");
    }
}

void train_zoom(ZoomTrainState& state, const std::vector<ZoomExampleSet>& train_sets,
                const std::vector<ZoomItem>& train, const std::vector<ZoomExampleSet>& held_sets,
                const std::vector<ZoomItem>& held_out, const ZoomTrainOptions& o, ThreadPool& pool,
                const std::string& checkpoint_path, const std::string& config,
                const std::function<void(const ZoomProgress&)>& progress) {
    if (train.empty())
        throw std::invalid_argument("zoom training: no training examples");
    while (state.step < o.steps) {
        ZoomProgress p;
        p.step = state.step + 1;
        p.lr = zoom_learning_rate(o, state.step);
        std::vector<ZoomItem> batch;
        for (const int64_t i : zoom_minibatch(o, state.step, static_cast<int64_t>(train.size())))
            batch.push_back(train[static_cast<size_t>(i)]);
        RouterParams grad;
        p.train = zoom_loss(state.params, train_sets, batch, o.loss, &grad, pool);
        p.grad_norm = adamw_update(state, std::move(grad), p.lr, o);
        const bool last = state.step >= o.steps;
        if (!held_out.empty() && ((o.eval_every > 0 && state.step % o.eval_every == 0) || last)) {
            p.evaluated = true;
            p.held_out = zoom_loss(state.params, held_sets, held_out, o.loss, nullptr, pool);
        }
        if (!checkpoint_path.empty() &&
            ((o.checkpoint_every > 0 && state.step % o.checkpoint_every == 0) || last))
            save_zoom_checkpoint(state, config, checkpoint_path);
        if (progress)
            progress(p);
    }
}

} // namespace spanscope
