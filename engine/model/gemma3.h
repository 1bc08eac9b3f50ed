// Gemma 3 text model (Gemma Team 2025, "Gemma 3 Technical Report", §2; llama.cpp's
// src/models/gemma3.cpp is the reference for tensor names and metadata keys).
#pragma once

#include "engine/model/model.h"

#include <memory>
#include <string>

namespace spanscope {

class ModelFile;

/// Gemma 3's hyper-parameters from the file's metadata and tensor table (no weight is read): the
/// sizes, the RoPE bases of the global and local layers, the sliding window and its pattern
/// (every sliding_pattern-th layer global), one LayerInfo per layer, n_vocab from
/// token_embd.weight's rows, and whether the model is instruction-tuned (a chat template, or
/// "-it"/"instruct" in its name or fine-tune). Model::load and describe_model_file
/// (model_summary.h) both read a gemma3 file through it. Throws ModelError naming the first
/// missing or out-of-range key, or the variant that is not supported (partial rotation, RoPE
/// scaling, logit softcapping, an untied output.weight); GgufError for a key of the wrong type.
ModelInfo read_gemma3_hparams(const ModelFile& f);

/// Build a Gemma 3 model from an opened GGUF (general.architecture == "gemma3").
/// Throws ModelError naming the first missing key, missing tensor or shape mismatch.
std::unique_ptr<Model> load_gemma3(std::unique_ptr<GgufFile> gguf, const std::string& path);

} // namespace spanscope
