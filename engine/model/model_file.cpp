#include "engine/model/model_file.h"

#include "engine/kernels/ops.h"
#include "engine/kernels/quant.h"
#include "engine/memory/memory_recurrent.h"
#include "engine/model/surprisal.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <variant>

namespace spanscope {

std::string shape_str(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i)
        s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

ModelFile::ModelFile(const GgufFile& g, std::string arch) : g_(g), arch_(std::move(arch)) {}

int64_t ModelFile::need_int(const std::string& suffix, int64_t lo, int64_t hi) const {
    const std::string k = key(suffix);
    if (!g_.has(k))
        throw ModelError("missing hyper-parameter " + k);
    int64_t v = 0;
    try {
        v = g_.get_int(k);
    } catch (const GgufError& e) {
        throw ModelError(k + ": " + e.what());
    }
    if (v < lo || v > hi)
        throw ModelError(k + " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "]");
    return v;
}

int64_t ModelFile::opt_int(const std::string& suffix, int64_t def, int64_t lo, int64_t hi) const {
    return has(suffix) ? need_int(suffix, lo, hi) : def;
}

double ModelFile::need_float(const std::string& suffix, double lo, double hi) const {
    const std::string k = key(suffix);
    if (!g_.has(k))
        throw ModelError("missing hyper-parameter " + k);
    double v = 0;
    try {
        v = g_.get_float(k);
    } catch (const GgufError& e) {
        throw ModelError(k + ": " + e.what());
    }
    if (!std::isfinite(v) || v < lo || v > hi)
        throw ModelError(k + " = " + std::to_string(v) + " is out of range");
    return v;
}

double ModelFile::opt_float(const std::string& suffix, double def, double lo, double hi) const {
    return has(suffix) ? need_float(suffix, lo, hi) : def;
}

bool ModelFile::opt_bool(const std::string& suffix, bool def) const {
    if (!has(suffix))
        return def;
    try {
        return g_.get_bool(key(suffix));
    } catch (const GgufError& e) {
        throw ModelError(key(suffix) + ": " + e.what());
    }
}

std::vector<int64_t> ModelFile::int_per_layer(const std::string& suffix, int64_t n, int64_t lo,
                                              int64_t hi) const {
    const std::string k = key(suffix);
    if (!g_.has(k))
        throw ModelError("missing hyper-parameter " + k);
    std::vector<int64_t> out;
    if (g_.metadata().at(k).type == GgufValueType::Array) {
        try {
            out = g_.get_int_array(k);
        } catch (const GgufError& e) {
            throw ModelError(k + ": " + e.what());
        }
        if (static_cast<int64_t>(out.size()) != n)
            throw ModelError(k + " has " + std::to_string(out.size()) + " entries for " +
                             std::to_string(n) + " layers");
    } else {
        out.assign(static_cast<size_t>(n), need_int(suffix, lo, hi));
    }
    for (size_t i = 0; i < out.size(); ++i)
        if (out[i] < lo || out[i] > hi)
            throw ModelError(k + "[" + std::to_string(i) + "] = " + std::to_string(out[i]) +
                             " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "]");
    return out;
}

std::vector<bool> ModelFile::bool_per_layer(const std::string& suffix, int64_t n) const {
    const std::string k = key(suffix);
    if (!g_.has(k))
        throw ModelError("missing hyper-parameter " + k);
    const GgufValue& v = g_.metadata().at(k);
    std::vector<bool> out;
    if (v.type == GgufValueType::Array && std::holds_alternative<std::vector<bool>>(v.data)) {
        out = std::get<std::vector<bool>>(v.data);
    } else {
        for (const int64_t x : int_per_layer(suffix, n, 0, 1))
            out.push_back(x != 0);
    }
    if (static_cast<int64_t>(out.size()) != n)
        throw ModelError(k + " has " + std::to_string(out.size()) + " entries for " +
                         std::to_string(n) + " layers");
    return out;
}

const GgufTensorInfo& ModelFile::tensor(const std::string& name,
                                        const std::vector<int64_t>& ne) const {
    const auto* t = g_.find_tensor(name);
    if (!t)
        throw ModelError("missing tensor " + name);
    if (t->ne != ne)
        throw ModelError("tensor " + name + " has shape " + shape_str(t->ne) + ", expected " +
                         shape_str(ne));
    return *t;
}

const float* ModelFile::floats(const std::string& name, const std::vector<int64_t>& ne) {
    const auto& t = tensor(name, ne);
    if (t.type == TensorType::F32)
        return reinterpret_cast<const float*>(t.data);
    if (t.type == TensorType::Q8_K || t.type == TensorType::Q8_1)
        throw ModelError("tensor " + name + " uses an activation-only type");
    const int64_t cols = t.ne[0];
    const int64_t rows = t.n_elements() / cols;
    auto& out = owned_.emplace_back(static_cast<size_t>(t.n_elements()));
    const size_t rb = row_bytes(t.type, cols);
    for (int64_t r = 0; r < rows; ++r)
        dequantize_row(t.type, t.data + r * rb, out.data() + r * cols, cols);
    return out.data();
}

WeightMatrix ModelFile::matrix(const std::string& name, int64_t cols, int64_t rows) const {
    const auto& t = tensor(name, {cols, rows});
    if (t.type == TensorType::Q8_K || t.type == TensorType::Q8_1)
        throw ModelError("tensor " + name + " uses an activation-only type");
    return WeightMatrix::from(t);
}

std::vector<WeightMatrix> ModelFile::experts(const std::string& name, int64_t cols, int64_t rows,
                                             int64_t n_expert) const {
    const auto& t = tensor(name, {cols, rows, n_expert});
    if (t.type == TensorType::Q8_K || t.type == TensorType::Q8_1)
        throw ModelError("tensor " + name + " uses an activation-only type");
    std::vector<WeightMatrix> out(static_cast<size_t>(n_expert));
    const size_t stride = row_bytes(t.type, cols);
    for (int64_t e = 0; e < n_expert; ++e) {
        auto& w = out[static_cast<size_t>(e)];
        w.type = t.type;
        w.cols = cols;
        w.rows = rows;
        w.row_stride = stride;
        w.data = t.data + static_cast<size_t>(e * rows) * stride;
    }
    return out;
}

void ModelFile::refuse_tensor(const std::string& name, const std::string& why) const {
    if (g_.find_tensor(name))
        throw ModelError("tensor " + name + " is not supported: " + why);
}

void read_model_identity(const GgufFile& g, ModelInfo& info) {
    try {
        info.name = g.has("general.name") ? g.get_string("general.name") : "";
        info.chat_template =
            g.has("tokenizer.chat_template") ? g.get_string("tokenizer.chat_template") : "";
    } catch (const GgufError& e) {
        throw ModelError(e.what());
    }
    info.instruction_tuned = !info.chat_template.empty();
}

WeightMatrix token_embedding(const ModelFile& f, ModelInfo& info) {
    const auto* embd = f.gguf().find_tensor("token_embd.weight");
    if (!embd || embd->ne.size() != 2 || embd->ne[0] != info.n_embd)
        throw ModelError("token_embd.weight missing or not [" + std::to_string(info.n_embd) +
                         ", n_vocab]");
    if (embd->ne[1] < 1 || embd->ne[1] > INT32_MAX)
        throw ModelError("token_embd.weight has " + std::to_string(embd->ne[1]) + " rows");
    info.n_vocab = static_cast<int>(embd->ne[1]);
    return WeightMatrix::from(*embd);
}

std::unique_ptr<Tokenizer> load_model_tokenizer(const GgufFile& g, int64_t n_vocab,
                                                TokenizerBuild build) {
    std::unique_ptr<Tokenizer> tok;
    try {
        tok = Tokenizer::from_gguf(g, build);
    } catch (const std::runtime_error& e) { // GgufError and the tokenizer's own errors
        throw ModelError(std::string("tokenizer: ") + e.what());
    }
    if (tok->n_vocab() != n_vocab)
        throw ModelError("the vocabulary has " + std::to_string(tok->n_vocab()) +
                         " tokens but token_embd.weight has " + std::to_string(n_vocab) + " rows");
    return tok;
}

GgufModel::GgufModel(std::unique_ptr<GgufFile> gguf, const std::string& path, std::string arch) {
    gguf_ = std::move(gguf);
    path_ = path;
    file_ = std::make_unique<ModelFile>(*gguf_, std::move(arch));
}

void GgufModel::load_tokenizer_and_output() {
    tokenizer_ = load_model_tokenizer(*gguf_, info_.n_vocab);
    output_norm_ = file_->floats("output_norm.weight", {info_.n_embd});
    output_ = output_head(*file_, tok_embd_, info_.n_embd, info_.n_vocab);
}

WeightMatrix output_head(const ModelFile& f, const WeightMatrix& tok_embd, int64_t n_embd,
                         int64_t n_vocab) {
    if (f.has_tensor("output.weight"))
        return f.matrix("output.weight", n_embd, n_vocab);
    return tok_embd;
}

void lm_head(float* x, int64_t n, int64_t n_embd, const float* norm, float eps, float scale,
             const WeightMatrix& head, const std::vector<int64_t>& logit_rows, float* logits,
             ThreadPool& pool, const SurprisalRequest* surprisal, const std::atomic<bool>* cancel) {
    for (const int64_t t : logit_rows)
        if (t < 0 || t >= n)
            throw std::invalid_argument("logit row outside the ubatch");
    // Logits are linear in the normed state, so a logit scale can multiply the state instead.
    auto finish_rows = [&](float* rows, int64_t m) {
        rms_norm(rows, norm, m, n_embd, eps);
        if (scale != 1.0f)
            for (int64_t i = 0; i < m * n_embd; ++i)
                rows[i] *= scale;
    };
    if (surprisal) {
        finish_rows(x, n);
        token_surprisal(head, x, n, surprisal->targets, surprisal->surprisal, pool, 8192, cancel);
        for (size_t r = 0; r < logit_rows.size(); ++r)
            matmul(head, x + logit_rows[r] * n_embd, 1, logits + r * head.rows, pool);
        return;
    }
    if (logit_rows.empty())
        return;
    std::vector<float> sel(logit_rows.size() * static_cast<size_t>(n_embd));
    for (size_t r = 0; r < logit_rows.size(); ++r)
        std::copy(x + logit_rows[r] * n_embd, x + (logit_rows[r] + 1) * n_embd,
                  sel.begin() + static_cast<int64_t>(r) * n_embd);
    const auto m = static_cast<int64_t>(logit_rows.size());
    finish_rows(sel.data(), m);
    matmul(head, sel.data(), m, logits, pool);
}

int64_t apply_token_filter(const TokenFilter& filter, float* x, int64_t n, int64_t n_embd,
                           std::vector<int32_t>& kept_pos) {
    const std::vector<int64_t> keep = filter.keep();
    for (size_t r = 0; r < keep.size(); ++r)
        if (keep[r] < 0 || keep[r] >= n || (r > 0 && keep[r] <= keep[r - 1]))
            throw std::invalid_argument("token filter: kept rows must be increasing indices "
                                        "into the ubatch");
    const auto m = static_cast<int64_t>(keep.size());
    for (int64_t r = 0; r < m; ++r) {
        std::copy_n(x + keep[static_cast<size_t>(r)] * n_embd, n_embd, x + r * n_embd);
        kept_pos[static_cast<size_t>(r)] =
            kept_pos[static_cast<size_t>(keep[static_cast<size_t>(r)])];
    }
    kept_pos.resize(static_cast<size_t>(m));
    return m;
}

void check_forward_inputs(const ModelInfo& info, const int32_t* tokens, const int32_t* pos,
                          int64_t n, const ModelMemory& memory) {
    if (memory.n_layers() != info.n_layer)
        throw std::invalid_argument("memory has " + std::to_string(memory.n_layers()) +
                                    " layers, the model " + std::to_string(info.n_layer));
    for (int il = 0; il < info.n_layer; ++il) {
        const auto& li = info.layers[static_cast<size_t>(il)];
        if (memory.is_recurrent(il) != li.recurrent())
            throw std::invalid_argument("memory layer " + std::to_string(il) +
                                        " is not of the "
                                        "layer's kind (" +
                                        layer_kind_name(li.kind) + ")");
        if (li.recurrent()) {
            const auto k = memory.recurrent(il).kind();
            if ((k == RecurrentKind::Mamba2) != (li.kind == LayerKind::Mamba2))
                throw std::invalid_argument("memory layer " + std::to_string(il) +
                                            " holds another kind of recurrent state");
            if (n > 0 && pos[0] != memory.recurrent(il).n_tokens())
                throw std::invalid_argument(
                    "position " + std::to_string(pos[0]) + " does not continue recurrent layer " +
                    std::to_string(il) + ", which holds " +
                    std::to_string(memory.recurrent(il).n_tokens()) + " tokens");
        }
    }
    if (info.hybrid())
        for (int64_t t = 1; t < n; ++t)
            if (pos[t] != pos[t - 1] + 1)
                throw std::invalid_argument("positions of a hybrid model's ubatch must be "
                                            "consecutive (recurrent layers)");
    for (int64_t t = 0; t < n; ++t)
        if (tokens[t] < 0 || tokens[t] >= info.n_vocab)
            throw std::invalid_argument("token id " + std::to_string(tokens[t]) +
                                        " outside the vocabulary");
}

} // namespace spanscope
