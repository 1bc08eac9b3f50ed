// Checked reading of an architecture's hyper-parameters and weights from GGUF, shared by the
// model files: every value is range-checked and every tensor's shape compared with what the
// architecture needs, and a failure throws ModelError naming the key or tensor (llama.cpp's
// llama_model_loader::get_key / create_tensor play this role there).
#pragma once

#include "engine/gguf/gguf_reader.h"
#include "engine/kernels/matmul.h"
#include "engine/model/model.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace spanscope {

/// "[a, b, c]".
std::string shape_str(const std::vector<int64_t>& ne);

/// Keys are "{arch}.{suffix}" as llama.cpp's converters write them (gguf-py constants.py).
class ModelFile {
public:
    /// `g` must outlive this object and every pointer it returns.
    ModelFile(const GgufFile& g, std::string arch);

    const GgufFile& gguf() const { return g_; }
    const std::string& arch() const { return arch_; }
    /// "{arch}.{suffix}".
    std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }
    bool has(const std::string& suffix) const { return g_.has(key(suffix)); }

    /// Integer {arch}.suffix in [lo, hi]; throws ModelError when missing, not an integer or out
    /// of range.
    int64_t need_int(const std::string& suffix, int64_t lo = 1,
                     int64_t hi = int64_t{1} << 30) const;
    /// The same with a default when the key is absent.
    int64_t opt_int(const std::string& suffix, int64_t def, int64_t lo = 1,
                    int64_t hi = int64_t{1} << 30) const;
    /// Finite float {arch}.suffix in [lo, hi]; throws ModelError as need_int.
    double need_float(const std::string& suffix, double lo, double hi) const;
    double opt_float(const std::string& suffix, double def, double lo, double hi) const;
    bool opt_bool(const std::string& suffix, bool def) const;
    /// {arch}.suffix as one integer for every layer or an array of n values (llama.cpp's
    /// get_key_or_arr), each in [lo, hi]. Throws ModelError when missing, of another length or
    /// out of range.
    std::vector<int64_t> int_per_layer(const std::string& suffix, int64_t n, int64_t lo,
                                       int64_t hi) const;
    /// {arch}.suffix as an array of n booleans (or integers 0/1). Throws ModelError otherwise.
    std::vector<bool> bool_per_layer(const std::string& suffix, int64_t n) const;

    /// The tensor `name` with dims `ne` (ggml order, ne[0] contiguous). Throws ModelError
    /// "missing tensor NAME" or "tensor NAME has shape [..], expected [..]".
    const GgufTensorInfo& tensor(const std::string& name, const std::vector<int64_t>& ne) const;
    bool has_tensor(const std::string& name) const { return g_.find_tensor(name) != nullptr; }
    /// The tensor's values as floats: the mapping itself for F32, else a dequantised copy kept
    /// by this object. Throws ModelError as tensor().
    const float* floats(const std::string& name, const std::vector<int64_t>& ne);
    /// A weight matrix {cols, rows} (y = W·x takes cols inputs to rows outputs). Throws
    /// ModelError as tensor(), or for an activation-only type.
    WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows) const;
    /// The n_expert matrices {cols, rows} of a stacked expert tensor {cols, rows, n_expert}
    /// (llama.cpp's *_exps), expert e at index e. Throws ModelError as matrix().
    std::vector<WeightMatrix> experts(const std::string& name, int64_t cols, int64_t rows,
                                      int64_t n_expert) const;
    /// Throws ModelError("... NAME ...: <why>") when the tensor exists (for tensors this
    /// implementation does not use, such as biases, so that a file needing them is refused).
    void refuse_tensor(const std::string& name, const std::string& why) const;

private:
    const GgufFile& g_;
    std::string arch_;
    std::deque<std::vector<float>> owned_;
};

/// general.name, tokenizer.chat_template, and instruction_tuned as the template's presence says
/// (an architecture may know more hints) into `info`. Throws ModelError for a value that is not
/// a string.
void read_model_identity(const GgufFile& g, ModelInfo& info);

/// token_embd.weight {n_embd, n_vocab}: its matrix, with info.n_vocab set from it (info.n_embd
/// must be set). Throws ModelError when it is missing, not info.n_embd wide, or has a row count
/// outside [1, INT32_MAX].
WeightMatrix token_embedding(const ModelFile& f, ModelInfo& info);

/// The GGUF tokenizer, built as `build` says; its errors become ModelError("tokenizer: ...").
/// Throws ModelError when its size differs from n_vocab (rows of token_embd.weight).
std::unique_ptr<Tokenizer> load_model_tokenizer(const GgufFile& g, int64_t n_vocab,
                                                TokenizerBuild build = TokenizerBuild::Full);

/// The model's output head: `output.weight` {n_embd, n_vocab} when present, else the tied
/// token embedding (llama.cpp falls back the same way).
WeightMatrix output_head(const ModelFile& f, const WeightMatrix& tok_embd, int64_t n_embd,
                         int64_t n_vocab);

/// What every CPU architecture read through ModelFile holds and loads the same way: the file
/// and path taken, the checked reader for its architecture, the token embedding, the output
/// norm and head. An architecture's constructor calls read_hparams (setting info_, tok_embd_
/// through token_embedding), then load_tokenizer_and_output, then loads its layers.
class GgufModel : public Model {
protected:
    /// Takes `gguf` (read from `path`); `arch` is the key prefix of its hyper-parameters.
    GgufModel(std::unique_ptr<GgufFile> gguf, const std::string& path, std::string arch);
    /// The tokenizer (load_model_tokenizer), output_norm.weight [n_embd] as floats and the
    /// output head (output_head). info_.n_embd and n_vocab must be set. Throws ModelError as
    /// those do.
    void load_tokenizer_and_output();

    std::unique_ptr<ModelFile> file_;
    WeightMatrix tok_embd_, output_;
    const float* output_norm_ = nullptr;
};

/// The end of every forward pass: x [n][n_embd] (final residual stream; overwritten) is
/// RMS-normed with `norm` (eps), multiplied by `scale`, then `head` gives the logits of
/// logit_rows (logits: [logit_rows.size()][n_vocab]) and, when asked, every row's surprisal
/// (surprisal.h). Throws std::invalid_argument for a logit row outside [0, n).
void lm_head(float* x, int64_t n, int64_t n_embd, const float* norm, float eps, float scale,
             const WeightMatrix& head, const std::vector<int64_t>& logit_rows, float* logits,
             ThreadPool& pool, const SurprisalRequest* surprisal, const std::atomic<bool>* cancel);

/// A token filter's cut after its layer (TokenFilter): asks filter.keep() for the rows that go
/// on, moves their residual rows x [n][n_embd] and positions kept_pos [n] to the front in order,
/// and returns how many there are (kept_pos is resized to it). Throws std::invalid_argument when
/// the kept rows are not increasing indices into [0, n).
int64_t apply_token_filter(const TokenFilter& filter, float* x, int64_t n, int64_t n_embd,
                           std::vector<int32_t>& kept_pos);

/// Checks shared by the forward passes: memory has one entry per layer and each is of the
/// layer's kind; tokens in [0, n_vocab); for a model with recurrent layers, positions that
/// continue the recurrent states (pos[0] = tokens they hold, then +1 per token: a state
/// absorbs tokens in order and cannot skip or revisit one). Throws std::invalid_argument naming
/// the problem.
void check_forward_inputs(const ModelInfo& info, const int32_t* tokens, const int32_t* pos,
                          int64_t n, const ModelMemory& memory);

} // namespace spanscope
